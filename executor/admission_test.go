package executor

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/trainstep/trainstep/pkg/render"
	"github.com/trainstep/trainstep/pkg/result"
)

// TestAdmitPodsAsksOncePerReplicaTypeAndJudgesTheAnswer: the dry run is asked once per
// replica type, never persists, and only a refusal that retrying cannot fix ends the run.
func TestAdmitPodsAsksOncePerReplicaTypeAndJudgesTheAnswer(t *testing.T) {
	pods := schema.GroupResource{Resource: "pods"}
	podSecurity := apierrors.NewForbidden(pods, "mpi-worker-0", errors.New(`violates PodSecurity "restricted:latest": runAsNonRoot != true`))
	for _, tc := range []struct {
		name    string
		answers []error // one per dry run, the last repeated
		reason  string  // the run's Invalid reason; "" passes
		asks    int
	}{
		{name: "admitted", answers: []error{nil}, asks: 2},
		{name: "refused by PodSecurity", answers: []error{podSecurity}, reason: result.ReasonForbidden, asks: 1},
		{name: "refused as invalid", answers: []error{apierrors.NewInvalid(schema.GroupKind{Kind: "Pod"}, "mpi-launcher-0", nil)}, reason: result.ReasonInvalidSpec, asks: 1},
		{name: "a full quota passes", answers: []error{apierrors.NewForbidden(pods, "mpi-launcher-0", errors.New("exceeded quota: q, requested: pods=1, used: pods=1, limited: pods=1"))}, asks: 2},
		{name: "a pod of a retried step passes", answers: []error{apierrors.NewAlreadyExists(pods, "mpi-launcher-0")}, asks: 2},
		{name: "a webhook that cannot dry-run passes", answers: []error{apierrors.NewBadRequest("admission webhook \"w\" does not support dry run")}, asks: 2},
		{name: "a 500 is retried", answers: []error{apierrors.NewInternalError(errors.New("etcd")), nil}, asks: 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			client := fake.NewClientset()
			asks := 0
			client.PrependReactor("create", "pods", func(action k8stesting.Action) (bool, runtime.Object, error) {
				create := action.(k8stesting.CreateActionImpl)
				if dry := create.CreateOptions.DryRun; len(dry) != 1 || dry[0] != metav1.DryRunAll {
					t.Errorf("pod create with DryRun %v, want [All]", dry)
				}
				answer := tc.answers[min(asks, len(tc.answers)-1)]
				asks++
				if answer != nil {
					return true, nil, answer
				}
				return true, create.GetObject(), nil
			})
			job := loadJob(t, mpiTrainJob)
			renderer, err := render.NewRenderer(job, render.Identity{Namespace: "ns", JobName: job.Name})
			if err != nil {
				t.Fatal(err)
			}
			conn := &connection{core: client.CoreV1(), namespace: "ns"}
			err = conn.admitPods(context.Background(), 10*time.Second, renderer)
			var re *result.Error
			switch {
			case tc.reason == "" && err != nil:
				t.Fatalf("admitPods: %v, want it to pass", err)
			case tc.reason != "" && (!errors.As(err, &re) || re.Reason != tc.reason || re.Phase != result.PhaseInvalid):
				t.Fatalf("admitPods: %v, want Invalid %s", err, tc.reason)
			case tc.reason != "" && !strings.Contains(err.Error(), "does not admit pod mpi-"):
				t.Errorf("error %q does not name the pod", err)
			}
			if asks != tc.asks {
				t.Errorf("%d dry runs, want %d", asks, tc.asks)
			}
		})
	}
}
