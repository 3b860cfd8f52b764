package reconcile

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/trainstep/trainstep/internal/testutil"
	"github.com/trainstep/trainstep/pkg/apis/trainstep/v1alpha1"
	"github.com/trainstep/trainstep/pkg/frameworks/mpi"
	"github.com/trainstep/trainstep/pkg/policy"
)

// The job's Secrets are read, created, re-attached and deleted by name,
// never listed or watched: deploy/secrets/ grants no list or watch, which
// would let the step read every Secret of its namespace at once. A new job
// creates its Secret once; one an earlier attempt left (labelled with the
// job and its identity) is re-attached to this run, not created again; the
// teardown deletes it by its UID.
func TestSecretsAreReadByNameNeverListedOrWatched(t *testing.T) {
	for _, earlier := range []bool{false, true} {
		name := "new job"
		if earlier {
			name = "an earlier attempt's Secret"
		}
		t.Run(name, func(t *testing.T) {
			job := mpiJob(v1alpha1.LauncherCreationAtStartup)
			secretName := mpi.SSHSecretName(job.Name)
			const earlierUID = types.UID("earlier-attempt")
			h := startWith(t, job, func(h *harness, _ *Options) {
				if !earlier {
					return
				}
				left := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: secretName, Namespace: ns, UID: earlierUID,
					Labels:          map[string]string{v1alpha1.LabelJobName: job.Name, v1alpha1.LabelIdentity: testOwnerID},
					OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: "earlier-step", UID: "earlier-step", Controller: ptrTrue()}}}}
				if err := h.client.Tracker().Add(left); err != nil {
					t.Fatal(err)
				}
			})
			var secret *corev1.Secret
			testutil.Eventually(t, waitTimeout, "the job's Secret", func() bool {
				s, err := h.client.CoreV1().Secrets(ns).Get(context.Background(), secretName, metav1.GetOptions{})
				secret = s
				return err == nil
			})
			// The job runs past its Secret and ends: the launcher succeeds.
			for _, w := range []string{job.Name + "-worker-0", job.Name + "-worker-1"} {
				h.setStatus(w, corev1.PodRunning, 0)
			}
			h.setStatus(job.Name+"-launcher-0", corev1.PodSucceeded, 0)
			if d := h.decision(); d.Outcome != policy.OutcomeSucceeded {
				t.Fatalf("decision %+v, want Succeeded", d)
			}
			if earlier {
				// Re-attached by the first sync, before any create.
				s, err := h.client.CoreV1().Secrets(ns).Get(context.Background(), secretName, metav1.GetOptions{})
				if err != nil {
					t.Fatal(err)
				}
				secret = s
				if secret.UID != earlierUID {
					t.Errorf("the Secret has UID %s, want the earlier attempt's %s re-attached", secret.UID, earlierUID)
				}
				if len(secret.OwnerReferences) != 0 {
					t.Errorf("the re-attached Secret is still owned by %v, want this run's owner (none)", secret.OwnerReferences)
				}
			}
			if _, err := h.ctrl.Cleanup(context.Background(), true, false); err != nil {
				t.Fatal(err)
			}
			if _, err := h.client.CoreV1().Secrets(ns).Get(context.Background(), secretName, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				t.Errorf("the Secret after the teardown: %v, want it deleted", err)
			}
			creates := 0
			for _, a := range h.client.Actions() {
				if a.GetResource().Resource != "secrets" {
					continue
				}
				switch a.GetVerb() {
				case "list", "watch":
					t.Errorf("the controller sent %s secrets", a.GetVerb())
				case "create":
					creates++
				}
			}
			if want := map[bool]int{false: 1, true: 0}[earlier]; creates != want {
				t.Errorf("%d creates of secrets, want %d", creates, want)
			}
		})
	}
}
