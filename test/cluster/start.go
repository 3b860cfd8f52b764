package cluster

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strconv"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// kwokNodeAnnotation marks the nodes kwok manages (it is started with
// --manage-nodes-with-annotation-selector, not --manage-all-nodes).
const kwokNodeAnnotation = "kwok.x-k8s.io/node"

// featureGates turn on Kubernetes' own gang scheduling (KEP-4671: the Workload and
// PodGroup API, the scheduler's GangScheduling plugin, the PodGroup protection
// controller); it is beta and off by default in 1.37. kube-apiserver,
// kube-scheduler and kube-controller-manager must agree.
const featureGates = "--feature-gates=GenericWorkload=true"

// runtimeConfig serves the PodGroup API's group version: a beta API is not
// served by default.
const runtimeConfig = "--runtime-config=scheduling.k8s.io/v1beta1=true"

func (c *Cluster) startControlPlane(ctx context.Context, p ports, f clusterFiles, detached bool) error {
	logs := filepath.Join(c.Dir, "logs")
	etcdClient := "http://127.0.0.1:" + strconv.Itoa(p.etcdClient)
	etcdPeer := "http://127.0.0.1:" + strconv.Itoa(p.etcdPeer)
	etcd, err := c.start(logs, "etcd", detached,
		"--name=trainstep",
		"--data-dir="+filepath.Join(c.Dir, "etcd"),
		"--listen-client-urls="+etcdClient,
		"--advertise-client-urls="+etcdClient,
		"--listen-peer-urls="+etcdPeer,
		"--initial-advertise-peer-urls="+etcdPeer,
		"--initial-cluster=trainstep="+etcdPeer,
		// A throw-away cluster: durability on power loss buys nothing and fsync costs seconds.
		"--unsafe-no-fsync=true",
		// Jobs of thousands of replicas (the benchmarks' 2048 workers, ~100 KB pods) write
		// gigabytes between compactions: the largest quota etcd recommends instead of 2 GiB.
		"--quota-backend-bytes=8589934592",
		"--log-level=warn",
	)
	if err != nil {
		return err
	}
	plain := &http.Client{Timeout: 2 * time.Second}
	if err := waitFor(ctx, "etcd", []*component{etcd}, httpOK(plain, etcdClient+"/health")); err != nil {
		return err
	}
	c.mark("etcd")

	c.etcdURL = etcdClient
	c.apiserverArgs = append([]string{
		"--etcd-servers=" + etcdClient,
		"--secure-port=" + strconv.Itoa(p.apiserver),
		"--tls-cert-file=" + f.apiserverCert,
		"--tls-private-key-file=" + f.apiserverKey,
		"--client-ca-file=" + f.ca,
		"--authorization-mode=Node,RBAC",
		"--service-account-issuer=" + serviceAccountIssuer,
		"--service-account-key-file=" + f.serviceAccountPub,
		"--service-account-signing-key-file=" + f.serviceAccountKey,
		"--service-cluster-ip-range=" + serviceClusterIPRange,
		// Container logs: kube-apiserver calls kwok's kubelet endpoint at the node's
		// InternalIP (127.0.0.1) and verifies its certificate against the cluster CA.
		"--kubelet-client-certificate=" + f.kubeletClientCert,
		"--kubelet-client-key=" + f.kubeletClientKey,
		"--kubelet-certificate-authority=" + f.ca,
		"--kubelet-preferred-address-types=InternalIP",
		"--allow-privileged=true",
		// /debug/pprof (admins only): the benchmarks have kube-apiserver
		// collect its garbage before each measured launch.
		"--profiling=true",
		// Compacting every minute instead of five lets etcd reuse the pages of
		// the large jobs' old revisions sooner.
		"--etcd-compaction-interval=1m",
		// Webhooks (StartKueue's) and aggregated APIs (metrics.k8s.io, which a
		// test serves) are dialled at their Service's endpoints: no kube-proxy
		// on this host routes a cluster IP. The aggregator sends the front
		// proxy's client certificate, and the server trusts the user in its
		// headers.
		"--enable-aggregator-routing=true",
		"--proxy-client-cert-file=" + f.proxyClientCert,
		"--proxy-client-key-file=" + f.proxyClientKey,
		"--requestheader-client-ca-file=" + f.ca,
		"--requestheader-allowed-names=" + proxyClientName,
		"--requestheader-username-headers=X-Remote-User",
		"--requestheader-group-headers=X-Remote-Group",
		"--requestheader-extra-headers-prefix=X-Remote-Extra-",
		featureGates,
		runtimeConfig,
	}, c.apiserverAddressFlags()...)
	c.apiserverArgs = append(c.apiserverArgs, c.extraAPIServerArgs...)
	apiserver, err := c.start(logs, "kube-apiserver", detached, c.apiserverArgs...)
	if err != nil {
		return err
	}
	readyz := func(ctx context.Context) (bool, error) {
		body, err := c.Client.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		return err == nil && string(body) == "ok", err
	}
	if err := waitFor(ctx, "kube-apiserver /readyz", []*component{etcd, apiserver}, readyz); err != nil {
		return err
	}
	c.mark("kube-apiserver")
	return nil
}

