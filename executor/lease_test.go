package executor

import (
	"context"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// A predecessor that releases the job's Lease between this run's create
// (AlreadyExists) and its read leaves the create to the elector: the Lease
// it makes carries the job's labels and owner all the same, so that the
// admission policy admits it and the next run recognises it.
func TestALeaseTheElectorCreatesIsTheJobs(t *testing.T) {
	client := fake.NewClientset()
	leases := client.CoordinationV1().Leases("ns")
	labels := map[string]string{"trainstep.dev/job-name": "tf", "trainstep.dev/identity": "abc"}
	owner := &metav1.OwnerReference{APIVersion: "v1", Kind: "Pod", Name: "step", UID: "step-uid"}
	// The predecessor's Lease is there at the create and gone at the read.
	var answered atomic.Bool
	client.PrependReactor("create", "leases", func(k8stesting.Action) (bool, runtime.Object, error) {
		if answered.Swap(true) {
			return false, nil, nil
		}
		return true, nil, apierrors.NewAlreadyExists(schema.GroupResource{Group: "coordination.k8s.io", Resource: "leases"}, "trainstep-tf")
	})
	l := &jobLease{conn: &connection{coordination: client.CoordinationV1(), namespace: "ns"}, name: "trainstep-tf",
		identity: "me", duration: 4 * time.Second, owner: owner, labels: labels, log: zap.NewNop()}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := l.acquire(ctx, false, time.Minute); err != nil {
		t.Fatal(err)
	}
	defer l.stop()
	lease, err := leases.Get(ctx, "trainstep-tf", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range labels {
		if lease.Labels[k] != v {
			t.Errorf("label %s = %q, want %q (labels %v)", k, lease.Labels[k], v, lease.Labels)
		}
	}
	if len(lease.OwnerReferences) != 1 || lease.OwnerReferences[0].UID != owner.UID {
		t.Errorf("owners %v, want the step's", lease.OwnerReferences)
	}
	if h := lease.Spec.HolderIdentity; h == nil || *h != "me" {
		t.Errorf("holder %v, want this run", h)
	}
	if !l.held() {
		t.Error("the run does not hold the Lease it created")
	}
}

// An API server that restarts as the run ends (its Lease's delete answered
// 503, then refused) is waited for: the Lease goes, also when the release
// of the holder did not land and it still names this run.
func TestReleaseDeletesTheLeaseThroughARestartingAPIServer(t *testing.T) {
	client := fake.NewClientset()
	holder := "me"
	lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "trainstep-tf", Namespace: "ns"}, Spec: coordinationv1.LeaseSpec{HolderIdentity: &holder}}
	if _, err := client.CoordinationV1().Leases("ns").Create(context.Background(), lease, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var refused atomic.Int32
	client.PrependReactor("delete", "leases", func(k8stesting.Action) (bool, runtime.Object, error) {
		if refused.Add(1) <= 2 {
			return true, nil, apierrors.NewServiceUnavailable("kube-apiserver is restarting")
		}
		return false, nil, nil
	})
	l := &jobLease{conn: &connection{coordination: client.CoordinationV1(), namespace: "ns"}, name: "trainstep-tf", identity: "me", log: zap.NewNop()}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	l.release(ctx)
	if _, err := client.CoordinationV1().Leases("ns").Get(ctx, "trainstep-tf", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the Lease is still there after %d deletes: %v", refused.Load(), err)
	}
}

// A first run holds the Lease from its create on: the create names it the
// holder, so the elector starts from that version (no read) and a second
// run of the job that looks meanwhile finds it held. Two requests, not three.
func TestAFirstRunHoldsTheLeaseItCreatesWithoutReadingItBack(t *testing.T) {
	client := fake.NewClientset()
	labels := map[string]string{"trainstep.dev/job-name": "tf", "trainstep.dev/identity": "abc"}
	newLease := func(identity string) *jobLease {
		return &jobLease{conn: &connection{coordination: client.CoordinationV1(), namespace: "ns"}, name: "trainstep-tf",
			identity: identity, duration: 4 * time.Second, labels: labels, log: zap.NewNop()}
	}
	first := newLease("first")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := first.acquire(ctx, false, time.Minute); err != nil {
		t.Fatal(err)
	}
	defer first.stop()
	var verbs []string
	for _, a := range client.Actions() {
		if a.GetResource().Resource == "leases" {
			verbs = append(verbs, a.GetVerb())
		}
	}
	// The create stands for the elector's two writes as it starts leading;
	// its later renewals write.
	if want := []string{"create"}; !slices.Equal(verbs, want) {
		t.Errorf("taking a new Lease sent %v, want %v", verbs, want)
	}
	lease, err := client.CoordinationV1().Leases("ns").Get(ctx, "trainstep-tf", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if h := lease.Spec.HolderIdentity; h == nil || *h != "first" || lease.Spec.AcquireTime == nil || lease.Spec.LeaseDurationSeconds == nil || *lease.Spec.LeaseDurationSeconds != 4 {
		t.Errorf("the Lease's spec %+v should name the first run, since when, and for 4 s", lease.Spec)
	}
	// A second run waits while the first renews.
	second := newLease("second")
	waitCtx, waitCancel := context.WithTimeout(ctx, 3*time.Second)
	defer waitCancel()
	if err := second.acquire(waitCtx, false, time.Minute); err == nil {
		second.stop()
		t.Fatal("a second run took the Lease the first holds and renews")
	}
	if !first.held() {
		t.Error("the first run no longer holds its Lease")
	}
	renewed, err := client.CoordinationV1().Leases("ns").Get(ctx, "trainstep-tf", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !renewed.Spec.RenewTime.After(lease.Spec.RenewTime.Time) {
		t.Errorf("the first run did not renew its Lease after creating it: renewed at %v, created at %v", renewed.Spec.RenewTime, lease.Spec.RenewTime)
	}
}

// The create stands for the elector's first renewal only while it is
// recent: a step slowed between the two renews as the elector would.
func TestAStaleCreateIsRenewedByTheElectorsFirstUpdate(t *testing.T) {
	client := fake.NewClientset()
	l := &jobLease{conn: &connection{coordination: client.CoordinationV1(), namespace: "ns"}, name: "trainstep-tf",
		identity: "first", duration: 15 * time.Second, log: zap.NewNop()}
	ctx := context.Background()
	for _, since := range []time.Duration{0, 2 * time.Second} {
		client.ClearActions()
		at := metav1.NewMicroTime(time.Now().Add(-since))
		holder := "first"
		created, err := client.CoordinationV1().Leases("ns").Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "trainstep-tf", Namespace: "ns"},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: &holder, RenewTime: &at}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		lock := &jobLeaseLock{job: l, lease: created, fresh: true}
		record, _, err := lock.Get(ctx)
		if err != nil {
			t.Fatal(err)
		}
		record.RenewTime = metav1.Now()
		if err := lock.Update(ctx, *record); err != nil {
			t.Fatal(err)
		}
		updates := 0
		for _, a := range client.Actions() {
			if a.GetVerb() == "update" {
				updates++
			}
		}
		if want := map[time.Duration]int{0: 0, 2 * time.Second: 1}[since]; updates != want {
			t.Errorf("a Lease created %s ago had %d updates on the elector's first renewal, want %d", since, updates, want)
		}
		// A renewal a period later is written.
		lock.lease.Spec.RenewTime = &metav1.MicroTime{Time: time.Now().Add(-LeaseRenewPeriod(l.duration))}
		if err := lock.Update(ctx, *record); err != nil {
			t.Fatal(err)
		}
		if n := len(client.Actions()); n != 2+updates {
			t.Errorf("the renewal a period after a Lease created %s ago was not written: %d actions", since, n)
		}
		if err := client.CoordinationV1().Leases("ns").Delete(ctx, "trainstep-tf", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
}
