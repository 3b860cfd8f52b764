package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// One metrics contract: the variable a local replica writes its metrics to
// is in the rendered pod too, naming the file the kubelet reads.
func TestTerminationMessagePathIsSetOnBothBackends(t *testing.T) {
	got := runCLI(t, "", map[string]string{"tf.yaml": tfJob}, "render", "-f", "@tf.yaml")
	if got.code != 0 {
		t.Fatalf("render: exit %d (stderr %q)", got.code, got.stderr)
	}
	if n := strings.Count(got.stdout, "name: TRAINSTEP_TERMINATION_MESSAGE_PATH\n          value: /dev/termination-log"); n != 3 {
		t.Errorf("TRAINSTEP_TERMINATION_MESSAGE_PATH=/dev/termination-log on %d pods, want all 3:\n%s", n, got.stdout)
	}

	outputs := t.TempDir()
	script := `printf '{"accuracy": 0.9}' > "$TRAINSTEP_TERMINATION_MESSAGE_PATH"`
	got = runCLI(t, "", map[string]string{"job.yaml": localJob("metrics", script)}, "run", "--local", "-f", "@job.yaml", "--outputs-dir", outputs)
	if got.code != 0 {
		t.Fatalf("run --local: exit %d (stderr %q)", got.code, got.stderr)
	}
	if metrics, _ := os.ReadFile(filepath.Join(outputs, "metrics.json")); !strings.Contains(string(metrics), `"accuracy":0.9`) {
		t.Errorf("metrics.json = %s, want the replica's termination message", metrics)
	}
}

// Past 4 KiB only the last 4096 bytes of a termination message are kept,
// locally as by the kubelet: a longer JSON is cut and gives no metrics.
func TestTerminationMessageKeepsItsLast4KiB(t *testing.T) {
	outputs := t.TempDir()
	script := `{ printf '{"pad": "'; head -c 5000 /dev/zero | tr '\0' x; printf '", "loss": 0.1}'; } > "$TRAINSTEP_TERMINATION_MESSAGE_PATH"`
	got := runCLI(t, "", map[string]string{"job.yaml": localJob("long", script)}, "run", "--local", "-f", "@job.yaml", "--outputs-dir", outputs)
	if got.code != 0 {
		t.Fatalf("run --local: exit %d (stderr %q)", got.code, got.stderr)
	}
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
