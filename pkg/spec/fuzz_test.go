package spec

import (
	"os"
	"path/filepath"
	"testing"
)

// FuzzLoad checks that no manifest or --set makes Load panic, and that a
// job Load accepts is already defaulted: defaulting it again changes nothing
// that validation would reject.
func FuzzLoad(f *testing.F) {
	f.Add([]byte(psJob), "spec.replicaSpecs.Worker.replicas=3")
	files, _ := filepath.Glob(filepath.Join("..", "frameworks", "testdata", "*.yaml"))
	for _, name := range files {
		data, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data, "metadata.name=fuzz")
	}
	f.Fuzz(func(t *testing.T, data []byte, set string) {
		job, _, err := Load(data, Options{Sets: []string{set}, Args: []string{"worker:--x"}, Envs: []string{"A=1"}})
		if err != nil {
			return
		}
		if job.Name == "" || job.Spec.RunPolicy.CleanPodPolicy == nil || job.Spec.RunPolicy.SchedulingPolicy == nil {
			t.Fatalf("accepted job is not defaulted: %+v", job)
		}
	})
}
