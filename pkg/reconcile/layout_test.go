package reconcile

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/trainstep/trainstep/internal/testutil"
	"github.com/trainstep/trainstep/pkg/apis/trainstep/v1alpha1"
	"github.com/trainstep/trainstep/pkg/policy"
)

// Under the per-job layout the controller creates the job's one Service.
// At the job's end it goes first, before the running pods cleanPodPolicy
// Running deletes, though a succeeded pod is kept: nothing dials a peer
// any more, and a Service left while the pods went would have its
// endpoints rewritten for each. cleanPodPolicy None keeps it with the pods.
func TestControllerDeletesTheJobsServiceFirstAtTheJobsEnd(t *testing.T) {
	for _, keep := range []bool{false, true} {
		job := tfJob(v1alpha1.RestartPolicyNever)
		job.Spec.ServiceLayout = v1alpha1.ServiceLayoutPerJob
		if keep {
			job = withCleanPodPolicy(job, v1alpha1.CleanPodPolicyNone)
		}
		h := start(t, job)
		for _, name := range []string{"mnist-ps-0", "mnist-worker-0", "mnist-worker-1"} {
			h.setStatus(name, corev1.PodRunning, 0)
		}
		serviceNames := func() []string {
			svcs, err := h.client.CoreV1().Services(ns).List(context.Background(), metav1.ListOptions{})
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, s := range svcs.Items {
				names = append(names, s.Name)
			}
			return names
		}
		if got := serviceNames(); len(got) != 1 || got[0] != "mnist" {
			t.Fatalf("services %v, want the job's one Service mnist", got)
		}
		pod, err := h.client.CoreV1().Pods(ns).Get(context.Background(), "mnist-worker-1", metav1.GetOptions{})
		if err != nil || pod.Spec.Hostname != "mnist-worker-1" || pod.Spec.Subdomain != "mnist" {
			t.Fatalf("pod mnist-worker-1 (%v): hostname %q subdomain %q, want itself in the job's Service", err, pod.Spec.Hostname, pod.Spec.Subdomain)
		}
		h.setStatus("mnist-worker-0", corev1.PodSucceeded, 0)
		if d := h.decision(); d.Outcome != policy.OutcomeSucceeded {
			t.Fatalf("decision %+v, want Succeeded", d)
		}
		h.client.ClearActions()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if left, err := h.ctrl.Cleanup(ctx, false, true); err != nil || len(left) != 0 {
			t.Fatalf("Cleanup: left %v, err %v", left, err)
		}
		pods, _ := h.client.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{})
		if keep {
			if len(pods.Items) != 3 || len(serviceNames()) != 1 {
				t.Errorf("cleanPodPolicy None: %d pods and services %v left, want all 3 pods and the job's Service", len(pods.Items), serviceNames())
			}
			continue
		}
		if len(pods.Items) != 1 || pods.Items[0].Name != "mnist-worker-0" {
			t.Errorf("pods after cleanPodPolicy Running: %d, want the succeeded mnist-worker-0 alone", len(pods.Items))
		}
		if got := serviceNames(); len(got) != 0 {
			t.Errorf("services after cleanPodPolicy Running: %v, want the job's Service gone", got)
		}
		var deletes []string
		for _, a := range h.client.Actions() {
			if a.GetVerb() == "delete" {
				deletes = append(deletes, a.GetResource().Resource)
			}
		}
		if len(deletes) == 0 || deletes[0] != "services" {
			t.Errorf("deletes in order %v, want the job's Service first", deletes)
		}
	}
}

// A whole-job restart recreates every pod under its name and keeps the
// job's Services, under both layouts: each replica keeps its DNS name.
func TestAWholeJobRestartKeepsEveryReplicasNameUnderBothLayouts(t *testing.T) {
	for _, tc := range []struct {
		layout       v1alpha1.ServiceLayout
		wantServices []string
	}{
		{v1alpha1.ServiceLayoutPerJob, []string{"ddp"}},
		{v1alpha1.ServiceLayoutPerReplica, ddpPods},
	} {
		t.Run(string(tc.layout), func(t *testing.T) {
			t.Parallel()
			job := ddpJob(v1alpha1.RestartPolicyExitCode)
			job.Spec.ServiceLayout = tc.layout
			h := start(t, job)
			firstPods := map[string]string{}
			for _, n := range ddpPods {
				h.setStatus(n, corev1.PodRunning, 0)
				firstPods[n] = string(h.pod(n).UID)
			}
			services := func() map[string]string {
				svcs, err := h.client.CoreV1().Services(ns).List(context.Background(), metav1.ListOptions{})
				if err != nil {
					t.Fatal(err)
				}
				out := map[string]string{}
				for _, s := range svcs.Items {
					out[s.Name] = string(s.UID)
				}
				return out
			}
			before := services()
			h.setStatus("ddp-worker-1", corev1.PodFailed, 137)
			testutil.Eventually(h.t, waitTimeout, "every replica recreated at job attempt 1", func() bool {
				for n, attempt := range h.jobAttemptsOf(ddpPods...) {
					if attempt != "1" || string(h.pod(n).UID) == firstPods[n] {
						return false
					}
				}
				return len(h.jobAttemptsOf(ddpPods...)) == len(ddpPods)
			})
			for _, n := range ddpPods {
				p := h.pod(n)
				wantHost, wantSubdomain := "", ""
				if tc.layout == v1alpha1.ServiceLayoutPerJob {
					wantHost, wantSubdomain = n, "ddp"
				}
				if p.Spec.Hostname != wantHost || p.Spec.Subdomain != wantSubdomain {
					t.Errorf("recreated %s: hostname %q subdomain %q, want %q and %q", n, p.Spec.Hostname, p.Spec.Subdomain, wantHost, wantSubdomain)
				}
				for _, env := range p.Spec.Containers[0].Env {
					if env.Name == "MASTER_ADDR" && env.Value != frameworksPeer(tc.layout, "ddp-master-0", "ddp") {
						t.Errorf("recreated %s: MASTER_ADDR %q", n, env.Value)
					}
				}
			}
			after := services()
			if len(after) != len(tc.wantServices) {
				t.Errorf("services after the restart %v, want %v", after, tc.wantServices)
			}
			for _, name := range tc.wantServices {
				if after[name] == "" || after[name] != before[name] {
					t.Errorf("Service %s: UID %q before the restart, %q after; want it kept", name, before[name], after[name])
				}
			}
		})
	}
}

// frameworksPeer is the name a layout gives a peer pod.
func frameworksPeer(layout v1alpha1.ServiceLayout, pod, job string) string {
	if layout == v1alpha1.ServiceLayoutPerJob {
		return pod + "." + job
	}
	return pod
}
