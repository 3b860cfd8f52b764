package cluster_test

import (
	"bufio"
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/trainstep/trainstep/internal/testutil"
	"github.com/trainstep/trainstep/test/cluster"
)

func TestContainerLogsThroughAPIServer(t *testing.T) {
	c := cluster.Get(t)
	ns := c.Namespace(t)
	c.SetLogs(t, ns, "trainer", "main", "epoch 1 loss 0.9\nepoch 2 loss 0.5\n")
	withSidecar := newPod("trainer", corev1.RestartPolicyNever, nil)
	withSidecar.Spec.Containers = append(withSidecar.Spec.Containers, corev1.Container{Name: "sidecar", Image: "registry.example/sidecar:1"})
	watchPod(t, c, createPod(t, c, ns, withSidecar), running)
	watchPod(t, c, createPod(t, c, ns, newPod("quiet", corev1.RestartPolicyNever, nil)), running)

	tests := []struct {
		name, pod, container, want string
	}{
		{name: "the container SetLogs wrote for", pod: "trainer", container: "main", want: "epoch 1 loss 0.9\nepoch 2 loss 0.5\n"},
		{name: "another container of that pod printed nothing", pod: "trainer", container: "sidecar", want: ""},
		{name: "a pod without SetLogs printed nothing", pod: "quiet", container: "main", want: ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), podTimeout)
			defer cancel()
			logs, err := c.Client.CoreV1().Pods(ns).GetLogs(tc.pod, &corev1.PodLogOptions{Container: tc.container}).DoRaw(ctx)
			if err != nil {
				t.Fatalf("getting logs: %v", err)
			}
			if diff := cmp.Diff(tc.want, string(logs)); diff != "" {
				t.Errorf("logs (-want +got):\n%s", diff)
			}
		})
	}
}

func TestFollowedLogsSeeAppendedLines(t *testing.T) {
	c := cluster.Get(t)
	ns := c.Namespace(t)
	c.SetLogs(t, ns, "trainer", "main", "epoch 1 loss 0.9\nepoch 2 loss 0.5")
	watchPod(t, c, createPod(t, c, ns, newPod("trainer", corev1.RestartPolicyNever, nil)), running)

	ctx, cancel := context.WithTimeout(context.Background(), podTimeout)
	defer cancel()
	stream, err := c.Client.CoreV1().Pods(ns).GetLogs("trainer", &corev1.PodLogOptions{Container: "main", Follow: true}).Stream(ctx)
	if err != nil {
		t.Fatalf("following logs: %v", err)
	}
	defer stream.Close()
	lines := make(chan string)
	go func() {
		defer close(lines)
		scanner := bufio.NewScanner(stream)
		for scanner.Scan() {
			lines <- scanner.Text()
		}
	}()
	var got []string
	for len(got) < 3 {
		select {
		case line, ok := <-lines:
			if !ok {
				t.Fatalf("log stream ended after %q", got)
			}
			got = append(got, line)
			if len(got) == 2 {
				c.AppendLogs(t, ns, "trainer", "main", "epoch 3 loss 0.2")
			}
		case <-ctx.Done():
			t.Fatalf("followed logs: got %q, want 3 lines", got)
		}
	}
	if diff := cmp.Diff([]string{"epoch 1 loss 0.9", "epoch 2 loss 0.5", "epoch 3 loss 0.2"}, got); diff != "" {
		t.Errorf("followed logs (-want +got):\n%s", diff)
	}
}

func TestOwnedPodIsGarbageCollected(t *testing.T) {
	c := cluster.Get(t)
	ns := c.Namespace(t)
	ctx := context.Background()
	owner, err := c.Client.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "owner"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating owner: %v", err)
	}
	pod := newPod("owned", corev1.RestartPolicyNever, nil)
	pod.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: owner.Name, UID: owner.UID}}
	watchPod(t, c, createPod(t, c, ns, pod), running)

	if err := c.Client.CoreV1().ConfigMaps(ns).Delete(ctx, owner.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatalf("deleting owner: %v", err)
	}
	testutil.Eventually(t, podTimeout, "the garbage collector to delete the owned pod", func() (bool, error) {
		_, err := c.Client.CoreV1().Pods(ns).Get(ctx, "owned", metav1.GetOptions{})
		return apierrors.IsNotFound(err), err
	})
}

