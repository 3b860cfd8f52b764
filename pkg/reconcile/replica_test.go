package reconcile

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/google/go-cmp/cmp"
	"github.com/trainstep/trainstep/pkg/apis/trainstep/v1alpha1"
	"github.com/trainstep/trainstep/pkg/policy"
)

func podWithUID(uid types.UID) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "job-worker-0", UID: uid}}
}

// TestReplicaStateTransitions walks every transition of the state machine
// with the events that may arrive in each stage, in the orders an informer
// and the API server can produce them.
func TestReplicaStateTransitions(t *testing.T) {
	now := time.Unix(1000, 0)
	type step struct {
		name string
		do   func(st *replicaState)
		want stage
	}
	accept := func(uid types.UID, attempt int, cached *corev1.Pod) func(*replicaState) {
		return func(st *replicaState) {
			if err := st.createAccepted(uid, attempt, now, cached); err != nil {
				t.Fatal(err)
			}
		}
	}
	seen := func(uid types.UID) func(*replicaState) {
		return func(st *replicaState) { st.podSeen(podWithUID(uid), now) }
	}
	deleted := func(uid types.UID) func(*replicaState) { return func(st *replicaState) { st.podDeleted(uid) } }
	recreate := func(st *replicaState) {
		if _, err := st.doomedForRecreate(); err != nil {
			t.Fatal(err)
		}
		st.recreateStarted(now, true)
	}
	confirm := func(live *corev1.Pod) func(*replicaState) {
		return func(st *replicaState) { st.confirmed(live, now) }
	}
	cases := []struct {
		name  string
		steps []step
		// wantAttempt and wantNext are checked after the last step.
		wantAttempt, wantNext int
		wantRecreations       int32
	}{{
		name: "created, delivered, deleted by trainstep, replaced",
		steps: []step{
			{"create accepted", accept("a", 0, nil), stageCreated},
			{"informer add", seen("a"), stageObserved},
			{"recreate", recreate, stageRemoving},
			{"old instance updated while terminating", seen("a"), stageRemoving},
			{"informer delete", deleted("a"), stageAbsent},
			{"replacement accepted", accept("b", 1, nil), stageCreated},
		},
		wantAttempt: 1, wantNext: 1, wantRecreations: 1,
	}, {
		name: "add delivered before the create returned",
		steps: []step{
			{"create accepted with the pod already cached", accept("a", 0, podWithUID("a")), stageObserved},
		},
	}, {
		name: "a late delivery of an older instance changes nothing",
		steps: []step{
			{"create accepted", accept("b", 1, nil), stageCreated},
			{"old instance add", seen("a"), stageCreated},
			{"old instance delete", deleted("a"), stageCreated},
			{"own add", seen("b"), stageObserved},
		},
		wantAttempt: 1, wantNext: 1,
	}, {
		name: "deleted from outside: vanished, confirmed lost, replaced",
		steps: []step{
			{"create accepted", accept("a", 0, nil), stageCreated},
			{"informer add", seen("a"), stageObserved},
			{"informer delete", deleted("a"), stageVanished},
			{"live GET: not found", confirm(nil), stageLost},
			{"recreate", recreate, stageAbsent},
		},
		wantNext: 1, wantRecreations: 1,
	}, {
		name: "a delete the live GET contradicts is a stale view",
		steps: []step{
			{"create accepted", accept("a", 0, nil), stageCreated},
			{"informer delete (tombstone)", deleted("a"), stageVanished},
			{"live GET: still there", confirm(podWithUID("a")), stageObserved},
		},
	}, {
		name: "a gang release keeps the attempt",
		steps: []step{
			{"create accepted", accept("a", 2, nil), stageCreated},
			{"release", func(st *replicaState) { st.release(now) }, stageRemoving},
			{"informer delete", deleted("a"), stageAbsent},
		},
		wantAttempt: 2, wantNext: 2,
	}, {
		name: "a create the informer never delivered: the live GET finds it",
		steps: []step{
			{"create accepted", accept("a", 0, nil), stageCreated},
			{"live GET: there", confirm(podWithUID("a")), stageObserved},
		},
	}, {
		name: "a create the informer never delivered: the live GET finds nothing",
		steps: []step{
			{"create accepted", accept("a", 0, nil), stageCreated},
			{"live GET: not found", confirm(nil), stageLost},
		},
	}, {
		name: "a delete whose informer event was missed: the live GET finds the name free",
		steps: []step{
			{"create accepted", accept("a", 0, nil), stageCreated},
			{"informer add", seen("a"), stageObserved},
			{"recreate", recreate, stageRemoving},
			{"live GET: another instance under the name", confirm(podWithUID("z")), stageAbsent},
		},
		wantNext: 1, wantRecreations: 1,
	}, {
		name: "a delete that did not take is sent again and still waited for",
		steps: []step{
			{"create accepted", accept("a", 0, nil), stageCreated},
			{"informer add", seen("a"), stageObserved},
			{"recreate", recreate, stageRemoving},
			{"live GET: still there, not terminating", func(st *replicaState) {
				if again := st.confirmed(podWithUID("a"), now); again == nil || again.UID != "a" {
					t.Fatalf("delete again: got %v, want instance a", again)
				}
			}, stageRemoving},
			{"informer delete", deleted("a"), stageAbsent},
		},
		wantNext: 1, wantRecreations: 1,
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			st := newReplicaState(policy.ReplicaID{Type: v1alpha1.ReplicaTypeWorker}, "job-worker-0")
			for _, s := range tc.steps {
				s.do(st)
				if st.stage != s.want {
					t.Fatalf("after %q: stage %s, want %s", s.name, st.stage, s.want)
				}
			}
			if st.attempt != tc.wantAttempt || st.nextAttempt != tc.wantNext || st.recreations != tc.wantRecreations {
				t.Errorf("attempt %d, next %d, recreations %d; want %d, %d, %d",
					st.attempt, st.nextAttempt, st.recreations, tc.wantAttempt, tc.wantNext, tc.wantRecreations)
			}
		})
	}
}

