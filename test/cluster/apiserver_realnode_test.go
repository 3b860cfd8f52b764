package cluster_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/trainstep/trainstep/executor"
	"github.com/trainstep/trainstep/pkg/apis/trainstep/v1alpha1"
	"github.com/trainstep/trainstep/pkg/result"
	"github.com/trainstep/trainstep/test/cluster"
)

// kube-apiserver killed and started again under a job whose replicas run
// on the real node: the kubelet, the informers and the run all lose the API
// server for 5 s. The replicas run on, the run ends Succeeded with no
// restart and no replica recreated, and nothing of the job is left.
func TestRealNodeAPIServerRestartUnderARunningJob(t *testing.T) {
	c := startRealNodeCluster(t)
	ctx := context.Background()
	ns := c.Namespace(t)
	two, all := int32(2), v1alpha1.CleanPodPolicyAll
	job := v1alpha1.TrainJob{
		TypeMeta:   metav1.TypeMeta{APIVersion: v1alpha1.APIVersion, Kind: v1alpha1.Kind},
		ObjectMeta: metav1.ObjectMeta{Name: "restarted"},
		Spec: v1alpha1.TrainJobSpec{Framework: v1alpha1.FrameworkTensorFlow, ReplicaSpecs: map[v1alpha1.ReplicaType]*v1alpha1.ReplicaSpec{
			v1alpha1.ReplicaTypeWorker: {Replicas: &two, RestartPolicy: v1alpha1.RestartPolicyExitCode, Template: corev1.PodTemplateSpec{
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "tensorflow", Image: cluster.PodcheckImage,
					ImagePullPolicy: corev1.PullNever, Args: []string{"-exit-after", "40s"}}}}}},
		}, RunPolicy: v1alpha1.RunPolicy{CleanPodPolicy: &all}},
	}
	manifest, err := yaml.Marshal(job)
	if err != nil {
		t.Fatal(err)
	}
	outputs := t.TempDir()
	cfg := executor.Config{Identity: "test/" + t.Name(), Spec: manifest, Kubeconfig: c.Kubeconfig, PodNamespace: ns,
		OutputsDir: outputs, APITimeout: time.Minute, TerminationGrace: 30 * time.Second, Logger: zaptest.NewLogger(t)}
	done := make(chan result.Result, 1)
	go func() {
		runCtx, cancel := context.WithTimeout(ctx, 4*time.Minute)
		defer cancel()
		res, _ := executor.Run(runCtx, cfg)
		done <- res
	}()
	selector := metav1.ListOptions{LabelSelector: v1alpha1.LabelJobName + "=" + job.Name}
	uids := map[string]string{}
	deadline := time.Now().Add(3 * time.Minute)
	for len(uids) < 2 && time.Now().Before(deadline) {
		pods, err := c.Client.CoreV1().Pods(ns).List(ctx, selector)
		if err == nil {
			uids = map[string]string{}
			for _, p := range pods.Items {
				if p.Status.Phase == corev1.PodRunning {
					uids[p.Name] = string(p.UID)
				}
			}
		}
		time.Sleep(500 * time.Millisecond)
	}
	if len(uids) < 2 {
		t.Fatalf("the replicas did not run on the real node within 3 minutes: %v", uids)
	}
	c.RestartAPIServer(t, 5*time.Second)
	pods, err := c.Client.CoreV1().Pods(ns).List(ctx, selector)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		if uids[p.Name] != string(p.UID) {
			t.Errorf("pod %s is instance %s after the restart, was %s: recreated", p.Name, p.UID, uids[p.Name])
		}
	}
	var res result.Result
	select {
	case res = <-done:
	case <-time.After(4 * time.Minute):
		t.Fatal("the run did not end")
	}
	if res.Phase != result.PhaseSucceeded || res.Restarts != 0 {
		t.Fatalf("the run ended %s/%s with %d restarts (%s), want Succeeded with none", res.Phase, res.Reason, res.Restarts, res.Message)
	}
	for _, r := range res.Replicas {
		if r.Node != cluster.RealNodeName {
			t.Errorf("replica %s-%d ran on %q, want the real node", r.Type, r.Index, r.Node)
		}
	}
	if b, err := os.ReadFile(filepath.Join(outputs, "restarts")); err != nil || string(b) != "0" {
		t.Errorf("restarts output %q (%v), want 0", b, err)
	}
	pods, err = c.Client.CoreV1().Pods(ns).List(ctx, selector)
	if err != nil {
		t.Fatal(err)
	}
	if len(pods.Items) > 0 {
		t.Errorf("%d pods left after the run", len(pods.Items))
	}
	svcs, err := c.Client.CoreV1().Services(ns).List(ctx, selector)
	if err == nil && len(svcs.Items) > 0 {
		t.Errorf("%d services left after the run", len(svcs.Items))
	}
}