// apiserverAddressFlags say where kube-apiserver listens and what the kubernetes Service
// points at.
func (c *Cluster) apiserverAddressFlags() []string {
	if len(c.nodes) > 0 {
		// This host's end of the first real node's link: reachable from the nodes and their
		// pods (the kubernetes Service's endpoint) and from this host.
		host := c.nodes[0].Network.HostIP
		return []string{"--bind-address=" + host, "--advertise-address=" + host}
	}
	return []string{
		"--bind-address=127.0.0.1",
		"--advertise-address=127.0.0.1",
		// The kubernetes Service's endpoint would be 127.0.0.1, which Endpoints reject;
		// nothing in the cluster dials it (pods are KWOK's).
		"--endpoint-reconciler-type=none",
	}
}

func (c *Cluster) startKWOK(ctx context.Context, p ports, f clusterFiles, detached bool) error {
	logs := filepath.Join(c.Dir, "logs")
	// The controllers need nothing but the API server; start them before kwok's CRD wait.
	_, err := c.start(logs, "kube-controller-manager", detached, append([]string{
		"--kubeconfig=" + f.controllerManagerKubeconfig,
		"--bind-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(p.controllerManager),
		"--cert-dir=" + filepath.Join(c.Dir, "pki", "kube-controller-manager"),
		"--leader-elect=false",
		"--controllers=*",
		// Each controller acts as its own service account, as in kubeadm clusters, so the
		// built-in RBAC roles apply; the token controller signs with this key and hands
		// out this CA.
		"--use-service-account-credentials=true",
		"--service-account-private-key-file=" + f.serviceAccountKey,
		"--root-ca-file=" + f.ca,
		"--kube-api-qps=100",
		"--kube-api-burst=200",
		// The quota controller's periodic recount reads pods from its informer, which can
		// lag the quota admission already charged: a recount in the middle of a job's creates
		// writes a usage below what was admitted and lets a pod past a full quota. Tests that
		// fill a quota need it counted by admission alone; the recounts after a pod's deletion
		// and after a change of the quota's spec still run.
		"--resource-quota-sync-period=24h",
		featureGates,
	}, c.nodeLifecycleFlags()...)...)
	if err != nil {
		return err
	}
	_, err = c.start(logs, "kube-scheduler", detached,
		"--kubeconfig="+f.schedulerKubeconfig,
		"--bind-address=127.0.0.1",
		"--secure-port="+strconv.Itoa(p.scheduler),
		"--cert-dir="+filepath.Join(c.Dir, "pki", "kube-scheduler"),
		"--leader-elect=false",
		featureGates,
	)
	if err != nil {
		return err
	}
	if err := c.installLogsCRD(ctx); err != nil {
		return err
	}
	if err := c.installKWOKDeleteGuard(ctx); err != nil {
		return err
	}
	c.mark("Logs CRD")
	_, err = c.start(logs, "kwok", detached,
		"--kubeconfig="+f.kwokKubeconfig,
		"--config="+f.kwokConfig,
		"--manage-all-nodes=false",
		"--manage-nodes-with-annotation-selector="+kwokNodeAnnotation+"=fake",
		"--node-ip=127.0.0.1",
		"--node-port="+strconv.Itoa(p.kubelet),
		"--server-address=127.0.0.1:"+strconv.Itoa(p.kubelet),
		"--tls-cert-file="+f.kubeletCert,
		"--tls-private-key-file="+f.kubeletKey,
		"--cidr="+podCIDR,
		"--node-lease-duration-seconds=40",
		// Logs objects say which file `kubectl logs` returns for a pod (see SetLogs).
		"--enable-crds=Logs",
	)
	return err
}

// waitForControllers waits until the controllers and kwok answer their health checks and the
// serviceaccount controller has created the default namespace's ServiceAccount.
func (c *Cluster) waitForControllers(ctx context.Context, p ports) error {
	// kube-controller-manager and kube-scheduler serve self-signed certificates on loopback;
	// only their health is read here.
	selfSigned := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // health probe on loopback
	}}
	checks := []struct {
		name string
		url  string
		hc   *http.Client
	}{
		{"kube-controller-manager", "https://127.0.0.1:" + strconv.Itoa(p.controllerManager) + "/healthz", selfSigned},
		{"kube-scheduler", "https://127.0.0.1:" + strconv.Itoa(p.scheduler) + "/healthz", selfSigned},
		{"kwok", c.kubeletURL + "/healthz", c.kubeletHTTP},
	}
	for _, check := range checks {
		if err := waitFor(ctx, check.name+" /healthz", c.components, httpOK(check.hc, check.url)); err != nil {
			return err
		}
		c.mark(check.name)
	}
	defaultAccount := func(ctx context.Context) (bool, error) {
		_, err := c.Client.CoreV1().ServiceAccounts(metav1.NamespaceDefault).Get(ctx, "default", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return err == nil, err
	}
	if err := waitFor(ctx, "the default ServiceAccount", c.components, defaultAccount); err != nil {
		return err
	}
	c.mark("default ServiceAccount")
	return nil
}

// start starts one component and records it for Stop.
func (c *Cluster) start(logDir, name string, detached bool, args ...string) (*component, error) {
	comp, err := startComponent(c.BinDir, logDir, name, name, detached, args...)
	if err != nil {
		return nil, err
	}
	c.components = append(c.components, comp)
	return comp, nil
}

// httpOK is a readiness check: GET url answers 200.
func httpOK(hc *http.Client, url string) func(context.Context) (bool, error) {
	return func(ctx context.Context) (bool, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return false, err
		}
		resp, err := hc.Do(req)
		if err != nil {
			return false, err
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		if resp.StatusCode != http.StatusOK {
			return false, fmt.Errorf("GET %s: %s: %s", url, resp.Status, body)
		}
		return true, nil
	}
}

func certPool(caPEM []byte) *x509.CertPool {
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	return pool
}
