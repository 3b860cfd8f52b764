package nodes_test

import (
	"context"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/trainstep/trainstep/internal/testutil"
	"github.com/trainstep/trainstep/test/cluster"
)

// TestRealNodesPodsReachEachOtherAcrossNodes checks the wiring of the two nodes: each node's
// pods get IPs of its own pod network, and a pod on real-node reaches a pod on real-node-2
// under a job-wide headless Service, as trainstep renders a replica, by its
// <pod>.<service>.<ns>.svc.cluster.local name and by its IP.
func TestRealNodesPodsReachEachOtherAcrossNodes(t *testing.T) {
	t.Parallel()
	c := twoNodes(t)
	nodes := c.RealNodes()
	if len(nodes) != 2 || nodes[0].Name != cluster.RealNodeName || nodes[1].Name != secondNode {
		t.Fatalf("real nodes %+v, want %s and %s", nodes, cluster.RealNodeName, secondNode)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if err := c.ImportGoImage(ctx, cluster.PodcheckImage, cluster.PodcheckPackage); err != nil {
		t.Fatal(err)
	}
	bothNodesUp(t, c)
	ns := c.Namespace(t)

	// A server on the second node under a job-wide headless Service, and a client on the
	// first.
	server := cluster.PodcheckPod("demo-worker-0", "-listen", "2222")
	server.Labels = map[string]string{"job": "demo"}
	server.Spec.Hostname, server.Spec.Subdomain = "demo-worker-0", "demo"
	server.Spec.NodeName = secondNode
	_, err := c.Client.CoreV1().Services(ns).Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "demo"},
		Spec: corev1.ServiceSpec{
			ClusterIP: corev1.ClusterIPNone,
			Selector:  map[string]string{"job": "demo"},
			Ports:     []corev1.ServicePort{{Name: "podcheck", Port: 2222}},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating Service demo: %v", err)
	}
	if _, err := c.Client.CoreV1().Pods(ns).Create(ctx, server, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating pod %s: %v", server.Name, err)
	}
	server = waitPod(t, c, ns, server.Name, "running and ready", func(p *corev1.Pod) bool {
		return p.Status.Phase == corev1.PodRunning && p.Status.PodIP != "" && podCondition(p, corev1.PodReady) == corev1.ConditionTrue
	})
	checkPodIPIn(t, server, nodes[1])

	fqdn := "demo-worker-0.demo." + ns + ".svc.cluster.local"
	serverIP := server.Status.PodIP
	client := cluster.PodcheckPod("client", "-api", "-resolve", fqdn, "-dial", fqdn+":2222", "-dial", serverIP+":2222")
	client.Spec.NodeName = cluster.RealNodeName
	if _, err := c.Client.CoreV1().Pods(ns).Create(ctx, client, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating pod %s: %v", client.Name, err)
	}
	client = waitPod(t, c, ns, client.Name, "ended", func(p *corev1.Pod) bool {
		return p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed
	})
	log, err := c.Client.CoreV1().Pods(ns).GetLogs(client.Name, &corev1.PodLogOptions{Container: "main"}).DoRaw(ctx)
	if err != nil {
		t.Fatalf("reading the log of pod %s: %v", client.Name, err)
	}
	if client.Status.Phase != corev1.PodSucceeded {
		t.Fatalf("client pod phase %s, want Succeeded; log:\n%s", client.Status.Phase, log)
	}
	checkPodIPIn(t, client, nodes[0])
	lines := strings.Split(strings.TrimSpace(string(log)), "\n")
	if len(lines) < 2 {
		t.Fatalf("client log:\n%s\nwant at least the pod's identity and token lines", log)
	}
	version, err := c.Client.Discovery().ServerVersion()
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"podcheck: API server " + version.GitVersion,
		"podcheck: " + fqdn + " resolves to " + serverIP,
		"podcheck: " + fqdn + ":2222 answers demo-worker-0",
		"podcheck: " + serverIP + ":2222 answers demo-worker-0",
	}
	if diff := cmp.Diff(want, lines[2:]); diff != "" {
		t.Fatalf("client log after its identity, across the nodes (-want +got):\n%s", diff)
	}
}

// waitPod waits until the pod ns/name is what done says, and returns it.
func waitPod(t *testing.T, c *cluster.Cluster, ns, name, what string, done func(*corev1.Pod) bool) *corev1.Pod {
	t.Helper()
	var pod *corev1.Pod
	testutil.Eventually(t, 2*time.Minute, fmt.Sprintf("pod %s %s", name, what), func(ctx context.Context) (bool, error) {
		var err error
		if pod, err = c.Client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{}); err != nil {
			return false, err
		}
		return done(pod), nil
	}, func() string {
		if pod == nil {
			return "not seen"
		}
		return fmt.Sprintf("phase %s on %q, conditions %v", pod.Status.Phase, pod.Spec.NodeName, pod.Status.Conditions)
	})
	return pod
}

// checkPodIPIn checks that the pod ran on node with an IP of the node's pod network.
func checkPodIPIn(t *testing.T, pod *corev1.Pod, node cluster.RealNodeInfo) {
	t.Helper()
	_, cidr, err := net.ParseCIDR(node.PodCIDR)
	if err != nil {
		t.Fatalf("%s's pod network %q: %v", node.Name, node.PodCIDR, err)
	}
	if pod.Spec.NodeName != node.Name || !cidr.Contains(net.ParseIP(pod.Status.PodIP)) {
		t.Errorf("pod %s has IP %q on %q, want one of %s's pod network %s", pod.Name, pod.Status.PodIP, pod.Spec.NodeName, node.Name, node.PodCIDR)
	}
}
