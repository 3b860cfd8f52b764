package cluster

import (
	"context"
	"crypto/tls"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// Binaries the cluster runs, as `make cluster-bin` names them in the bin directory.
var Binaries = []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok"}

const (
	// serviceClusterIPRange holds Service IPs; its first address is the kubernetes Service.
	serviceClusterIPRange = "10.96.0.0/16"
	serviceClusterIP      = "10.96.0.1"
	// podCIDR is where KWOK hands out pod IPs, counting up from the address given (a /16:
	// enough for any test's pods).
	podCIDR = "10.244.0.1/16"
	// serviceAccountIssuer is the "iss" of service-account tokens, as in a kubeadm cluster.
	serviceAccountIssuer = "https://kubernetes.default.svc.cluster.local"
	// stopGrace is how long a component gets to exit on SIGTERM before SIGKILL.
	stopGrace = 5 * time.Second
)

// ErrBinariesMissing is returned by Start when the bin directory lacks a binary.
var ErrBinariesMissing = errors.New("test cluster binaries missing")

// Options configure Start.
type Options struct {
	// BinDir holds the Binaries; defaults to DefaultBinDir().
	BinDir string
	// Dir is the working directory (certificates, etcd data, logs). Empty: a new temporary
	// directory that Stop removes. A given Dir is created if needed and kept by Stop.
	Dir string
	// KubeconfigPath is where the admin kubeconfig is written; defaults to <Dir>/kubeconfig.
	KubeconfigPath string
	// Detached starts the components so that they outlive this process (make cluster-up).
	Detached bool
	// Nodes are KWOK nodes created, and waited for to be Ready, before Start returns.
	Nodes []NodeSpec
	// RealNode adds a real node, RealNodeName: a kubelet with containerd in a network
	// namespace of the cluster's own, running real containers of images imported with
	// ImportImage or ImportGoImage. kube-apiserver then listens on this host's end of that
	// namespace's veth pair instead of 127.0.0.1. It needs root, RealNodeBinaries (make
	// cluster-bin-node) and Debian's containerd, runc and CNI plugins
	// (hack/cluster/install-node-deps.sh); RealNodeMissing says what is lacking.
	RealNode bool
	// RealNodes is how many real nodes to start (RealNode is 1): real-node, real-node-2, ...,
	// each a kubelet, containerd, kube-proxy and CoreDNS in a network namespace of its own,
	// with its own pod network (10.245.<i>.0/24). This host routes between the nodes' links,
	// and only between them, so pods reach each other across nodes by IP and by Service DNS.
	// Images are imported into every node.
	RealNodes int
	// NodeMonitorGracePeriod, when not 0, is how long the node lifecycle controller waits
	// for a node's heartbeat before it marks the node NotReady (Kubernetes' default: 50s), and
	// the real nodes renew their Leases often enough for it: what tests that kill a real
	// node (KillRealNode) want short.
	NodeMonitorGracePeriod time.Duration
	// Argo adds Argo Workflows to the real node (it requires RealNode): its CRDs, the
	// workflow controller and the executor image ArgoExecutorImage, from ArgoBinaries
	// (make cluster-bin-argo), at the Argo version trainstep pins.
	Argo bool
	// APIServerArgs are added to kube-apiserver's flags (--watch-cache=false, say).
	APIServerArgs []string
}

// Cluster is a running test cluster: etcd, kube-apiserver, kube-controller-manager,
// kube-scheduler and kwok, all on 127.0.0.1, and with Options.RealNode a kubelet and
// containerd in a network namespace (kube-apiserver then on that namespace's link).
type Cluster struct {
	// Config is an admin (system:masters) client configuration.
	Config *rest.Config
	// Client is an admin clientset built from Config.
	Client kubernetes.Interface
	// Kubeconfig is the path of an admin kubeconfig file.
	Kubeconfig string
	// BinDir is the directory holding the cluster's binaries.
	BinDir string
	// Dir is the cluster's working directory; component logs are in Dir/logs.
	Dir string
	// Server is kube-apiserver's URL.
	Server string

	dynamic     dynamic.Interface
	caPEM       []byte
	kubeletURL  string // kwok's kubelet endpoint, where container logs are served
	kubeletHTTP *http.Client
	components  []*component
	nodes       []*realNode  // the real nodes, none without Options.RealNode(s)
	files       clusterFiles // what the components read, kept to restart a real node
	detached    bool
	nodeGrace   time.Duration // Options.NodeMonitorGracePeriod
	argo        bool          // Argo's workflow controller runs in the first real node
	began       time.Time
	steps       []string // start-up milestones with their time since began
	removeDir   bool
	logsMu      sync.Mutex // serialises SetLogs' read-modify-write of Logs objects
	stopOnce    sync.Once
	// apiserverArgs are kube-apiserver's flags, to start it again
	// (RestartAPIServer); etcdURL is etcd's client URL (CompactEtcd).
	apiserverArgs, extraAPIServerArgs []string
	etcdURL                           string
	componentsMu                      sync.Mutex // guards components while kube-apiserver is replaced
}

// ports are the loopback ports of one cluster.
type ports struct {
	etcdClient, etcdPeer, apiserver, controllerManager, scheduler, kubelet int
}

// Start runs a whole cluster and returns when every component is ready and opts.Nodes are
// Ready. On error everything started so far is stopped again.
func Start(ctx context.Context, opts Options) (_ *Cluster, err error) {
	if opts.BinDir == "" {
		opts.BinDir = DefaultBinDir()
	}
	if missing := MissingBinaries(opts.BinDir); len(missing) > 0 {
		return nil, fmt.Errorf("%w in %s: %s (build them with `make cluster-bin`)",
			ErrBinariesMissing, opts.BinDir, strings.Join(missing, ", "))
	}
	realNodes := opts.RealNodes
	if opts.RealNode {
		realNodes = max(realNodes, 1)
	}
	if realNodes < 0 || realNodes > 8 {
		return nil, fmt.Errorf("starting the test cluster: Options.RealNodes is %d, want 0 to 8", opts.RealNodes)
	}
	if opts.Argo && realNodes == 0 {
		return nil, errors.New("starting the test cluster: Options.Argo needs Options.RealNode")
	}
	if opts.Argo {
		if missing := MissingBinaries(opts.BinDir, ArgoBinaries...); len(missing) > 0 {
			return nil, fmt.Errorf("%w in %s: %s (build them with `make cluster-bin-argo`)",
				ErrBinariesMissing, opts.BinDir, strings.Join(missing, ", "))
		}
	}
	if realNodes > 0 {
		if missing := RealNodeMissing(opts.BinDir); len(missing) > 0 {
			return nil, fmt.Errorf("%w: missing %s (as root: `make cluster-bin-node` and hack/cluster/install-node-deps.sh)",
				ErrRealNodeUnavailable, strings.Join(missing, ", "))
		}
	}
	c := &Cluster{BinDir: opts.BinDir, Dir: opts.Dir, detached: opts.Detached, nodeGrace: opts.NodeMonitorGracePeriod, began: time.Now(),
		extraAPIServerArgs: opts.APIServerArgs}
	if c.Dir == "" {
		if c.Dir, err = os.MkdirTemp("", "trainstep-cluster-"); err != nil {
			return nil, fmt.Errorf("creating cluster directory: %w", err)
		}
		c.removeDir = true
	}
	defer func() {
		if err != nil {
			c.Stop()
		}
	}()
	for _, sub := range []string{"pki", "logs", "etcd", "container-logs"} {
		if err := os.MkdirAll(filepath.Join(c.Dir, sub), 0o700); err != nil {
			return nil, fmt.Errorf("creating cluster directory: %w", err)
		}
	}
	if realNodes > 0 {
		if swept, err := SweepRealNodes(); err != nil {
			fmt.Fprintf(os.Stderr, "removing leftovers of earlier real nodes: %v\n", err)
		} else if len(swept) > 0 {
			fmt.Fprintf(os.Stderr, "removed leftovers of real nodes whose test process was killed: %s\n", strings.Join(swept, ", "))
		}
		for i := range realNodes {
			n, err := newRealNode(c.Dir, i)
			if err != nil {
				return nil, err
			}
			c.nodes = append(c.nodes, n)
			if err := c.recordNode(n); err != nil {
				return nil, err
			}
		}
		if err := connectNodes(c.nodes); err != nil {
			return nil, err
		}
		c.mark("node network")
	}
	c.Kubeconfig = opts.KubeconfigPath
	if c.Kubeconfig == "" {
		c.Kubeconfig = filepath.Join(c.Dir, "kubeconfig")
	}
	p, err := freePorts()
	if err != nil {
		return nil, err
	}
	files, err := c.writeConfiguration(p)
	if err != nil {
		return nil, err
	}
	c.files = files
	if err := c.startControlPlane(ctx, p, files, opts.Detached); err != nil {
		return nil, err
	}
	if err := c.startKWOK(ctx, p, files, opts.Detached); err != nil {
		return nil, err
	}
	if err := c.waitForControllers(ctx, p); err != nil {
		return nil, err
	}
	if err := c.addNodes(ctx, opts.Nodes); err != nil {
		return nil, err
	}
	c.mark("nodes Ready")
	if len(c.nodes) > 0 {
		if err := c.startRealNodes(ctx); err != nil {
			return nil, err
		}
	}
	if opts.Argo {
		if err := c.startArgo(ctx); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// Stop ends every component (SIGTERM, then SIGKILL) and removes a temporary Dir.
// It is safe to call more than once.
func (c *Cluster) Stop() {
	c.stopOnce.Do(func() {
		// The real nodes first, the last started first: their containers and mounts go while
		// containerd still answers; a node's components stopped to model a partition are let
		// go on first.
		nodeComponents := map[string]bool{}
		stop := func(name string) {
			nodeComponents[name] = true
			for _, comp := range c.components {
				if comp.name == name {
					comp.stop(stopGrace)
				}
			}
		}
		for _, n := range slices.Backward(c.nodes) {
			c.signalNode(n, syscall.SIGCONT, nodeBinaries...)
			if err := n.tearDown(stop); err != nil {
				fmt.Fprintf(os.Stderr, "stopping the real node %s: %v\n", n.Name, err)
				c.removeDir = false // a mount may be left in it
			}
		}
		// Clients of the API server first, so they do not spend the grace period retrying
		// it; then kube-apiserver; etcd last.
		var clients, apiserver, etcd []*component
		for _, comp := range c.components {
			if nodeComponents[comp.name] {
				continue // stopped with the node
			}
			switch comp.name {
			case "etcd":
				etcd = append(etcd, comp)
			case "kube-apiserver":
				apiserver = append(apiserver, comp)
			default:
				clients = append(clients, comp)
			}
		}
		for _, group := range [][]*component{clients, apiserver, etcd} {
			var wg sync.WaitGroup
			for _, comp := range group {
				wg.Add(1)
				go func() {
					defer wg.Done()
					comp.stop(stopGrace)
				}()
			}
			wg.Wait()
		}
		if c.removeDir {
			_ = os.RemoveAll(c.Dir)
		}
	})
}

// mark records a start-up milestone.
func (c *Cluster) mark(milestone string) {
	c.steps = append(c.steps, fmt.Sprintf("%s %.1fs", milestone, time.Since(c.began).Seconds()))
}

// StartupSummary says when each part of the cluster became ready, counted from Start.
func (c *Cluster) StartupSummary() string {
	return strings.Join(c.steps, ", ")
}

// LogTails returns the last n lines of every component's log, for failure reports.
func (c *Cluster) LogTails(n int) string {
	var b strings.Builder
	for _, comp := range c.components {
		fmt.Fprintf(&b, "===== %s (last %d lines of %s)\n%s\n", comp.name, n, comp.logPath, tailFile(comp.logPath, n))
	}
	return b.String()
}

// ComponentPIDs are the process IDs of the cluster's components by name
// ("etcd", "kube-apiserver", …): a benchmark reads their CPU time from
// them, apart from any other cluster's on the same machine. Each leads its
// process group.
func (c *Cluster) ComponentPIDs() map[string]int { return c.processGroups() }

// processGroups lists the components' process groups (what a detached cluster records).
func (c *Cluster) processGroups() map[string]int {
	groups := map[string]int{}
	for _, comp := range c.components {
		groups[comp.name] = comp.pgid
	}
	return groups
}

// executables lists the components' programs.
func (c *Cluster) executables() map[string]string {
	exes := map[string]string{}
	for _, comp := range c.components {
		exes[comp.name] = comp.exe
	}
	return exes
}

// MissingBinaries lists the names (default: Binaries) not present as executable files in
// binDir.
func MissingBinaries(binDir string, names ...string) []string {
	if len(names) == 0 {
		names = Binaries
	}
	var missing []string
	for _, b := range names {
		info, err := os.Stat(filepath.Join(binDir, b))
		if err != nil || info.IsDir() || info.Mode()&0o111 == 0 {
			missing = append(missing, b)
		}
	}
	return missing
}

// DefaultBinDir is $TRAINSTEP_CLUSTER_BIN, else bin/cluster at the repository root (found
// by walking up from the working directory to trainstep's go.mod).
func DefaultBinDir() string {
	if dir := os.Getenv("TRAINSTEP_CLUSTER_BIN"); dir != "" {
		return dir
	}
	root, err := moduleRoot()
	if err != nil {
		return filepath.Join("bin", "cluster")
	}
	return filepath.Join(root, "bin", "cluster")
}

// freePorts asks the kernel for unused loopback ports. They are released before the
// components bind them; on a test machine nothing else races for them in that instant.
func freePorts() (ports, error) {
	var list [6]int
	var listeners []net.Listener
	defer func() {
		for _, l := range listeners {
			_ = l.Close()
		}
	}()
	for i := range list {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return ports{}, fmt.Errorf("finding a free port: %w", err)
		}
		listeners = append(listeners, l)
		list[i] = l.Addr().(*net.TCPAddr).Port
	}
	return ports{list[0], list[1], list[2], list[3], list[4], list[5]}, nil
}

// proxyClientName is the aggregator's client certificate's name, the one
// name an APIService's server accepts request headers from.
const proxyClientName = "front-proxy-client"

// clusterFiles are the paths of the configuration the components read.
type clusterFiles struct {
	ca, apiserverCert, apiserverKey, kubeletClientCert, kubeletClientKey string
	// proxyClientCert and proxyClientKey are how kube-apiserver's aggregator
	// authenticates to the servers of APIServices (a test's own
	// metrics.k8s.io, say).
	proxyClientCert, proxyClientKey                                  string
	kubeletCert, kubeletKey                                          string
	serviceAccountKey, serviceAccountPub                             string
	controllerManagerKubeconfig, schedulerKubeconfig, kwokKubeconfig string
	kwokConfig                                                       string
	node                                                             nodeFiles
}

// writeConfiguration creates the PKI, kubeconfigs and kwok's Stages, and fills in the
// admin client fields of c.
func (c *Cluster) writeConfiguration(p ports) (clusterFiles, error) {
	pki := filepath.Join(c.Dir, "pki")
	ca, err := newAuthority()
	if err != nil {
		return clusterFiles{}, err
	}
	c.caPEM = ca.certPEM
	host := "127.0.0.1"
	for _, n := range c.nodes {
		// Serving certificates name both ends of every node's link; the API server is on
		// this host's end of the first.
		ca.servingIPs = append(ca.servingIPs, net.ParseIP(n.Network.HostIP), net.ParseIP(n.Network.NodeIP))
	}
	if len(c.nodes) > 0 {
		host = c.nodes[0].Network.HostIP
	}
	f := clusterFiles{ca: filepath.Join(pki, "ca.crt"), kwokConfig: filepath.Join(c.Dir, "kwok.yaml")}
	kwokConfig := append(append([]byte{}, stagesYAML...), clusterLogsYAML(c.noOutputLog())...)
	if err := writeFiles(map[string][]byte{f.ca: ca.certPEM, f.kwokConfig: kwokConfig, c.noOutputLog(): nil}); err != nil {
		return clusterFiles{}, err
	}
	apiserver, err := ca.issue(pki, "kube-apiserver", pkix.Name{CommonName: "kube-apiserver"}, true,
		"kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local")
	if err != nil {
		return clusterFiles{}, err
	}
	kubelet, err := ca.issue(pki, "kwok-kubelet", pkix.Name{CommonName: "kwok-kubelet"}, true)
	if err != nil {
		return clusterFiles{}, err
	}
	f.apiserverCert, f.apiserverKey = apiserver.CertFile, apiserver.KeyFile
	f.kubeletCert, f.kubeletKey = kubelet.CertFile, kubelet.KeyFile
	if f.serviceAccountKey, f.serviceAccountPub, err = writeServiceAccountKey(pki); err != nil {
		return clusterFiles{}, err
	}

	c.Server = "https://" + host + ":" + strconv.Itoa(p.apiserver)
	c.kubeletURL = "https://127.0.0.1:" + strconv.Itoa(p.kubelet)
	clients := []struct {
		name    string
		subject pkix.Name
		path    *string
	}{
		// The admin identity every test and `make cluster-up` user starts from.
		{"admin", pkix.Name{CommonName: "trainstep-admin", Organization: []string{"system:masters"}}, &c.Kubeconfig},
		// The built-in RBAC roles for these two user names are what real clusters use.
		{"kube-controller-manager", pkix.Name{CommonName: "system:kube-controller-manager"}, &f.controllerManagerKubeconfig},
		{"kube-scheduler", pkix.Name{CommonName: "system:kube-scheduler"}, &f.schedulerKubeconfig},
		// kwok plays every kubelet and patches any pod's status.
		{"kwok", pkix.Name{CommonName: "kwok", Organization: []string{"system:masters"}}, &f.kwokKubeconfig},
		// How kube-apiserver authenticates to kubelets (kwok) for logs.
		{"kube-apiserver-kubelet-client", pkix.Name{CommonName: "kube-apiserver-kubelet-client", Organization: []string{"system:masters"}}, nil},
		// How its aggregator authenticates to the servers behind APIServices.
		{proxyClientName, pkix.Name{CommonName: proxyClientName}, nil},
	}
	for _, client := range clients {
		pair, err := ca.issue(pki, client.name, client.subject, false)
		if err != nil {
			return clusterFiles{}, err
		}
		creds := credentials{certPEM: pair.CertPEM, keyPEM: pair.KeyPEM}
		switch {
		case client.name == "admin":
			c.Config = restConfigFor(c.Server, c.caPEM, creds)
		case client.name == "kube-apiserver-kubelet-client":
			f.kubeletClientCert, f.kubeletClientKey = pair.CertFile, pair.KeyFile
			continue
		}
		if client.name == proxyClientName {
			f.proxyClientCert, f.proxyClientKey = pair.CertFile, pair.KeyFile
			continue
		}
		if *client.path == "" {
			*client.path = filepath.Join(c.Dir, client.name+".kubeconfig")
		}
		if err := writeKubeconfig(*client.path, c.Server, c.caPEM, creds, ""); err != nil {
			return clusterFiles{}, err
		}
	}
	if len(c.nodes) > 0 {
		if f.node, err = c.writeNodeCredentials(ca, pki); err != nil {
			return clusterFiles{}, err
		}
		if err := c.writeArgoCredentials(ca, pki); err != nil {
			return clusterFiles{}, err
		}
	}
	if c.Client, err = kubernetes.NewForConfig(c.Config); err != nil {
		return clusterFiles{}, fmt.Errorf("creating admin client: %w", err)
	}
	if c.dynamic, err = dynamic.NewForConfig(c.Config); err != nil {
		return clusterFiles{}, fmt.Errorf("creating admin dynamic client: %w", err)
	}
	c.kubeletHTTP = &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: certPool(c.caPEM), MinVersion: tls.VersionTLS12},
	}}
	return f, nil
}
