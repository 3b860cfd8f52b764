package reconcile

import (
	"context"
	"errors"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/trainstep/trainstep/pkg/apis/trainstep/v1alpha1"
	"github.com/trainstep/trainstep/pkg/frameworks/tensorflow"
	"github.com/trainstep/trainstep/pkg/result"
)

// A ConfigMap named like the job's TF_CONFIG cluster that the job did not
// make ends the run Invalid, naming it, before any pod reads it; the
// teardown leaves it as it was.
func TestAForeignConfigMapIsNeitherUsedNorDeleted(t *testing.T) {
	for _, tc := range []struct {
		name   string
		labels map[string]string
	}{
		{"unlabelled", nil},
		{"labelled, but another owner", map[string]string{v1alpha1.LabelJobName: "mnist"}},
		{"labelled with another step's identity", map[string]string{v1alpha1.LabelJobName: "mnist", v1alpha1.LabelIdentity: "not" + testOwnerID}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			foreign := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: tensorflow.ClusterConfigMapName("mnist"), Namespace: ns, Labels: tc.labels, UID: "theirs",
				OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: "someone", UID: "someone", Controller: ptrTrue()}}},
				Data: map[string]string{"discover_hosts.sh": "planted"}}
			h := startWith(t, tfJob(v1alpha1.RestartPolicyExitCode), func(h *harness, o *Options) {
				h.runErr = make(chan error, 1)
				if tc.labels != nil {
					// Labelled objects are in the job's cache: adopt would take
					// them. This one arrives after the caches synced.
					o.BeforeSync = func() {
						_, _ = h.client.CoreV1().ConfigMaps(ns).Create(context.Background(), foreign.DeepCopy(), metav1.CreateOptions{})
					}
					return
				}
				if _, err := h.client.CoreV1().ConfigMaps(ns).Create(context.Background(), foreign, metav1.CreateOptions{}); err != nil {
					t.Fatal(err)
				}
			})
			err := <-h.runErr
			var re *result.Error
			if !errors.As(err, &re) || re.Phase != result.PhaseInvalid || re.Reason != result.ReasonNotOwned || !strings.Contains(err.Error(), "configmap mnist-tf-cluster") {
				t.Fatalf("Run: %v, want Invalid %s naming configmap mnist-tf-cluster", err, result.ReasonNotOwned)
			}
			if pods, _ := h.client.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{}); len(pods.Items) != 0 {
				t.Errorf("%d pods created, want none: they would read the foreign ConfigMap", len(pods.Items))
			}
			if _, err := h.ctrl.Cleanup(context.Background(), true, false); err != nil {
				t.Fatal(err)
			}
			cm, err := h.client.CoreV1().ConfigMaps(ns).Get(context.Background(), foreign.Name, metav1.GetOptions{})
			if err != nil || cm.Data["discover_hosts.sh"] != "planted" {
				t.Errorf("the foreign ConfigMap after the teardown: %v, %v; want it untouched", cm, err)
			}
		})
	}
}

func ptrTrue() *bool { b := true; return &b }
