package executor

import (
	"context"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"

	"github.com/trainstep/trainstep/pkg/gang"
	"github.com/trainstep/trainstep/pkg/result"
)

// servedResources is a discovery client serving the given resources per
// group version; any other group version is NotFound, as from an API server
// that does not serve it.
type servedResources struct {
	discovery.ServerResourcesInterface
	served map[string][]string
}

func (s servedResources) ServerResourcesForGroupVersion(gv string) (*metav1.APIResourceList, error) {
	names, ok := s.served[gv]
	if !ok {
		return nil, apierrors.NewNotFound(schema.GroupResource{Group: gv}, "")
	}
	list := &metav1.APIResourceList{GroupVersion: gv}
	for _, n := range names {
		list.APIResources = append(list.APIResources, metav1.APIResource{Name: n})
	}
	return list, nil
}

func TestCheckPodGroupAPISaysWhatTheClusterLacks(t *testing.T) {
	cases := []struct {
		name   string
		served map[string][]string
		gvr    schema.GroupVersionResource
		want   []string // in the Invalid message; none: served
	}{
		{"Kubernetes' PodGroup served", map[string][]string{"scheduling.k8s.io/v1beta1": {"workloads", "podgroups", "podgroups/status"}},
			gang.KubernetesPodGroups, nil},
		{"a cluster before 1.37 or without the gate", map[string][]string{"scheduling.k8s.io/v1": {"priorityclasses"}},
			gang.KubernetesPodGroups, []string{"gang: kubernetes", "scheduling.k8s.io/v1beta1", "Kubernetes 1.37", "GenericWorkload",
				"kube-apiserver, kube-scheduler and kube-controller-manager", "--runtime-config=scheduling.k8s.io/v1beta1=true"}},
		{"the group version served without PodGroups", map[string][]string{"scheduling.k8s.io/v1beta1": {"workloads"}},
			gang.KubernetesPodGroups, []string{"GenericWorkload"}},
		{"a missing CRD", nil, gang.VolcanoPodGroups, []string{"CustomResourceDefinition podgroups.scheduling.volcano.sh"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := &connection{discovery: servedResources{served: tc.served}}
			err := c.checkPodGroupAPI(context.Background(), time.Second, tc.gvr)
			if tc.want == nil {
				if err != nil {
					t.Fatalf("served, yet: %v", err)
				}
				return
			}
			if result.PhaseOf(err) != result.PhaseInvalid {
				t.Fatalf("err %v, want Invalid", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("message %q does not say %q", err, w)
				}
			}
		})
	}
}
