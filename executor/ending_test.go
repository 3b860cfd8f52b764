package executor

import (
	"context"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/trainstep/trainstep/internal/testutil"
	"github.com/trainstep/trainstep/pkg/frameworks"
	"github.com/trainstep/trainstep/pkg/reconcile"
	"github.com/trainstep/trainstep/pkg/render"
)

// launchedJob creates a TensorFlow job's objects with a controller on the
// fake clientset and stops the controller, as a panic would leave it.
func launchedJob(t *testing.T) (*fake.Clientset, *reconcile.Controller, *zap.Logger) {
	t.Helper()
	job := loadJob(t, tensorflowJob)
	id := render.Identity{Namespace: "ns", JobName: job.Name}
	renderer, err := render.NewRenderer(job, id)
	if err != nil {
		t.Fatal(err)
	}
	desired, err := renderAllButPods(renderer, render.Inputs{})
	if err != nil {
		t.Fatal(err)
	}
	client := fake.NewClientset()
	client.PrependReactor("create", "*", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if obj, ok := a.(k8stesting.CreateAction).GetObject().(metav1.Object); ok {
			obj.SetUID(uuid.NewUUID()) // as an API server does; the fake tracker does not
		}
		return false, nil, nil
	})
	log := zaptest.NewLogger(t)
	ctrl := reconcile.New(reconcile.Options{Core: client.CoreV1(), Job: job, Identity: id, Renderer: renderer, Desired: desired,
		Rule: frameworks.SuccessRuleFor(job), Logger: log})
	informerCtx, stopInformers := context.WithCancel(context.Background())
	t.Cleanup(stopInformers)
	if err := ctrl.Start(informerCtx); err != nil {
		t.Fatal(err)
	}
	runCtx, stopRun := context.WithCancel(context.Background())
	ran := make(chan struct{})
	go func() {
		defer close(ran)
		_, _ = ctrl.Run(runCtx)
	}()
	testutil.Eventually(t, 10*time.Second, "the job's pods", func() bool { return len(jobPods(t, client)) == 2 })
	stopRun()
	<-ran
	return client, ctrl, log
}

func jobPods(t *testing.T, client *fake.Clientset) []string {
	t.Helper()
	pods, err := client.CoreV1().Pods("ns").List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, p := range pods.Items {
		names = append(names, p.Name)
	}
	return names
}

// heldLease is a lease this run holds; lost says whether it was lost
// since (the teardown's fence sees it closed).
func heldLease(client *fake.Clientset, lost bool) *jobLease {
	l := &jobLease{conn: &connection{coordination: client.CoordinationV1(), namespace: "ns"}, name: "trainstep-tf", identity: "me", log: zap.NewNop()}
	l.leading.Store(true)
	ch := make(chan struct{})
	if lost {
		close(ch)
	}
	l.lost = ch
	return l
}

// TestTheTeardownAfterAPanicIsFencedByTheLease: once this run lost the
// job's Lease, the teardown after a panic deletes nothing (another run
// writes); while it holds it, everything goes.
func TestTheTeardownAfterAPanicIsFencedByTheLease(t *testing.T) {
	cfg := &Config{TerminationGrace: 10 * time.Second}

	client, ctrl, log := launchedJob(t)
	teardownAfterPanic(cfg, ctrl, heldLease(client, true), log)
	for _, a := range client.Actions() {
		if a.GetVerb() == "delete" || a.GetVerb() == "deletecollection" {
			t.Errorf("the teardown of a run that lost the lease sent %s %s", a.GetVerb(), a.GetResource().Resource)
		}
	}
	if pods := jobPods(t, client); len(pods) != 2 {
		t.Errorf("pods %v after a teardown without the lease, want both left", pods)
	}

	client, ctrl, log = launchedJob(t)
	teardownAfterPanic(cfg, ctrl, heldLease(client, false), log)
	if pods := jobPods(t, client); len(pods) != 0 {
		t.Errorf("pods %v left by the teardown of the lease's holder", pods)
	}
}
