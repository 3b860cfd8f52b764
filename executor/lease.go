package executor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sync/atomic"
	"time"

	"github.com/cenkalti/backoff/v4"
	"go.uber.org/zap"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"

	"github.com/trainstep/trainstep/pkg/apierr"
	"github.com/trainstep/trainstep/pkg/reconcile"
	"github.com/trainstep/trainstep/pkg/render"
	"github.com/trainstep/trainstep/pkg/result"
)

// DefaultLeaseDuration is how long a job's lease stays valid without
// renewal: how long a retry waits for a writer that died without letting go.
const DefaultLeaseDuration = 15 * time.Second

// LeaseRenewPeriod is how often a run renews a Lease of the given
// duration, and how often a waiting run looks whether it is free: a quarter
// of it, so that two renewals can fail before the Lease is in doubt.
func LeaseRenewPeriod(duration time.Duration) time.Duration { return duration / 4 }

// leaseName names a job's Lease: the job's name and the start of its
// identity, so that runs of another identity that chose the same job name
// never contend for it (they are refused by the objects in their way). The
// prefix keeps it apart from leases of other software.
func leaseName(id render.Identity) string {
	name := "trainstep-" + id.JobName
	if id.OwnerID != "" {
		name += "-" + id.OwnerID[:min(len(id.OwnerID), leaseIdentityChars)]
	}
	return name
}

// leaseIdentityChars is how much of the identity names the Lease: 64 bits,
// which no one who cannot choose a workflow's UID can match.
const leaseIdentityChars = 16

// jobLease is this run's claim on the job's Lease: the one writer of the
// job. One identity serves the whole run, so that after an outage the run
// takes its own lease back at once.
type jobLease struct {
	conn     *connection
	name     string
	identity string
	duration time.Duration
	owner    *metav1.OwnerReference
	// labels are the job's labels (name and identity): the Lease carries
	// them, and one of its name without them is not the job's.
	labels map[string]string
	log    *zap.Logger

	// lost is closed when the current elector stops leading (also after stop).
	lost <-chan struct{}
	// leading is true while this run holds the Lease: from the elector's
	// start of leading until it stops (renewal failed, or stop).
	leading atomic.Bool
	// stop ends renewal; it returns once the elector is done.
	stop func()
}

func newJobLease(cfg *Config, s *preparedRun) *jobLease {
	identity := cfg.OwnerPod
	if identity == "" {
		identity, _ = os.Hostname()
	}
	name := leaseName(s.identity)
	return &jobLease{conn: s.conn, name: name, identity: identity + "_" + rand.String(8),
		duration: cfg.LeaseDuration, owner: s.identity.Owner, labels: render.JobLabels(s.identity), log: s.log.With(zap.String("lease", name))}
}

