package frameworks

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/trainstep/trainstep/pkg/apis/trainstep/v1alpha1"
)

func TestServiceLayoutDefaultsAndValidation(t *testing.T) {
	for _, f := range Names() {
		if got := validJob(f).Spec.ServiceLayout; got != v1alpha1.ServiceLayoutPerJob {
			t.Errorf("%s: a TrainJob's default layout is %q, want PerJob", f, got)
		}
	}
	cases := []struct {
		name      string
		framework v1alpha1.Framework
		layout    v1alpha1.ServiceLayout
		want      []string
	}{
		{"per replica", v1alpha1.FrameworkTensorFlow, v1alpha1.ServiceLayoutPerReplica, nil},
		{"per job", v1alpha1.FrameworkXGBoost, v1alpha1.ServiceLayoutPerJob, nil},
		{"mpi per job", v1alpha1.FrameworkMPI, v1alpha1.ServiceLayoutPerJob, nil},
		{"unknown", v1alpha1.FrameworkPyTorch, "PerPod", []string{`spec.serviceLayout: Unsupported value: "PerPod": supported values: "PerJob", "PerReplica"`}},
		{"mpi per replica", v1alpha1.FrameworkMPI, v1alpha1.ServiceLayoutPerReplica, []string{`spec.serviceLayout: Invalid value: "PerReplica": mpi runs only under PerJob: its hostfile names every worker as <pod>.<job>.<namespace>.svc, which the job's one Service resolves`}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			job := validJob(tc.framework)
			job.Spec.ServiceLayout = tc.layout
			var got []string
			for _, err := range Validate(job) {
				got = append(got, err.Error())
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("errors (-want +got):\n%s", diff)
			}
		})
	}
}
