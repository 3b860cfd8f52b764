package frameworks_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/trainstep/trainstep/pkg/apis/trainstep/v1alpha1"
	"github.com/trainstep/trainstep/pkg/frameworks"
	"github.com/trainstep/trainstep/pkg/frameworks/paddle"
)

// ConfigMapNames, which the replica policy reads for any job (valid or
// not), names exactly the ConfigMaps the renderer makes, for every
// framework and shape.
func TestConfigMapNamesAreThoseOfConfigMaps(t *testing.T) {
	shapes := map[v1alpha1.Framework][]replicas{
		v1alpha1.FrameworkTensorFlow: {{v1alpha1.ReplicaTypeWorker: 1}, {v1alpha1.ReplicaTypeChief: 1, v1alpha1.ReplicaTypeWorker: 2, v1alpha1.ReplicaTypePS: 1}},
		v1alpha1.FrameworkPyTorch:    {{v1alpha1.ReplicaTypeMaster: 1, v1alpha1.ReplicaTypeWorker: 2}},
		v1alpha1.FrameworkMPI:        {{v1alpha1.ReplicaTypeLauncher: 1, v1alpha1.ReplicaTypeWorker: 2}},
		v1alpha1.FrameworkJAX:        {{v1alpha1.ReplicaTypeWorker: 2}},
		v1alpha1.FrameworkXGBoost:    {{v1alpha1.ReplicaTypeMaster: 1, v1alpha1.ReplicaTypeWorker: 1}},
		paddle.Name:                  {{v1alpha1.ReplicaTypeWorker: 2}},
	}
	for _, fw := range frameworks.Names() {
		if len(shapes[fw]) == 0 {
			t.Errorf("framework %s: no shape to test", fw)
		}
		for _, shape := range shapes[fw] {
			job := newJob(fw, "j", "ml", shape)
			cms, err := frameworks.ConfigMaps(job, frameworks.Placement{JobName: "j", Namespace: "ml"})
			if err != nil {
				t.Fatalf("%s %v: %v", fw, shape, err)
			}
			var rendered []string
			for _, cm := range cms {
				rendered = append(rendered, cm.Name)
			}
			if diff := cmp.Diff(rendered, frameworks.ConfigMapNames(job, "j"), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("%s %v: ConfigMapNames differ from the ConfigMaps' names (-rendered +named):\n%s", fw, shape, diff)
			}
		}
	}
}
