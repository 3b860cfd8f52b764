package executor_test

import (
	"slices"
	"testing"

	"github.com/trainstep/trainstep/pkg/apis/trainstep/v1alpha1"
	"github.com/trainstep/trainstep/pkg/result"
	"github.com/trainstep/trainstep/test/cluster"
)

// The same TensorFlow job under both Service layouts: per replica, every
// replica has a Service named like its pod and the PS's goes with it under
// cleanPodPolicy Running; per job, the job has one Service, which goes
// first at the job's end once any pod goes (cleanPodPolicy None keeps it
// with the pods). Both end without a Service once no pod is left
// (cleanPodPolicy All).
func TestServiceLayoutsAreCreatedAndCleanedUp(t *testing.T) {
	t.Parallel()
	c := cluster.Get(t)
	for _, tc := range []struct {
		layout  v1alpha1.ServiceLayout
		cleanup v1alpha1.CleanPodPolicy
		want    []string
	}{
		{v1alpha1.ServiceLayoutPerReplica, v1alpha1.CleanPodPolicyRunning, []string{"layout-worker-0", "layout-worker-1"}},
		{v1alpha1.ServiceLayoutPerJob, v1alpha1.CleanPodPolicyRunning, nil},
		{v1alpha1.ServiceLayoutPerJob, v1alpha1.CleanPodPolicyNone, []string{"layout"}},
		{v1alpha1.ServiceLayoutPerReplica, v1alpha1.CleanPodPolicyAll, nil},
		{v1alpha1.ServiceLayoutPerJob, v1alpha1.CleanPodPolicyAll, nil},
	} {
		t.Run(string(tc.layout)+"/"+string(tc.cleanup), func(t *testing.T) {
			t.Parallel()
			ns := c.Namespace(t)
			job := newJob("layout", v1alpha1.FrameworkTensorFlow).
				replicas(ps, 1, nil).replicas(worker, 2, exitsAfter("2s", 0)).
				with(func(j *v1alpha1.TrainJob) {
					j.Spec.ServiceLayout = tc.layout
					cleanup := tc.cleanup
					j.Spec.RunPolicy.CleanPodPolicy = &cleanup
				})
			out := runJob(t, c, ns, job.yaml(t))
			if out.err != nil || out.res.Phase != result.PhaseSucceeded {
				t.Fatalf("run: phase %s, err %v; stderr:\n%s", out.res.Phase, out.err, out.stderr)
			}
			var services []string
			for _, svc := range listServices(t, c, ns, "layout") {
				if svc.DeletionTimestamp == nil {
					services = append(services, svc.Name)
				}
			}
			slices.Sort(services)
			if !slices.Equal(services, tc.want) {
				t.Errorf("after the run: Services %v, want %v", services, tc.want)
			}
		})
	}
}
