package executor

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
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
	"github.com/trainstep/trainstep/pkg/result"
)

// launchedJob creates a TensorFlow job's objects with a controller on the
// fake clientset and stops the controller, as a panic would leave it.
func launchedJob(t *testing.T) (*fake.Clientset, *reconcile.Controller, *zap.Logger) {
	t.Helper()
	job := loadJob(t, tensorflowJob)
	id := render.Identity{Namespace: "ns", JobName: job.Name, OwnerID: "0wner"}
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

// TestAPanicInACreateEndsTheRunFailedAndTearsItDown runs the executor
// against the fake clientset with a create that panics — outside the
// sync's own goroutine, in the parallel creates. The run ends Failed
// InternalError, its outputs say so, the job's objects are deleted, and
// the test process lives on.
func TestAPanicInACreateEndsTheRunFailedAndTearsItDown(t *testing.T) {
	job := loadJob(t, tensorflowJob)
	id := render.Identity{Namespace: "ns", JobName: job.Name, OwnerID: "0wner"}
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
			obj.SetUID(uuid.NewUUID())
		}
		return false, nil, nil
	})
	var fired atomic.Bool
	client.PrependReactor("create", "pods", func(k8stesting.Action) (bool, runtime.Object, error) {
		if fired.CompareAndSwap(false, true) {
			panic("injected in a create")
		}
		return false, nil, nil
	})
	log := zaptest.NewLogger(t)
	cfg := Config{OutputsDir: t.TempDir(), Logger: log, TerminationGrace: 10 * time.Second, Outputs: NewOutputGate()}
	cfg.setDefaults()
	conn := &connection{core: client.CoreV1(), coordination: client.CoordinationV1(), namespace: "ns"}
	s := &preparedRun{conn: conn, identity: id, renderer: renderer, desired: desired, log: log}
	res := newResult(&cfg)

	runErr := execute(context.Background(), &cfg, job, s, func() bool { return false }, &res)
	end(&cfg, &res, runErr, time.Now())

	if res.Phase != result.PhaseFailed || res.Reason != result.ReasonInternalError || !strings.Contains(res.Message, "injected in a create") {
		t.Fatalf("phase %s reason %s message %q, want Failed InternalError naming the panic", res.Phase, res.Reason, res.Message)
	}
	for name, want := range map[string]string{"phase": "Failed", "reason": result.ReasonInternalError} {
		got, err := os.ReadFile(filepath.Join(cfg.OutputsDir, name))
		if err != nil || strings.TrimSpace(string(got)) != want {
			t.Errorf("output %s = %q (%v), want %q", name, got, err, want)
		}
	}
	ctx := context.Background()
	pods, _ := client.CoreV1().Pods("ns").List(ctx, metav1.ListOptions{})
	svcs, _ := client.CoreV1().Services("ns").List(ctx, metav1.ListOptions{})
	cms, _ := client.CoreV1().ConfigMaps("ns").List(ctx, metav1.ListOptions{})
	if n := len(pods.Items) + len(svcs.Items) + len(cms.Items); n != 0 || !fired.Load() {
		t.Errorf("%d objects left after the teardown (panic injected: %v)", n, fired.Load())
	}
	deleted := map[string]int{}
	for _, a := range client.Actions() {
		if a.GetVerb() == "delete" {
			deleted[a.GetResource().Resource]++
		}
	}
	// A TrainJob has one headless Service for the job (serviceLayout PerJob).
	if deleted["services"] != 1 || deleted["configmaps"] != 1 {
		t.Errorf("the teardown deleted %v, want the job's Service and the ConfigMap created before the panic", deleted)
	}
}