func TestServiceAccountRoleStopsAtItsNamespace(t *testing.T) {
	c := cluster.Get(t)
	home, other := c.Namespace(t), c.Namespace(t)
	ctx := context.Background()
	_, err := c.Client.RbacV1().Roles(home).Create(ctx, &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: "pods"},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get", "list", "create", "delete"}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating Role: %v", err)
	}
	_, err = c.Client.RbacV1().RoleBindings(home).Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "pods"},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: "pods"},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: "trainstep", Namespace: home}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating RoleBinding: %v", err)
	}
	token := c.ServiceAccountToken(t, home, "trainstep")
	config, err := clientcmd.BuildConfigFromFlags("", c.KubeconfigForToken(t, token, home))
	if err != nil {
		t.Fatalf("loading the token kubeconfig: %v", err)
	}
	client := kubernetes.NewForConfigOrDie(config)

	tests := []struct {
		name      string
		namespace string
		allowed   bool
	}{
		{name: "its own namespace", namespace: home, allowed: true},
		{name: "another namespace", namespace: other, allowed: false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			// RBAC changes reach the authorizer's cache within a moment; wait out the grant.
			var listErr, createErr error
			testutil.Eventually(t, time.Minute, "RBAC to settle", func() (bool, error) {
				_, listErr = client.CoreV1().Pods(tc.namespace).List(ctx, metav1.ListOptions{})
				return listErr == nil == tc.allowed, listErr
			})
			_, createErr = client.CoreV1().Pods(tc.namespace).Create(ctx, newPod("by-token", corev1.RestartPolicyNever, nil), metav1.CreateOptions{})
			if tc.allowed && (listErr != nil || createErr != nil) {
				t.Errorf("list: %v, create: %v; want both allowed", listErr, createErr)
			}
			if !tc.allowed && (!apierrors.IsForbidden(listErr) || !apierrors.IsForbidden(createErr)) {
				t.Errorf("list: %v, create: %v; want both Forbidden", listErr, createErr)
			}
		})
	}
}

func TestPodsBeyondCapacityStayPending(t *testing.T) {
	c := cluster.Get(t)
	ns := c.Namespace(t)
	ctx := context.Background()
	// A node of its own (label to select it, taint to keep other tests' pods away) with
	// room for two of the three pods.
	node := "capacity-" + rand.String(5)
	taint := corev1.Taint{Key: "trainstep.dev/capacity-test", Value: node, Effect: corev1.TaintEffectNoSchedule}
	if err := c.AddNode(ctx, node, cluster.NodeCapacity("2", "8Gi", 110, 1),
		cluster.WithNodeLabels(map[string]string{"trainstep.dev/capacity-test": node}), cluster.WithNodeTaints(taint)); err != nil {
		t.Fatalf("adding node: %v", err)
	}
	t.Cleanup(func() { _ = c.Client.CoreV1().Nodes().Delete(context.Background(), node, metav1.DeleteOptions{}) })

	var pods []*corev1.Pod
	for _, name := range []string{"replica-0", "replica-1", "replica-2"} {
		pod := newPod(name, corev1.RestartPolicyNever, nil)
		pod.Spec.NodeSelector = map[string]string{"trainstep.dev/capacity-test": node}
		pod.Spec.Tolerations = []corev1.Toleration{{Key: taint.Key, Operator: corev1.TolerationOpEqual, Value: taint.Value, Effect: taint.Effect}}
		pod.Spec.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}
		pods = append(pods, createPod(t, c, ns, pod))
	}
	unschedulable := func(p *corev1.Pod) bool {
		for _, cond := range p.Status.Conditions {
			if cond.Type == corev1.PodScheduled && cond.Status == corev1.ConditionFalse && cond.Reason == corev1.PodReasonUnschedulable {
				return true
			}
		}
		return false
	}
	var runningCount, pendingCount int
	for _, pod := range pods {
		seen := watchPod(t, c, pod, func(p *corev1.Pod) bool { return running(p) || unschedulable(p) })
		last := seen[len(seen)-1]
		if running(last) {
			runningCount++
		} else {
			pendingCount++
			if last.Status.Phase != corev1.PodPending || last.Spec.NodeName != "" {
				t.Errorf("%s: phase %s on node %q, want Pending and unbound", last.Name, last.Status.Phase, last.Spec.NodeName)
			}
		}
	}
	if runningCount != 2 || pendingCount != 1 {
		t.Errorf("running %d, unschedulable %d; want 2 and 1 (2 cpu for three 1-cpu pods)", runningCount, pendingCount)
	}
}
