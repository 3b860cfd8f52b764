package main

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// render prints what trainstep would create, without the fields only an
// object's Go type has: a null creationTimestamp, an empty status.
func TestRenderPrintsNoUnsetFields(t *testing.T) {
	for _, format := range []string{"yaml", "json"} {
		got := runCLI(t, "", map[string]string{"tfjob.yaml": kubeflowTFJob}, "render", "-f", "@tfjob.yaml", "-o", format)
		if got.code != 0 {
			t.Fatalf("%s: exit %d (stderr %q)", format, got.code, got.stderr)
		}
		for _, unset := range []string{"creationTimestamp", "status", "loadBalancer"} {
			if strings.Contains(got.stdout, unset) {
				t.Errorf("-o %s prints %s:\n%s", format, unset, got.stdout)
			}
		}
		if !strings.Contains(got.stdout, "dist-mnist-worker-1") {
			t.Errorf("-o %s lacks the objects:\n%s", format, got.stdout)
		}
	}
}

// Whoever reads a run's output may go away (`trainstep run ... | head`):
// the run carries on to its end, cleans up and writes its outputs.
func TestRunSurvivesItsReaderGoingAway(t *testing.T) {
	dir := t.TempDir()
	job := filepath.Join(dir, "job.yaml")
	if err := os.WriteFile(job, []byte(localJob("piped", "for i in 1 2 3 4 5 6 7 8 9 10; do echo line $i; sleep 0.1; done")), 0o644); err != nil {
		t.Fatal(err)
	}
	outputs := filepath.Join(dir, "outputs")
	cmd := exec.Command(trainstepBinary(t), "run", "--local", "-f", job, "--outputs-dir", outputs, "--logs", "all")
	reader, writer, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = writer, writer
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	writer.Close()
	// Read one line, as `head -1` would, and go away.
	if _, err := bufio.NewReader(reader).ReadString('\n'); err != nil {
		t.Fatal(err)
	}
	reader.Close()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("the run ended with %v after its reader went away, want exit 0", err)
		}
	case <-time.After(time.Minute):
		_ = cmd.Process.Kill()
		t.Fatal("the run did not end")
	}
	if phase, err := os.ReadFile(filepath.Join(outputs, "phase")); err != nil || string(phase) != "Succeeded" {
		t.Errorf("phase output %q (%v), want Succeeded", phase, err)
	}
}

// A bad --outputs-dir is one clear line, no stack trace; a run says where
// it wrote its outputs.
func TestOutputsDirIsNamed(t *testing.T) {
	dir := t.TempDir()
	job := filepath.Join(dir, "job.yaml")
	if err := os.WriteFile(job, []byte(localJob("outs", "true")), 0o644); err != nil {
		t.Fatal(err)
	}
	bad, err := exec.Command(trainstepBinary(t), "run", "--local", "-f", job, "--outputs-dir", "/dev/null/outputs").CombinedOutput()
	if code := exitCode(err); code != 11 || strings.Contains(string(bad), "stacktrace") ||
		!strings.Contains(string(bad), "Error: --outputs-dir /dev/null/outputs: creating the outputs directory") {
		t.Errorf("a bad --outputs-dir: exit %d, want 11 and one line without a stack trace:\n%s", code, bad)
	}
	outputs := filepath.Join(dir, "outputs")
	good, err := exec.Command(trainstepBinary(t), "run", "--local", "-f", job, "--outputs-dir", outputs, "--log-format", "console").CombinedOutput()
	if err != nil || !strings.Contains(string(good), "output files written") || !strings.Contains(string(good), outputs) {
		t.Errorf("run (%v) does not say where the outputs went:\n%s", err, good)
	}
}

func exitCode(err error) int {
	if err == nil {
		return 0
	}
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode()
	}
	return -1
}

// A --set path of another kind's replica map names the manifest's own.
func TestSetOnAnotherKindsReplicaMapNamesTheRightOne(t *testing.T) {
	files := map[string]string{"tfjob.yaml": kubeflowTFJob, "tf.yaml": tfJob}
	for file, c := range map[string]struct{ set, want string }{
		"tfjob.yaml": {"spec.replicaSpecs.Worker.replicas=4", "spec.replicaSpecs: unknown field; a TFJob's replicas are under spec.tfReplicaSpecs"},
		"tf.yaml":    {"spec.tfReplicaSpecs.Worker.replicas=4", "spec.tfReplicaSpecs: unknown field; a TrainJob's replicas are under spec.replicaSpecs"},
	} {
		got := runCLI(t, "", files, "validate", "-f", "@"+file, "--set", c.set)
		if got.code != 11 || !strings.Contains(got.stderr, c.want) {
			t.Errorf("%s --set %s: exit %d, stderr %q; want 11 and %q", file, c.set, got.code, got.stderr, c.want)
		}
	}
}
