package executor

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"time"

	"go.uber.org/zap"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"

	"github.com/trainstep/trainstep/pkg/apis/trainstep/v1alpha1"
)

// DefaultLeaseDuration is how long a job's lease stays valid without
// renewal: how long a retry waits for a writer that died without letting go.
const DefaultLeaseDuration = 15 * time.Second

// leaseName names a job's Lease. The prefix keeps it apart from leases of
// other software that a job name could equal.
func leaseName(job string) string { return "trainstep-" + job }

// jobLease is this run's hold on the job's Lease: the one writer of the job.
type jobLease struct {
	conn *connection
	name string
	// lost is closed when the elector stops leading (also after stop).
	lost <-chan struct{}
	// stop ends renewal; it returns once the elector is done.
	stop func()
	log  *zap.Logger
}

// acquireLease waits until this run holds the job's Lease: another run of
// the same job (an Argo retry that started while the previous step pod still
// lives) keeps it while it renews, and this one waits until it is released
// or expires. It returns ctx's error if ctx ends first.
func acquireLease(ctx context.Context, cfg *Config, s *preparedRun) (*jobLease, error) {
	conn, name := s.conn, leaseName(s.identity.JobName)
	if err := ensureLease(ctx, conn, name, s.identity.JobName, s.identity.Owner); err != nil {
		return nil, err
	}
	duration := cfg.LeaseDuration
	holder := cfg.OwnerPod
	if holder == "" {
		holder, _ = os.Hostname()
	}
	holder += "_" + rand.String(8)
	started, stopped, done := make(chan struct{}), make(chan struct{}), make(chan struct{})
	elector, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock: &resourcelock.LeaseLock{
			LeaseMeta:  metav1.ObjectMeta{Name: name, Namespace: conn.namespace},
			Client:     conn.client.CoordinationV1(),
			LockConfig: resourcelock.ResourceLockConfig{Identity: holder},
		},
		LeaseDuration: duration,
		RenewDeadline: duration * 2 / 3,
		RetryPeriod:   duration / 8,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(context.Context) { close(started) },
			OnStoppedLeading: func() { close(stopped) },
		},
		Name: name,
	})
	if err != nil {
		return nil, fmt.Errorf("setting up the job's lease: %w", err)
	}
	electCtx, cancel := context.WithCancel(context.Background())
	go func() {
		defer close(done)
		elector.Run(electCtx)
	}()
	stop := func() {
		cancel()
		<-done
	}
	waitingSaid := time.NewTimer(duration / 4)
	defer waitingSaid.Stop()
	for {
		select {
		case <-started:
			l := &jobLease{conn: conn, name: name, lost: stopped, stop: stop, log: s.log}
			if err := l.own(ctx, s.identity.Owner); err != nil {
				s.log.Warn("pointing the job's lease at this step", zap.Error(err))
			}
			s.log.Info("holding the job's lease", zap.String("lease", name), zap.String("holder", holder))
			return l, nil
		case <-waitingSaid.C:
			s.log.Info("another run of this job holds its lease; waiting until it is released or expires",
				zap.String("lease", name), zap.String("holder", elector.GetLeader()))
		case <-ctx.Done():
			stop()
			return nil, ctx.Err()
		}
	}
}

// ensureLease creates the job's Lease, labelled and owned like the job's
// other objects, so that the garbage collector removes it with its owner.
func ensureLease(ctx context.Context, conn *connection, name, job string, owner *metav1.OwnerReference) error {
	lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: conn.namespace,
		Labels: map[string]string{v1alpha1.LabelJobName: job}}}
	if owner != nil {
		lease.OwnerReferences = []metav1.OwnerReference{*owner}
	}
	_, err := conn.client.CoordinationV1().Leases(conn.namespace).Create(ctx, lease, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating the job's lease %s: %w", name, err)
	}
	return nil
}

// own points the Lease's owner at this run's owner, so that it outlives the
// step pod of an earlier attempt that created it.
func (l *jobLease) own(ctx context.Context, owner *metav1.OwnerReference) error {
	var refs []metav1.OwnerReference
	if owner != nil {
		refs = []metav1.OwnerReference{*owner}
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"ownerReferences": refs}})
	if err != nil {
		return err
	}
	_, err = l.conn.client.CoordinationV1().Leases(l.conn.namespace).Patch(ctx, l.name, types.MergePatchType, patch, metav1.PatchOptions{})
	return err
}

// release stops renewing and deletes the Lease, so that the next run of
// the job does not wait for it to expire.
func (l *jobLease) release(ctx context.Context) {
	l.stop()
	err := l.conn.client.CoordinationV1().Leases(l.conn.namespace).Delete(ctx, l.name, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		l.log.Warn("deleting the job's lease", zap.Error(err))
	}
}