// acquire waits until this run holds the job's Lease. Another run of the
// same job (an Argo retry started while the previous step pod still lives)
// keeps it while it renews; this one waits until it is released or
// expires. With takeBack (this run held the lease and could not renew it,
// e.g. while the API server was away), finding another holder means this
// run was superseded: it returns errLeaseLost; not holding it again within
// apiTimeout is Transient. It returns ctx's cause if ctx ends first.
func (l *jobLease) acquire(ctx context.Context, takeBack bool, apiTimeout time.Duration) error {
	// Taking the lease back, the API server may still be away: the elector
	// retries, and creates the Lease itself if it went. A first run retries
	// its create within the API timeout, then is Transient (a retried step
	// meets the API server as it restarts as often as any other write).
	var created bool
	if takeBack {
		var err error
		if created, err = ensureLease(ctx, l.conn, l.name, l.labels, l.owner); err != nil && result.PhaseOf(err) == result.PhaseInvalid {
			return err
		}
	} else if err := retryTransient(ctx, apiTimeout, func() (err error) {
		created, err = ensureLease(ctx, l.conn, l.name, l.labels, l.owner)
		var re *result.Error
		if errors.As(err, &re) {
			return backoff.Permanent(err)
		}
		return err
	}); err != nil {
		return err
	}
	started, stopped, done := make(chan struct{}), make(chan struct{}), make(chan struct{})
	elector, err := l.newElector(started, stopped)
	if err != nil {
		return fmt.Errorf("setting up the job's lease: %w", err)
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
	look := time.NewTicker(l.duration / 4)
	defer look.Stop()
	since, said := time.Now(), ""
	for {
		select {
		case <-started:
			l.lost, l.stop = stopped, stop
			// A Lease this run created has its owner already; one an earlier
			// attempt created is pointed at this run's.
			if !created {
				if err := l.own(ctx); err != nil {
					l.log.Warn("pointing the job's lease at this step", zap.Error(err))
				}
			}
			l.log.Info("holding the job's lease", zap.String("holder", l.identity))
			return nil
		case <-look.C:
			other := elector.GetLeader()
			switch {
			case takeBack && other != "" && other != l.identity:
				stop()
				return errLeaseLost
			case takeBack && time.Since(since) > apiTimeout:
				stop()
				return result.Transient(result.ReasonAPIUnreachable, fmt.Errorf("could not take the job's lease back within %s", apiTimeout))
			case !takeBack && other != said:
				said = other
				l.log.Info("another run of this job holds its lease; waiting until it is released or expires", zap.String("holder", other))
			}
		case <-ctx.Done():
			stop()
			return context.Cause(ctx)
		}
	}
}

// newElector sets up the elector of the job's Lease: started is closed
// when this run holds it, stopped when it stops holding it.
func (l *jobLease) newElector(started, stopped chan struct{}) (*leaderelection.LeaderElector, error) {
	return leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock: &labelledLeaseLock{
			LeaseLock: &resourcelock.LeaseLock{
				LeaseMeta:  metav1.ObjectMeta{Name: l.name, Namespace: l.conn.namespace},
				Client:     l.conn.coordination,
				LockConfig: resourcelock.ResourceLockConfig{Identity: l.identity},
			},
			labels: l.labels,
			owner:  l.owner,
		},
		LeaseDuration: l.duration,
		RenewDeadline: l.duration * 2 / 3,
		RetryPeriod:   LeaseRenewPeriod(l.duration),
		// Stopping gives the Lease up only while this run still holds it
		// (an update that conflicts with another holder's write fails).
		ReleaseOnCancel: true,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(context.Context) {
				l.leading.Store(true)
				close(started)
			},
			OnStoppedLeading: func() {
				l.leading.Store(false)
				close(stopped)
			},
		},
		Name: l.name,
	})
}

// ensureLease creates the job's Lease, labelled and owned like the job's
// other objects, so that the garbage collector removes it with its owner;
// created says this call made it. One of that name without the job's
// labels is not the job's: it is never taken over, and the run ends Invalid
// naming it.
func ensureLease(ctx context.Context, conn *connection, name string, labels map[string]string, owner *metav1.OwnerReference) (created bool, err error) {
	lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: conn.namespace, Labels: labels}}
	if owner != nil {
		lease.OwnerReferences = []metav1.OwnerReference{*owner}
	}
	leases := conn.coordination.Leases(conn.namespace)
	_, err = leases.Create(ctx, lease, metav1.CreateOptions{})
	if !apierrors.IsAlreadyExists(err) {
		if err != nil {
			return false, fmt.Errorf("creating the job's lease %s: %w", name, err)
		}
		return true, nil
	}
	live, err := leases.Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return false, nil // released meanwhile: the elector creates it
	case err != nil:
		return false, fmt.Errorf("reading the job's lease %s: %w", name, err)
	}
	for key, value := range labels {
		if live.Labels[key] != value {
			return false, result.Invalid(result.ReasonNotOwned, fmt.Errorf("lease %s exists and is not this job's (%s): trainstep neither takes nor deletes it; rename the job (--name) or remove the lease",
				name, reconcile.DescribeOwnership(live)))
		}
	}
	return false, nil
}

