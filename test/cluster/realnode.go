package cluster

import (
	"context"
	"crypto/x509/pkix"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

// RealNodeName is the name the first real node's kubelet registers (Options.RealNode); the
// ones after it (Options.RealNodes) are real-node-2, real-node-3, ...
const RealNodeName = "real-node"

// realNodeName is the name of the real node of index i (0 for the first).
func realNodeName(i int) string {
	if i == 0 {
		return RealNodeName
	}
	return fmt.Sprintf("%s-%d", RealNodeName, i+1)
}

// RealNodeBinaries are what Options.RealNode needs in the bin directory besides Binaries,
// as `make cluster-bin-node` names them.
var RealNodeBinaries = []string{"kubelet", "kube-proxy", "pause", "coredns"}

// realNodePrograms come from Debian packages (hack/cluster/install-node-deps.sh).
var realNodePrograms = []string{"containerd", "containerd-shim-runc-v2", "runc", "ctr", "ip", "nsenter", "iptables"}

// cniPluginDir is where Debian's containernetworking-plugins installs the plugins the node's
// network uses.
const cniPluginDir = "/usr/lib/cni"

var cniPlugins = []string{"bridge", "host-local", "loopback", "portmap"}

const (
	// realNodePodRange holds every real node's pod IPs (apart from the addresses KWOK hands
	// out, so the two never collide): node i has the /24 10.245.i.0 on the cni0 bridge in
	// its namespace (realNodePodCIDR).
	realNodePodRange = "10.245.0.0/16"
	// kubeletPort is the kubelet's API on the node IP; the namespace is the cluster's own,
	// so the well-known port is free.
	kubeletPort = 10250
	// realNodeReadyTimeout bounds containerd's and the kubelet's start and registration.
	realNodeReadyTimeout = 2 * time.Minute
	// criNamespace is the containerd namespace the CRI plugin keeps pods and images in.
	criNamespace = "k8s.io"
)

// kubeletSysctls are the host-wide settings the kubelet sets at start (vm.overcommit_memory=1,
// kernel.panic=10, ...). The real node records their values before and puts them back when
// it stops.
var kubeletSysctls = []string{
	"vm/overcommit_memory", "vm/panic_on_oom", "kernel/panic", "kernel/panic_on_oops",
	"kernel/keys/root_maxkeys", "kernel/keys/root_maxbytes",
}

// realNodePodCIDR is the pod network of the real node of index i.
func realNodePodCIDR(i int) string { return fmt.Sprintf("10.245.%d.0/24", i) }

// ErrRealNodeUnavailable is returned by Start when Options.RealNode is set and the machine
// lacks something the node needs.
var ErrRealNodeUnavailable = errors.New("the real node cannot run on this machine")

// RealNodeMissing lists what Options.RealNode needs and this machine lacks: binaries in
// binDir, programs from Debian packages, CNI plugins, root.
func RealNodeMissing(binDir string) []string {
	missing := MissingBinaries(binDir, RealNodeBinaries...)
	for _, program := range realNodePrograms {
		if _, err := exec.LookPath(program); err != nil {
			missing = append(missing, program)
		}
	}
	for _, plugin := range cniPlugins {
		if _, err := os.Stat(filepath.Join(cniPluginDir, plugin)); err != nil {
			missing = append(missing, filepath.Join(cniPluginDir, plugin))
		}
	}
	if os.Geteuid() != 0 {
		missing = append(missing, "root")
	}
	return missing
}

// nodeState is what running and tearing down a real node needs; a detached cluster records it.
type nodeState struct {
	// Name is the Node's name; Suffix ends its components' names and log files ("" for the
	// first node: kubelet, containerd; "-2" for real-node-2: kubelet-2, containerd-2).
	Name   string `json:"name,omitempty"`
	Suffix string `json:"suffix,omitempty"`
	// PodCIDR holds the node's pod IPs.
	PodCIDR string `json:"podCIDR,omitempty"`
	// Dir holds everything of the node: containerd's root and state, the kubelet's root,
	// pod logs, CNI configuration and IP leases.
	Dir              string      `json:"dir"`
	Network          nodeNetwork `json:"network"`
	ContainerdSocket string      `json:"containerdSocket"`
	// CNINetwork names the pod network; libcni caches results under its name.
	CNINetwork string `json:"cniNetwork"`
	// Sysctls are the kubeletSysctls' values before the first node's kubelet started (the
	// nodes after it record none: their kubelets found the first one's values).
	Sysctls map[string]string `json:"sysctls,omitempty"`
}

// component is the name of the node's component running binary.
func (s nodeState) component(binary string) string { return binary + s.Suffix }

// nodeBinaries are the programs that run as a real node's components.
var nodeBinaries = []string{"containerd", "kubelet", "kube-proxy", "coredns", "workflow-controller"}

// realNode is a running real node: containerd and the kubelet in a network namespace.
type realNode struct {
	nodeState
	// The kubelet's credentials: its client kubeconfig and serving certificate.
	kubeconfig, servingCert, servingKey string
	// down is set while the node is killed (KillRealNode), until RestartRealNode.
	down bool
}

// nodeFiles are the credentials every real node's kube-proxy and CoreDNS share, written with
// the cluster's configuration.
type nodeFiles struct {
	proxyKubeconfig, dnsKubeconfig string
}

// newRealNode creates the network namespace of the real node of index i; the control plane
// starts after it, on the host's address of the first node's network.
func newRealNode(clusterDir string, i int) (*realNode, error) {
	network, err := createNodeNetwork()
	if err != nil {
		return nil, err
	}
	return &realNode{nodeState: realNodeState(clusterDir, i, network)}, nil
}

// realNodeState names the real node of index i and places its files under clusterDir.
func realNodeState(clusterDir string, i int, network nodeNetwork) nodeState {
	s := nodeState{
		Name:       realNodeName(i),
		PodCIDR:    realNodePodCIDR(i),
		Dir:        filepath.Join(clusterDir, "node"),
		Network:    network,
		CNINetwork: network.Namespace,
	}
	if i > 0 {
		s.Suffix = fmt.Sprintf("-%d", i+1)
		s.Dir += s.Suffix
	}
	s.ContainerdSocket = filepath.Join(s.Dir, "containerd.sock")
	return s
}

// writeNodeCredentials issues every kubelet's client identity (system:node:<name> in
// system:nodes, what the Node authorizer expects) and its serving certificate for its node
// IP, and the identities kube-proxy and CoreDNS share on every node.
func (c *Cluster) writeNodeCredentials(ca *authority, pki string) (nodeFiles, error) {
	for _, n := range c.nodes {
		client, err := ca.issue(pki, "kubelet-client"+n.Suffix, pkix.Name{
			CommonName: "system:node:" + n.Name, Organization: []string{"system:nodes"},
		}, false)
		if err != nil {
			return nodeFiles{}, err
		}
		serving, err := ca.issue(pki, "kubelet"+n.Suffix, pkix.Name{CommonName: n.Name}, true, n.Name)
		if err != nil {
			return nodeFiles{}, err
		}
		n.kubeconfig, n.servingCert, n.servingKey = filepath.Join(c.Dir, "kubelet"+n.Suffix+".kubeconfig"), serving.CertFile, serving.KeyFile
		creds := credentials{certPEM: client.CertPEM, keyPEM: client.KeyPEM}
		if err := writeKubeconfig(n.kubeconfig, c.Server, c.caPEM, creds, ""); err != nil {
			return nodeFiles{}, err
		}
	}
	// The built-in system:node-proxier binding grants kube-proxy's user name what it reads.
	proxy, err := ca.issue(pki, "kube-proxy", pkix.Name{CommonName: "system:kube-proxy"}, false)
	if err != nil {
		return nodeFiles{}, err
	}
	dns, err := ca.issue(pki, "coredns", pkix.Name{CommonName: dnsUser}, false)
	if err != nil {
		return nodeFiles{}, err
	}
	f := nodeFiles{
		proxyKubeconfig: filepath.Join(c.Dir, "kube-proxy.kubeconfig"), dnsKubeconfig: filepath.Join(c.Dir, "coredns.kubeconfig"),
	}
	for path, pair := range map[string]keyPair{f.proxyKubeconfig: proxy, f.dnsKubeconfig: dns} {
		creds := credentials{certPEM: pair.CertPEM, keyPEM: pair.KeyPEM}
		if err := writeKubeconfig(path, c.Server, c.caPEM, creds, ""); err != nil {
			return nodeFiles{}, err
		}
	}
	return f, nil
}

// startRealNodes records the sysctls the first kubelet is about to change, then starts
// every real node, one after the other.
func (c *Cluster) startRealNodes(ctx context.Context) error {
	first := c.nodes[0]
	var err error
	if first.Sysctls, err = readSysctls(); err != nil {
		return err
	}
	if err := c.recordNode(first); err != nil {
		return err
	}
	for _, n := range c.nodes {
		if err := c.startRealNode(ctx, n); err != nil {
			return err
		}
	}
	return nil
}

// startRealNode starts containerd, the kubelet, kube-proxy and CoreDNS in the node's
// namespace and returns once the node is Ready and schedulable and Services and DNS work.
func (c *Cluster) startRealNode(ctx context.Context, n *realNode) error {
	ctx, cancel := context.WithTimeout(ctx, realNodeReadyTimeout)
	defer cancel()
	containerd, err := c.startContainerd(ctx, n)
	if err != nil {
		return err
	}
	kubelet, err := c.startKubelet(ctx, n, containerd)
	if err != nil {
		return err
	}
	if err := c.startKubeProxy(ctx, n, containerd, kubelet); err != nil {
		return err
	}
	return c.startCoreDNS(ctx, n, containerd, kubelet)
}

// startContainerd starts the node's containerd with its CNI configuration and imports the
// pause image into it.
func (c *Cluster) startContainerd(ctx context.Context, n *realNode) (*component, error) {
	for _, sub := range []string{"containerd", "cni/net.d", "cni/ipam", "kubelet", "pod-logs", "volume-plugins", "runc"} {
		if err := os.MkdirAll(filepath.Join(n.Dir, sub), 0o700); err != nil {
			return nil, fmt.Errorf("creating the node's directories: %w", err)
		}
	}
	containerdConfig := filepath.Join(n.Dir, "containerd.toml")
	cniConfig, err := n.cniConfig()
	if err != nil {
		return nil, err
	}
	err = writeFiles(map[string][]byte{
		containerdConfig: []byte(n.containerdConfig()),
		filepath.Join(n.Dir, "cni/net.d/10-trainstep.conflist"): cniConfig,
	})
	if err != nil {
		return nil, err
	}
	containerd, err := c.startInNode(n, "containerd", "--config", containerdConfig)
	if err != nil {
		return nil, err
	}
	answers := func(ctx context.Context) (bool, error) {
		_, err := n.ctr(ctx, "version")
		return err == nil, err
	}
	if err := waitFor(ctx, "containerd", []*component{containerd}, answers); err != nil {
		return nil, err
	}
	c.mark(n.component("containerd"))
	if err := n.importPauseImage(ctx, c.BinDir); err != nil {
		return nil, err
	}
	c.mark(n.component("pause image"))
	return containerd, nil
}

// startKubelet starts the node's kubelet and waits until it has registered the node and the
// node is Ready and schedulable.
func (c *Cluster) startKubelet(ctx context.Context, n *realNode, containerd *component) (*component, error) {
	kubeletConfig, err := n.kubeletConfig(c.files, c.nodeLeaseSeconds())
	if err != nil {
		return nil, err
	}
	if err := writeFiles(map[string][]byte{filepath.Join(n.Dir, "kubelet.yaml"): kubeletConfig}); err != nil {
		return nil, err
	}
	kubelet, err := c.startInNode(n, "kubelet",
		"--config="+filepath.Join(n.Dir, "kubelet.yaml"),
		"--kubeconfig="+n.kubeconfig,
		"--hostname-override="+n.Name,
		"--node-ip="+n.Network.NodeIP,
		"--root-dir="+filepath.Join(n.Dir, "kubelet"),
		"--cert-dir="+filepath.Join(n.Dir, "kubelet", "pki"),
	)
	if err != nil {
		return nil, err
	}
	schedulable := func(ctx context.Context) (bool, error) {
		node, err := c.Client.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return nodeSchedulable(node), nil
	}
	if err := waitFor(ctx, "the real node "+n.Name+" to be Ready", []*component{containerd, kubelet}, schedulable); err != nil {
		return nil, err
	}
	c.mark(n.Name + " Ready")
	return kubelet, nil
}

// kubeProxyHealthzPort is kube-proxy's health endpoint on the node IP.
const kubeProxyHealthzPort = 10256

// startKubeProxy runs kube-proxy in iptables mode in the node's namespace (its rules stay
// there) and waits until it has programmed the Services once.
func (c *Cluster) startKubeProxy(ctx context.Context, n *realNode, watched ...*component) error {
	healthz := n.Network.NodeIP + ":" + strconv.Itoa(kubeProxyHealthzPort)
	config := map[string]any{
		"apiVersion":         "kubeproxy.config.k8s.io/v1alpha1",
		"kind":               "KubeProxyConfiguration",
		"clientConnection":   map[string]string{"kubeconfig": c.files.node.proxyKubeconfig},
		"hostnameOverride":   n.Name,
		"mode":               "iptables",
		"clusterCIDR":        realNodePodRange,
		"healthzBindAddress": healthz,
		"metricsBindAddress": "127.0.0.1:10249",
		"nodePortAddresses":  []string{n.Network.NodeIP + "/32"},
		// Zeros leave conntrack's table size and timeouts alone: they are host-wide.
		"conntrack": map[string]any{"maxPerCore": 0, "min": 0, "tcpEstablishedTimeout": "0s", "tcpCloseWaitTimeout": "0s"},
	}
	data, err := yaml.Marshal(config)
	if err != nil {
		return fmt.Errorf("writing the kube-proxy configuration: %w", err)
	}
	path := filepath.Join(n.Dir, "kube-proxy.yaml")
	if err := writeFiles(map[string][]byte{path: data}); err != nil {
		return err
	}
	proxy, err := c.startInNode(n, "kube-proxy", "--config="+path)
	if err != nil {
		return err
	}
	plain := &http.Client{Timeout: 2 * time.Second}
	if err := waitFor(ctx, "kube-proxy /healthz", append(watched, proxy), httpOK(plain, "http://"+healthz+"/healthz")); err != nil {
		return err
	}
	c.mark(n.component("kube-proxy"))
	return nil
}

// startInNode starts binary as a component inside the node's network namespace. Only the
// network namespace is entered: mounts made by the kubelet and containerd are the host's, so
// each sees the other's volumes and root file systems.
func (c *Cluster) startInNode(n *realNode, binary string, args ...string) (*component, error) {
	return c.startInNodeWithEnv(n, binary, nil, args...)
}

// startInNodeWithEnv is startInNode with environment variables (NAME=value) added.
func (c *Cluster) startInNodeWithEnv(n *realNode, binary string, env []string, args ...string) (*component, error) {
	exe, err := c.nodeExecutable(binary)
	if err != nil {
		return nil, err
	}
	argv := []string{"nsenter", "--net=" + n.Network.namespacePath(), "--"}
	if len(env) > 0 {
		argv = append(append(append(argv, "env"), env...), exe)
	} else {
		argv = append(argv, exe)
	}
	argv = append(argv, args...)
	comp, err := startProcess(filepath.Join(c.Dir, "logs"), n.component(binary), exe, c.detached, argv)
	if err != nil {
		return nil, err
	}
	c.components = append(c.components, comp)
	return comp, nil
}

// nodeExecutable is the path of a node component: the bin directory's kubelet and
// kube-proxy, the system's containerd.
func (c *Cluster) nodeExecutable(name string) (string, error) {
	for _, b := range append(RealNodeBinaries, ArgoBinaries...) {
		if b == name {
			return filepath.Join(c.BinDir, name), nil
		}
	}
	path, err := exec.LookPath(name)
	if err != nil {
		return "", fmt.Errorf("finding %s: %w", name, err)
	}
	return path, nil
}

// containerdConfig keeps everything of this containerd in the node's directory: its
// socket, root, state, runc's state; the pause image is the local one, the CNI
// configuration the node's own.
func (n *realNode) containerdConfig() string {
	q := strconv.Quote
	return `version = 2
root = ` + q(filepath.Join(n.Dir, "containerd", "root")) + `
state = ` + q(filepath.Join(n.Dir, "containerd", "state")) + `
# Plugins that would write outside the node's directory or are of no use here.
disabled_plugins = ["io.containerd.internal.v1.opt", "io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.zfs", "io.containerd.tracing.processor.v1.otlp", "io.containerd.internal.v1.tracing"]

[grpc]
  address = ` + q(n.ContainerdSocket) + `

[ttrpc]
  address = ` + q(n.ContainerdSocket+".ttrpc") + `

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = ` + q(PauseImage) + `
  # The test process may itself run with a raised OOM score; containers must not go below it.
  restrict_oom_score_adj = true
  netns_mounts_under_state_dir = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        Root = ` + q(filepath.Join(n.Dir, "runc")) + `
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = ` + q(cniPluginDir) + `
    conf_dir = ` + q(filepath.Join(n.Dir, "cni", "net.d")) + `
`
}

// cniConfig is the pod network: a bridge in the node's namespace, pod IPs from the node's
// PodCIDR (leases kept in the node's directory), and host ports. Nothing is masqueraded:
// this host routes every node's pod network (connectNodes), so pods reach the API server and
// each other, across nodes too, by their own addresses, as the Kubernetes network model has it.
func (n *realNode) cniConfig() ([]byte, error) {
	config := map[string]any{
		"cniVersion": "0.4.0",
		"name":       n.CNINetwork,
		"plugins": []any{
			map[string]any{
				"type":        "bridge",
				"bridge":      "cni0",
				"isGateway":   true,
				"ipMasq":      false,
				"hairpinMode": true,
				"ipam": map[string]any{
					"type":    "host-local",
					"ranges":  [][]map[string]string{{{"subnet": n.PodCIDR}}},
					"routes":  []map[string]string{{"dst": "0.0.0.0/0"}},
					"dataDir": filepath.Join(n.Dir, "cni", "ipam"),
				},
			},
			map[string]any{"type": "portmap", "capabilities": map[string]bool{"portMappings": true}},
		},
	}
	data, err := json.MarshalIndent(config, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("writing the CNI configuration: %w", err)
	}
	return data, nil
}

// kubeletConfig is the kubelet's configuration for a node that shares this machine: cgroupfs
// without per-QoS cgroups (no systemd here, cgroup v1 allowed), no swap check, eviction and
// image garbage collection only at a full disk (images are imported, never pulled, so one
// collected could not come back), the node's CoreDNS as the pods' nameserver. leaseSeconds,
// when not 0, is the node Lease's duration (the kubelet renews it every quarter of that).
func (n *realNode) kubeletConfig(f clusterFiles, leaseSeconds int) ([]byte, error) {
	config := map[string]any{
		"apiVersion":         "kubelet.config.k8s.io/v1beta1",
		"kind":               "KubeletConfiguration",
		"address":            n.Network.NodeIP,
		"port":               kubeletPort,
		"readOnlyPort":       0,
		"healthzBindAddress": n.Network.NodeIP,
		"tlsCertFile":        n.servingCert,
		"tlsPrivateKeyFile":  n.servingKey,
		"authentication": map[string]any{
			"anonymous": map[string]bool{"enabled": false},
			"webhook":   map[string]bool{"enabled": true},
			"x509":      map[string]string{"clientCAFile": f.ca},
		},
		"authorization":            map[string]string{"mode": "Webhook"},
		"containerRuntimeEndpoint": "unix://" + n.ContainerdSocket,
		"cgroupDriver":             "cgroupfs",
		"cgroupsPerQOS":            false,
		"enforceNodeAllocatable":   []string{},
		"failCgroupV1":             false,
		"failSwapOn":               false,
		"clusterDomain":            clusterDomain,
		// CoreDNS on the node IP; it serves cluster.local only (no upstream).
		"clusterDNS":                  []string{n.Network.NodeIP},
		"resolvConf":                  "",
		"podLogsDir":                  filepath.Join(n.Dir, "pod-logs"),
		"volumePluginDir":             filepath.Join(n.Dir, "volume-plugins"),
		"imageGCHighThresholdPercent": 100,
		"imageGCLowThresholdPercent":  99,
		"evictionHard":                map[string]string{"memory.available": "1Mi", "nodefs.available": "1%", "nodefs.inodesFree": "1%", "imagefs.available": "1%"},
		"rotateCertificates":          false,
		"serverTLSBootstrap":          false,
		"registerNode":                true,
		"maxPods":                     110,
	}
	if leaseSeconds > 0 {
		config["nodeLeaseDurationSeconds"] = leaseSeconds
	}
	data, err := yaml.Marshal(config)
	if err != nil {
		return nil, fmt.Errorf("writing the kubelet configuration: %w", err)
	}
	return data, nil
}

// ctr runs containerd's ctr against the node's containerd, in the CRI's namespace.
func (n *realNode) ctr(ctx context.Context, args ...string) (string, error) {
	argv := append([]string{"--address", n.ContainerdSocket, "--namespace", criNamespace}, args...)
	out, err := exec.CommandContext(ctx, "ctr", argv...).CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("ctr %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return string(out), nil
}

// importImage imports an image archive into the node's containerd (unpacked, ready to run).
func (n *realNode) importImage(ctx context.Context, archive string) error {
	if _, err := n.ctr(ctx, "images", "import", archive); err != nil {
		return fmt.Errorf("importing image archive %s: %w", archive, err)
	}
	return nil
}

// importPauseImage packs the bin directory's pause into PauseImage and imports it.
func (n *realNode) importPauseImage(ctx context.Context, binDir string) error {
	data, err := os.ReadFile(filepath.Join(binDir, "pause"))
	if err != nil {
		return fmt.Errorf("reading the pause binary: %w", err)
	}
	archive := filepath.Join(n.Dir, "pause-image.tar")
	defer os.Remove(archive)
	if err := writeImageArchive(archive, PauseImage, []string{"/pause"}, []imageFile{{path: "/pause", mode: 0o755, data: data}}); err != nil {
		return err
	}
	return n.importImage(ctx, archive)
}

// readSysctls reads kubeletSysctls.
func readSysctls() (map[string]string, error) {
	values := map[string]string{}
	for _, name := range kubeletSysctls {
		data, err := os.ReadFile("/proc/sys/" + name)
		if err != nil {
			return nil, fmt.Errorf("reading sysctl %s: %w", name, err)
		}
		values[name] = strings.TrimSpace(string(data))
	}
	return values, nil
}

// RealNodeInfo describes a real node of a cluster.
type RealNodeInfo struct {
	// Name is the Node's name.
	Name string
	// PodCIDR holds the IPs of the node's pods.
	PodCIDR string
	// Namespace is the node's network namespace (`ip netns exec <Namespace> ...`).
	Namespace string
	// NodeIP is the node's address; HostIP this host's end of the link, where
	// kube-apiserver listens.
	NodeIP, HostIP string
	// ContainerdSocket is the node's containerd (`ctr --address <ContainerdSocket> -n k8s.io ...`).
	ContainerdSocket string
	// Dir holds the node's files: containerd's root and state, the kubelet's root, pod logs.
	Dir string
}

// RealNode describes the cluster's first real node, RealNodeName; ok is false without
// Options.RealNode.
func (c *Cluster) RealNode() (info RealNodeInfo, ok bool) {
	if len(c.nodes) == 0 {
		return RealNodeInfo{}, false
	}
	return c.nodes[0].info(), true
}

// RealNodes describes every real node of the cluster, the first one first.
func (c *Cluster) RealNodes() []RealNodeInfo {
	infos := make([]RealNodeInfo, len(c.nodes))
	for i, n := range c.nodes {
		infos[i] = n.info()
	}
	return infos
}

func (n *realNode) info() RealNodeInfo {
	return RealNodeInfo{
		Name: n.Name, PodCIDR: n.PodCIDR,
		Namespace: n.Network.Namespace, NodeIP: n.Network.NodeIP, HostIP: n.Network.HostIP,
		ContainerdSocket: n.ContainerdSocket, Dir: n.Dir,
	}
}
