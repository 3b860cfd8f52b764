package v1alpha1

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestServiceLayoutDefaultsAndValidation(t *testing.T) {
	for _, f := range Frameworks {
		if got := validJob(f).Spec.ServiceLayout; got != ServiceLayoutPerJob {
			t.Errorf("%s: a TrainJob's default layout is %q, want PerJob", f, got)
		}
	}
	cases := []struct {
		name      string
		framework Framework
		layout    ServiceLayout
		want      []string
	}{
		{"per replica", FrameworkTensorFlow, ServiceLayoutPerReplica, nil},
		{"per job", FrameworkXGBoost, ServiceLayoutPerJob, nil},
		{"mpi per job", FrameworkMPI, ServiceLayoutPerJob, nil},
		{"unknown", FrameworkPyTorch, "PerPod", []string{`spec.serviceLayout: Unsupported value: "PerPod": supported values: "PerJob", "PerReplica"`}},
		{"mpi per replica", FrameworkMPI, ServiceLayoutPerReplica, []string{`spec.serviceLayout: Invalid value: "PerReplica": mpi runs only under PerJob: its hostfile names every worker as <pod>.<job>.<namespace>.svc, which the job's one Service resolves`}},
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