func TestReplicaStateRefusesDecisionsOnOpenExpectations(t *testing.T) {
	st := newReplicaState(policy.ReplicaID{Type: v1alpha1.ReplicaTypeWorker}, "job-worker-0")
	if err := st.createAccepted("a", 0, time.Now(), nil); err != nil {
		t.Fatal(err)
	}
	if !st.expecting() {
		t.Error("a created, undelivered instance must hold an expectation")
	}
	if _, err := st.doomedForRecreate(); err == nil {
		t.Error("recreating a replica whose instance was never delivered must be refused")
	}
	if err := st.createAccepted("b", 0, time.Now(), nil); err == nil {
		t.Error("a second create for a replica with an instance must be refused")
	}
	st.podSeen(podWithUID("a"), time.Now())
	st.podDeleted("a")
	if _, err := st.doomedForRecreate(); err == nil || st.recreations != 0 {
		t.Errorf("recreating a vanished replica before the live check: err %v, recreations %d; want refused, 0", err, st.recreations)
	}
}

func TestSlimForCacheKeepsWhatDecisionsRead(t *testing.T) {
	yes := true
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "job-worker-0", UID: "u", Labels: map[string]string{v1alpha1.LabelAttempt: "2"},
			Annotations:     map[string]string{"big": strings.Repeat("x", 4096), v1alpha1.AnnotationRestarts: "3"},
			OwnerReferences: []metav1.OwnerReference{{Name: "step", UID: "o", Controller: &yes}},
			ManagedFields:   []metav1.ManagedFieldsEntry{{Manager: "trainstep"}}},
		Spec: corev1.PodSpec{NodeName: "node-1", SchedulingGates: []corev1.PodSchedulingGate{{Name: "gate"}},
			Containers: []corev1.Container{{Name: "tensorflow", Image: "train:1", Env: []corev1.EnvVar{{Name: "TF_CONFIG", Value: strings.Repeat("y", 4096)}}}},
			Volumes:    []corev1.Volume{{Name: "data"}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, ContainerStatuses: []corev1.ContainerStatus{{Name: "tensorflow", RestartCount: 1}}},
	}
	obj, err := slimForCache(pod)
	if err != nil {
		t.Fatal(err)
	}
	slim := obj.(*corev1.Pod)
	want := corev1.PodSpec{NodeName: "node-1", SchedulingGates: []corev1.PodSchedulingGate{{Name: "gate"}},
		Containers: []corev1.Container{{Name: "tensorflow"}}}
	if diff := cmp.Diff(want, slim.Spec); diff != "" {
		t.Errorf("cached spec (-want +got):\n%s", diff)
	}
	if len(slim.Annotations) != 1 || slim.Annotations[v1alpha1.AnnotationRestarts] != "3" || slim.ManagedFields != nil {
		t.Errorf("annotations %v, managed fields %d; want only the restart count cached", slim.Annotations, len(slim.ManagedFields))
	}
	if slim.Labels[v1alpha1.LabelAttempt] != "2" || len(slim.OwnerReferences) != 1 || slim.Status.ContainerStatuses[0].RestartCount != 1 {
		t.Errorf("labels, owner or status lost: %+v", slim.ObjectMeta)
	}
}

