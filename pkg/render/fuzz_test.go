package render_test

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/trainstep/trainstep/pkg/apis/trainstep/v1alpha1"
	"github.com/trainstep/trainstep/pkg/frameworks"
	"github.com/trainstep/trainstep/pkg/render"
	"github.com/trainstep/trainstep/pkg/replicapolicy"
	"github.com/trainstep/trainstep/pkg/result"
	"github.com/trainstep/trainstep/pkg/spec"
)

// openPolicy allows every list's names, so that the fuzzer's inputs reach
// the renderer whatever they mount or name; the policy's own refusals are
// its package's tests.
var openPolicy = replicapolicy.Policy{
	AllowPrivileged: true, Secrets: []string{"*"}, ConfigMaps: []string{"*"}, PVCs: []string{"*"}, CSIDrivers: []string{"*"},
	VolumeTypes: []string{"*"}, PriorityClasses: []string{"*"}, RuntimeClasses: []string{"*"}, Schedulers: []string{"*"},
}

// maxFuzzReplicas bounds the work one input may ask for: a valid job of a
// billion replicas is legal but would only exhaust memory.
const maxFuzzReplicas = 256

// FuzzRenderPipeline runs parse → default → validate → render on arbitrary
// bytes. Loading may reject the input (always as Invalid); a job it accepts
// must render, deterministically, into objects whose names are DNS labels.
func FuzzRenderPipeline(f *testing.F) {
	for _, pattern := range []string{"testdata/*.yaml", "../frameworks/testdata/*.yaml"} {
		paths, _ := filepath.Glob(pattern)
		for _, path := range paths {
			data, err := os.ReadFile(path)
			if err != nil {
				f.Fatal(err)
			}
			f.Add(data)
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		job, _, err := spec.Load(data, spec.Options{Policy: openPolicy})
		if err != nil {
			if phase := result.PhaseOf(err); phase != result.PhaseInvalid {
				t.Fatalf("Load failed with phase %s, want Invalid: %v", phase, err)
			}
			return
		}
		if frameworks.TotalReplicas(job) > maxFuzzReplicas {
			t.Skip("too many replicas to render in a fuzz run")
		}
		ns := job.Namespace
		if ns == "" {
			ns = "default"
		}
		id := render.Identity{Namespace: ns, JobName: job.Name}
		first := renderForFuzz(t, job, id)
		if r, err := render.NewRenderer(job, id); err == nil {
			_ = replicapolicy.CheckRendered(r, nil, openPolicy) // must not panic
		}
		if again := renderForFuzz(t, job, id); !bytes.Equal(first, again) {
			t.Fatal("two renders of the same job differ")
		}
	})
}

func renderForFuzz(t *testing.T, job *v1alpha1.TrainJob, id render.Identity) []byte {
	t.Helper()
	objs, err := render.Render(job, id, testKeys)
	if err != nil {
		t.Fatalf("a job that passed validation does not render: %v", err)
	}
	for _, pod := range objs.Pods {
		for _, msg := range validation.IsDNS1035Label(pod.Name) {
			t.Fatalf("pod name %q: %s", pod.Name, msg)
		}
	}
	for _, svc := range objs.Services {
		for _, msg := range validation.IsDNS1035Label(svc.Name) {
			t.Fatalf("service name %q: %s", svc.Name, msg)
		}
	}
	data, err := json.Marshal(objs.List())
	if err != nil {
		t.Fatalf("encoding the objects: %v", err)
	}
	return data
}

// The seed manifests are valid jobs, so the fuzzer starts from inputs that
// reach the renderer.
func TestSeedManifestsRender(t *testing.T) {
	paths, _ := filepath.Glob("testdata/*.yaml")
	if len(paths) == 0 {
		t.Fatal("no seed manifests in testdata")
	}
	for _, path := range paths {
		t.Run(filepath.Base(path), func(t *testing.T) {
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			job, warnings, err := spec.Load(data, spec.Options{Policy: openPolicy})
			if err != nil {
				t.Fatalf("Load: %v", err)
			}
			if len(warnings) > 0 {
				t.Errorf("warnings: %v", warnings)
			}
			renderForFuzz(t, job, render.Identity{Namespace: "default", JobName: job.Name})
		})
	}
}
