package cluster_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/trainstep/trainstep/internal/testutil"
	"github.com/trainstep/trainstep/test/cluster"
)

// secondRealNode is the name of a cluster's second real node (Options.RealNodes 2).
const secondRealNode = cluster.RealNodeName + "-2"

// nodeGrace is the node lifecycle's grace period in the two-node tests.
const nodeGrace = 20 * time.Second

// TestRealNodesTwoNodes starts a cluster with two real nodes and checks, in order, that pods
// on the one reach a pod on the other by IP and by its headless Service's DNS name; that a
// killed node is seen as Kubernetes sees a lost machine (NotReady, tainted unreachable, its
// pod not Ready) and comes back Ready; and that deleting a killed node's Node object makes
// the pod garbage collector delete its pods.
func TestRealNodesTwoNodes(t *testing.T) {
	c := startRealNodesCluster(t, cluster.Options{RealNodes: 2, NodeMonitorGracePeriod: nodeGrace})
	nodes := c.RealNodes()
	if len(nodes) != 2 || nodes[0].Name != cluster.RealNodeName || nodes[1].Name != secondRealNode {
		t.Fatalf("real nodes %+v, want %s and %s", nodes, cluster.RealNodeName, secondRealNode)
	}
	ns := c.Namespace(t)

	// A server on the second node under a job-wide headless Service, as trainstep renders a
	// replica, and a client on the first.
	server := podcheckPod("demo-worker-0", "-listen", "2222")
	server.Labels = map[string]string{"job": "demo"}
	server.Spec.Hostname, server.Spec.Subdomain = "demo-worker-0", "demo"
	server.Spec.NodeName = secondRealNode
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
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
	seen := watchPod(t, c, createPod(t, c, ns, server), running)
	serverIP := seen[len(seen)-1].Status.PodIP
	if !strings.HasPrefix(serverIP, "10.245.1.") {
		t.Errorf("pod IP %q on %s, want one of its pod network %s", serverIP, secondRealNode, nodes[1].PodCIDR)
	}
	fqdn := "demo-worker-0.demo." + ns + ".svc.cluster.local"
	client := podcheckPod("client", "-api", "-resolve", fqdn, "-dial", fqdn+":2222", "-dial", serverIP+":2222")
	client.Spec.NodeName = cluster.RealNodeName
	pod, log := runToEnd(t, c, ns, client)
	if pod.Status.Phase != corev1.PodSucceeded {
		t.Fatalf("client pod phase %s, want Succeeded; log:\n%s", pod.Status.Phase, log)
	}
	if !strings.HasPrefix(pod.Status.PodIP, "10.245.0.") {
		t.Errorf("client pod IP %q on %s, want one of its pod network %s", pod.Status.PodIP, cluster.RealNodeName, nodes[0].PodCIDR)
	}
	lines := strings.Split(strings.TrimSpace(log), "\n")
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

	// The second node dies: nothing renews its Lease.
	killed := time.Now()
	if err := c.KillRealNode(secondRealNode); err != nil {
		t.Fatal(err)
	}
	var node *corev1.Node
	testutil.Eventually(t, nodeGrace+time.Minute, secondRealNode+" NotReady, tainted unreachable, its pod not Ready", func(ctx context.Context) (bool, error) {
		node, err = c.Client.CoreV1().Nodes().Get(ctx, secondRealNode, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		server := getPod(t, c, ns, "demo-worker-0")
		return nodeReady(node) == corev1.ConditionUnknown && hasTaint(node, corev1.TaintNodeUnreachable) &&
			podReady(server) == corev1.ConditionFalse, nil
	})
	t.Logf("%s seen lost %s after it was killed (grace period %s)", secondRealNode, time.Since(killed).Round(100*time.Millisecond), nodeGrace)
	// The grace period runs from the node's last heartbeat, its Lease's last renewal before
	// the kill (up to a renewal interval earlier), not from the kill.
	lease, err := c.Client.CoordinationV1().Leases(corev1.NamespaceNodeLease).Get(ctx, secondRealNode, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if lease.Spec.RenewTime == nil || lease.Spec.RenewTime.After(killed) {
		t.Fatalf("%s's Lease renewed at %v, want a last renewal before the kill at %v", secondRealNode, lease.Spec.RenewTime, killed)
	}
	marked := readyTransition(node)
	// Conditions keep whole seconds.
	if silence := marked.Sub(lease.Spec.RenewTime.Time); silence < nodeGrace-time.Second {
		t.Errorf("%s marked lost %s after its last heartbeat, before the grace period %s: not its silence", secondRealNode, silence, nodeGrace)
	}
	// The first node goes on.
	first, err := c.Client.CoreV1().Nodes().Get(ctx, cluster.RealNodeName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if nodeReady(first) != corev1.ConditionTrue {
		t.Errorf("%s is %s while %s is lost, want Ready", cluster.RealNodeName, nodeReady(first), secondRealNode)
	}

	if err := c.RestartRealNode(ctx, secondRealNode); err != nil {
		t.Fatal(err)
	}
	// The restarted node runs pods again.
	victim := podcheckPod("victim", "-listen", "2222")
	victim.Spec.NodeName = secondRealNode
	seen = watchPod(t, c, createPod(t, c, ns, victim), running)
	victim = seen[len(seen)-1]

	// Killed again, and its Node object deleted: the pod garbage collector deletes the pods
	// bound to the node, which no kubelet can confirm, marking them DisruptionTarget first.
	if err := c.KillRealNode(secondRealNode); err != nil {
		t.Fatal(err)
	}
	if err := c.DeleteNode(ctx, secondRealNode); err != nil {
		t.Fatal(err)
	}
	w, err := c.Client.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{ResourceVersion: victim.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	// Every version of the pod until its deletion, from the watch: the pod is gone by the
	// time a Get says so, and the condition with it.
	var disrupted bool
	deadline := time.After(2 * time.Minute)
	for deleted := false; !deleted; {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				t.Fatalf("the watch of the pods ended before pod %s was deleted", victim.Name)
			}
			if pod, isPod := ev.Object.(*corev1.Pod); isPod && pod.Name == victim.Name {
				disrupted = disrupted || podCondition(pod, corev1.DisruptionTarget) == corev1.ConditionTrue
				deleted = ev.Type == watch.Deleted
			}
		case <-deadline:
			t.Fatalf("pod %s of the deleted node %s is not deleted 2 minutes after the node", victim.Name, secondRealNode)
		}
	}
	if !disrupted {
		t.Errorf("pod %s was deleted without a DisruptionTarget condition", victim.Name)
	}
	// Back again: the kubelet registers the Node anew.
	if err := c.RestartRealNode(ctx, secondRealNode); err != nil {
		t.Fatal(err)
	}
}

func nodeReady(node *corev1.Node) corev1.ConditionStatus {
	for _, cond := range node.Status.Conditions {
		if cond.Type == corev1.NodeReady {
			return cond.Status
		}
	}
	return ""
}

// readyTransition is when node's Ready condition last changed.
func readyTransition(node *corev1.Node) time.Time {
	for _, cond := range node.Status.Conditions {
		if cond.Type == corev1.NodeReady {
			return cond.LastTransitionTime.Time
		}
	}
	return time.Time{}
}

func hasTaint(node *corev1.Node, key string) bool {
	for _, taint := range node.Spec.Taints {
		if taint.Key == key {
			return true
		}
	}
	return false
}

func podReady(pod *corev1.Pod) corev1.ConditionStatus {
	return podCondition(pod, corev1.PodReady)
}

func podCondition(pod *corev1.Pod, t corev1.PodConditionType) corev1.ConditionStatus {
	for _, cond := range pod.Status.Conditions {
		if cond.Type == t {
			return cond.Status
		}
	}
	return ""
}