// A failed delete must leave the replica where it was, so the next sync
// decides the recreation again: the restart is counted only once it landed.
func TestRecreationMovesOnOnlyOnceTheDeleteLanded(t *testing.T) {
	now := time.Unix(1000, 0)
	st := newReplicaState(policy.ReplicaID{Type: v1alpha1.ReplicaTypeWorker}, "job-worker-0")
	if err := st.createAccepted("a", 0, now, podWithUID("a")); err != nil {
		t.Fatal(err)
	}
	doomed, err := st.doomedForRecreate()
	if err != nil || doomed == nil || doomed.UID != "a" {
		t.Fatalf("doomed %v, err %v; want instance a", doomed, err)
	}
	// The delete is sent, and the API server refuses it: nothing was committed.
	st.deleteSent()
	st.deleteFailed()
	if st.stage != stageObserved || st.recreations != 0 || st.nextAttempt != 0 || st.expecting() || st.deleting {
		t.Fatalf("after a refused delete: stage %s, recreations %d, next %d, deleting %v; want observed, 0, 0, false", st.stage, st.recreations, st.nextAttempt, st.deleting)
	}
	// The informer's delete of that instance is now a vanishing (no one asked for it), not the removal.
	probe := *st
	if probe.podDeleted("a"); probe.stage != stageVanished {
		t.Fatalf("a delete delivered after the refusal made the replica %s, want vanished", probe.stage)
	}
	if again, err := st.doomedForRecreate(); err != nil || again == nil {
		t.Fatalf("the recreation must be possible again: %v, %v", again, err)
	}
	st.recreateStarted(now, true)
	if st.stage != stageRemoving || st.recreations != 1 || st.nextAttempt != 1 || st.restartsSoFar() != 1 {
		t.Errorf("after the delete landed: stage %s, recreations %d, next %d", st.stage, st.recreations, st.nextAttempt)
	}
	if !st.expectationOverdue(now.Add(expectationTimeout), expectationTimeout) || st.expectationOverdue(now.Add(time.Second), expectationTimeout) {
		t.Error("the removal's expectation must become overdue after expectationTimeout, not before")
	}
}

func TestAdoptedReplicaContinuesTheRestartCount(t *testing.T) {
	st := newReplicaState(policy.ReplicaID{Type: v1alpha1.ReplicaTypeWorker}, "job-worker-0")
	pod := podWithUID("a")
	pod.Annotations = map[string]string{v1alpha1.AnnotationRestarts: "2"}
	st.adopted(pod, 2, restartsOf(pod))
	if st.restartsSoFar() != 2 {
		t.Errorf("restarts so far %d, want 2 from the annotation", st.restartsSoFar())
	}
	st.recreateStarted(time.Now(), true)
	if st.restartsSoFar() != 3 || st.nextAttempt != 3 {
		t.Errorf("after one more recreation: restarts %d, next attempt %d; want 3, 3", st.restartsSoFar(), st.nextAttempt)
	}
}

// A release keeps the in-place restarts of the instance it removes, also
// when the informer delivered its delete before the call returned, and only
// once: the next instance, created but not seen yet, brings none of them.
func TestReleaseKeepsTheInPlaceRestartsOnce(t *testing.T) {
	now := time.Unix(1000, 0)
	for _, deliveredFirst := range []bool{false, true} {
		st := newReplicaState(policy.ReplicaID{Type: v1alpha1.ReplicaTypeLauncher}, "job-launcher-0")
		if err := st.createAccepted("a", 0, now, podWithUID("a")); err != nil {
			t.Fatal(err)
		}
		st.last.Restarts = 2 // what the view last counted of instance a
		st.deleteSent()
		if deliveredFirst {
			st.podDeleted("a")
		}
		st.release(now)
		if st.restartsSoFar() != 2 {
			t.Errorf("delete delivered first %v: restarts so far %d after the release, want 2", deliveredFirst, st.restartsSoFar())
		}
		if st.stage == stageRemoving {
			st.podDeleted("a")
		}
		if err := st.createAccepted("b", 0, now, nil); err != nil {
			t.Fatal(err)
		}
		st.release(now)
		if st.restartsSoFar() != 2 {
			t.Errorf("delete delivered first %v: restarts so far %d after releasing the next instance unseen, want still 2", deliveredFirst, st.restartsSoFar())
		}
	}
}
