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
	coordinationv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"
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
	var created *coordinationv1.Lease
	if takeBack {
		var err error
		if created, err = l.ensure(ctx); err != nil && result.PhaseOf(err) == result.PhaseInvalid {
			return err
		}
	} else if err := retryTransient(ctx, apiTimeout, func() (err error) {
		created, err = l.ensure(ctx)
		var re *result.Error
		if errors.As(err, &re) {
			return backoff.Permanent(err)
		}
		return err
	}); err != nil {
		return err
	}
	started, stopped, done := make(chan struct{}), make(chan struct{}), make(chan struct{})
	elector, err := l.newElector(started, stopped, created)
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
			if created == nil {
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
// when this run holds it, stopped when it stops holding it. created is the
// Lease this run just created, naming it the holder (nil if it did not).
func (l *jobLease) newElector(started, stopped chan struct{}, created *coordinationv1.Lease) (*leaderelection.LeaderElector, error) {
	return leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock:          &jobLeaseLock{job: l, lease: created, fresh: created != nil},
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

// ensure creates the job's Lease with this run as its holder, labelled and
// owned like the job's other objects, so that the garbage collector removes
// it with its owner; it returns the Lease when this call made it. One of
// that name without the job's labels is not the job's: it is never taken
// over, and the run ends Invalid naming it.
func (l *jobLease) ensure(ctx context.Context) (*coordinationv1.Lease, error) {
	now := metav1.Now()
	record := resourcelock.LeaderElectionRecord{HolderIdentity: l.identity, LeaseDurationSeconds: int(l.duration / time.Second),
		AcquireTime: now, RenewTime: now}
	lease := l.labelled(resourcelock.LeaderElectionRecordToLeaseSpec(&record))
	leases := l.conn.coordination.Leases(l.conn.namespace)
	created, err := leases.Create(ctx, lease, metav1.CreateOptions{})
	if !apierrors.IsAlreadyExists(err) {
		if err != nil {
			return nil, fmt.Errorf("creating the job's lease %s: %w", l.name, err)
		}
		return created, nil
	}
	live, err := leases.Get(ctx, l.name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return nil, nil // released meanwhile: the elector creates it
	case err != nil:
		return nil, fmt.Errorf("reading the job's lease %s: %w", l.name, err)
	}
	for key, value := range l.labels {
		if live.Labels[key] != value {
			return nil, result.Invalid(result.ReasonNotOwned, fmt.Errorf("lease %s exists and is not this job's (%s): trainstep neither takes nor deletes it; rename the job (--name) or remove the lease",
				l.name, reconcile.DescribeOwnership(live)))
		}
	}
	return nil, nil
}

// labelled is the job's Lease with spec, labelled and owned like the job's
// objects.
func (l *jobLease) labelled(spec coordinationv1.LeaseSpec) *coordinationv1.Lease {
	lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: l.name, Namespace: l.conn.namespace, Labels: l.labels}, Spec: spec}
	if l.owner != nil {
		lease.OwnerReferences = []metav1.OwnerReference{*l.owner}
	}
	return lease
}

// jobLeaseLock is the elector's lock on the job's Lease: client-go's
// LeaseLock, but a Lease it creates is labelled and owned like the job's
// objects (the elector creates it when it went between ensure and the
// elector's first read; one without the labels would be refused by the
// namespace's admission policy and by the next run), and the Lease ensure
// just created naming this run is the elector's first read, not read again.
type jobLeaseLock struct {
	job *jobLease
	// lease is the version last read or written; fresh says it is the one
	// this run just created, which the first Get returns as it is.
	lease *coordinationv1.Lease
	fresh bool
}

// renewedJustNow reports whether the Lease as last read or written names
// this run, renewed so recently that writing ler would only move its renew
// time on by moments. The elector writes twice as it starts leading (its
// acquisition, then its renewal loop's first turn): right after the create,
// at the moment a sweep's steps all start, both are skipped. The elector
// stops leading by its last renewal plus a period and its deadline,
// duration/12 before the Lease expires for others; a skip keeps half of
// that margin. Its regular renewals, a period apart, are all written.
func (ll *jobLeaseLock) renewedJustNow(ler resourcelock.LeaderElectionRecord) bool {
	spec := ll.lease.Spec
	if spec.HolderIdentity == nil || *spec.HolderIdentity != ll.job.identity || ler.HolderIdentity != ll.job.identity || spec.RenewTime == nil {
		return false
	}
	since := time.Since(spec.RenewTime.Time)
	return since >= 0 && since < ll.job.duration/24
}

var _ resourcelock.Interface = (*jobLeaseLock)(nil)

// Get returns the Lease's election record.
func (ll *jobLeaseLock) Get(ctx context.Context) (*resourcelock.LeaderElectionRecord, []byte, error) {
	if !ll.fresh {
		lease, err := ll.leases().Get(ctx, ll.job.name, metav1.GetOptions{})
		if err != nil {
			return nil, nil, err
		}
		ll.lease = lease
	}
	ll.fresh = false
	record := resourcelock.LeaseSpecToLeaderElectionRecord(&ll.lease.Spec)
	raw, err := json.Marshal(*record)
	if err != nil {
		return nil, nil, err
	}
	return record, raw, nil
}

// Create creates the Lease with the job's labels and owner and the record.
func (ll *jobLeaseLock) Create(ctx context.Context, ler resourcelock.LeaderElectionRecord) error {
	created, err := ll.leases().Create(ctx, ll.job.labelled(resourcelock.LeaderElectionRecordToLeaseSpec(&ler)), metav1.CreateOptions{})
	if err != nil {
		return err
	}
	ll.lease = created
	return nil
}

// Update writes the record over the version last read or written: one
// another run wrote meanwhile makes it fail (a conflict).
func (ll *jobLeaseLock) Update(ctx context.Context, ler resourcelock.LeaderElectionRecord) error {
	if ll.lease == nil {
		return errors.New("the job's lease was neither read nor created before its update")
	}
	if ll.renewedJustNow(ler) {
		return nil
	}
	lease := ll.lease.DeepCopy()
	lease.Spec = resourcelock.LeaderElectionRecordToLeaseSpec(&ler)
	updated, err := ll.leases().Update(ctx, lease, metav1.UpdateOptions{})
	if err != nil {
		return err
	}
	ll.lease = updated
	return nil
}

// RecordEvent records nothing: the run logs its hold on the Lease itself.
func (ll *jobLeaseLock) RecordEvent(string) {}

// Identity is this run's holder identity.
func (ll *jobLeaseLock) Identity() string { return ll.job.identity }

// Describe names the Lease.
func (ll *jobLeaseLock) Describe() string { return ll.job.conn.namespace + "/" + ll.job.name }

func (ll *jobLeaseLock) leases() coordinationv1client.LeaseInterface {
	return ll.job.conn.coordination.Leases(ll.job.conn.namespace)
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