// labelledLeaseLock is client-go's LeaseLock whose Create makes the Lease
// as ensureLease does, labelled and owned like the job's objects: the
// elector creates it when it went between ensureLease and the elector's
// first read (a predecessor released it), and one without the job's labels
// would be refused by the namespace's admission policy and by the next run.
type labelledLeaseLock struct {
	*resourcelock.LeaseLock
	labels map[string]string
	owner  *metav1.OwnerReference
}

// Create creates the Lease with the job's labels and owner and the
// elector's record, then reads it back so that the lock's Update has it.
func (ll *labelledLeaseLock) Create(ctx context.Context, ler resourcelock.LeaderElectionRecord) error {
	lease := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: ll.LeaseMeta.Name, Namespace: ll.LeaseMeta.Namespace, Labels: ll.labels},
		Spec:       resourcelock.LeaderElectionRecordToLeaseSpec(&ler),
	}
	if ll.owner != nil {
		lease.OwnerReferences = []metav1.OwnerReference{*ll.owner}
	}
	if _, err := ll.Client.Leases(ll.LeaseMeta.Namespace).Create(ctx, lease, metav1.CreateOptions{}); err != nil {
		return err
	}
	_, _, err := ll.Get(ctx)
	return err
}

// own points the Lease's owner at this run's owner, so that it outlives the
// step pod of an earlier attempt that created it.
func (l *jobLease) own(ctx context.Context) error {
	var refs []metav1.OwnerReference
	if l.owner != nil {
		refs = []metav1.OwnerReference{*l.owner}
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"ownerReferences": refs}})
	if err != nil {
		return err
	}
	_, err = l.conn.coordination.Leases(l.conn.namespace).Patch(ctx, l.name, types.MergePatchType, patch, metav1.PatchOptions{})
	return err
}

// held reports whether this run holds the job's Lease now.
func (l *jobLease) held() bool { return l.leading.Load() }

// release stops renewing, which gives the Lease up if this run still holds
// it, then deletes the Lease unless another run holds it, so that the next
// run of the job does not find a stale one. The delete is conditional on the
// version read: a run that took the Lease meanwhile keeps it.
func (l *jobLease) release(ctx context.Context) {
	if l.stop != nil {
		l.stop()
	}
	// An API server restarting as the run ends is waited for, within ctx.
	for {
		err := l.deleteIfFree(ctx)
		if err == nil {
			return
		}
		if !apierr.IsTransient(err) || ctx.Err() != nil {
			l.log.Warn("deleting the job's lease", zap.Error(err))
			return
		}
		select {
		case <-ctx.Done():
			l.log.Warn("deleting the job's lease", zap.Error(err))
			return
		case <-time.After(leaseDeleteRetry):
		}
	}
}

// leaseDeleteRetry is how often release tries the Lease's delete again.
const leaseDeleteRetry = 500 * time.Millisecond

// deleteIfFree deletes the job's Lease unless another run holds it; nil
// when it is gone or another run's.
func (l *jobLease) deleteIfFree(ctx context.Context) error {
	leases := l.conn.coordination.Leases(l.conn.namespace)
	current, err := leases.Get(ctx, l.name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return nil
	case err != nil:
		return fmt.Errorf("reading the job's lease to delete it: %w", err)
	case current.Spec.HolderIdentity != nil && *current.Spec.HolderIdentity != "" && *current.Spec.HolderIdentity != l.identity:
		l.log.Info("the job's lease is held by another run; leaving it", zap.String("holder", *current.Spec.HolderIdentity))
		return nil
	}
	// Free, or still this run's (its release did not land): deleted.
	err = leases.Delete(ctx, l.name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &current.UID, ResourceVersion: &current.ResourceVersion}})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return err
	}
	return nil
}
