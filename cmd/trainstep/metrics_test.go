package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// runLocalBinary runs `trainstep run --local` of a one-worker job whose
// worker runs script, with the built binary (a local run starts its
// replicas through trainstep's own executable), and returns its outputs
// directory.
func runLocalBinary(t *testing.T, name, script string) string {
	t.Helper()
	dir := t.TempDir()
	job := filepath.Join(dir, "job.yaml")
	if err := os.WriteFile(job, []byte(localJob(name, script)), 0o644); err != nil {
		t.Fatal(err)
	}
	outputs := filepath.Join(dir, "outputs")
	out, err := exec.Command(trainstepBinary(t), "run", "--local", "-f", job, "--outputs-dir", outputs).CombinedOutput()
	if err != nil {
		t.Fatalf("run --local: %v\n%s", err, out)
	}
	return outputs
}

// One metrics contract: the variable a local replica writes its metrics to
// is in the rendered pod too, naming the file the kubelet reads.
func TestTerminationMessagePathIsSetOnBothBackends(t *testing.T) {
	got := runCLI(t, "", map[string]string{"tf.yaml": tfJob}, "render", "-f", "@tf.yaml")
	if got.code != 0 {
		t.Fatalf("render: exit %d (stderr %q)", got.code, got.stderr)
	}
	named, valued := strings.Count(got.stdout, "- name: TRAINSTEP_TERMINATION_MESSAGE_PATH\n"), strings.Count(got.stdout, "value: /dev/termination-log\n")
	if named != 3 || valued != 3 {
		t.Errorf("TRAINSTEP_TERMINATION_MESSAGE_PATH on %d pods, /dev/termination-log %d times; want all 3 pods:\n%s", named, valued, got.stdout)
	}

	outputs := runLocalBinary(t, "metrics", `printf '{"accuracy": 0.9}' > "$TRAINSTEP_TERMINATION_MESSAGE_PATH"`)
	if metrics, _ := os.ReadFile(filepath.Join(outputs, "metrics.json")); !strings.Contains(string(metrics), `"accuracy":0.9`) {
		t.Errorf("metrics.json = %s, want the replica's termination message", metrics)
	}
}

// Past 4 KiB only the last 4096 bytes of a termination message are kept,
// locally as by the kubelet: a longer JSON is cut and gives no metrics.
func TestTerminationMessageKeepsItsLast4KiB(t *testing.T) {
	outputs := runLocalBinary(t, "long", `{ printf '{"pad": "'; head -c 5000 /dev/zero | tr '\0' x; printf '", "loss": 0.1}'; } > "$TRAINSTEP_TERMINATION_MESSAGE_PATH"`)
	message, err := os.ReadFile(filepath.Join(outputs, "termination-message"))
	if err != nil {
		t.Fatal(err)
	}
	if len(message) != 4096 || !strings.HasSuffix(string(message), `x", "loss": 0.1}`) {
		t.Errorf("termination-message holds %d bytes ending %q, want the last 4096", len(message), message[max(0, len(message)-20):])
	}
	if metrics, _ := os.ReadFile(filepath.Join(outputs, "metrics.json")); string(metrics) != "{}" {
		t.Errorf("metrics.json = %s, want {} for a cut message", metrics)
	}
}
