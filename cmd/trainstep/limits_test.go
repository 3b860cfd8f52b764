package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A 50 MB manifest would take about 600 MB to parse, most of the step's
// memory: it is refused at once, with its size, from a file as from stdin,
// by validate and by run (whose outputs still say Invalid).
func TestManifestOverTheLimitIsRefusedFast(t *testing.T) {
	big := tfJob + "# " + strings.Repeat("x", 50<<20) + "\n"
	dir := t.TempDir()
	path := filepath.Join(dir, "big.yaml")
	if err := os.WriteFile(path, []byte(big), 0o600); err != nil {
		t.Fatal(err)
	}
	outputs := filepath.Join(dir, "outputs")
	size := fmt.Sprintf("the manifest is %d bytes (50.0 MiB)", len(big))
	cases := []struct {
		name, stdin, want string
		args              []string
	}{
		{"validate a file", "", size + ", over the limit of 4194304 bytes (4 MiB)", []string{"validate", path}},
		{"validate stdin", big, "the manifest is larger than the limit of 4194304 bytes", []string{"validate", "-"}},
		{"run a file", "", size, []string{"run", "-f", path, "--outputs-dir", outputs, "--kubeconfig", path}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Now()
			got := runCLI(t, tc.stdin, nil, tc.args...)
			took := time.Since(start)
			if got.code != 11 || !strings.Contains(got.stderr, tc.want) {
				t.Fatalf("exit %d, stderr %q; want 11 and %q", got.code, got.stderr, tc.want)
			}
			// Generous for a loaded machine; parsing it took seconds.
			if took > 500*time.Millisecond {
				t.Errorf("refusing took %s", took)
			}
		})
	}
	if phase, err := os.ReadFile(filepath.Join(outputs, "phase")); err != nil || string(phase) != "Invalid" {
		t.Errorf("run's outputs phase %q (%v), want Invalid", phase, err)
	}
}

// A manifest just under the limit is still read.
func TestManifestUnderTheLimitIsRead(t *testing.T) {
	padding := 4<<20 - len(tfJob) - 3
	job := tfJob + "# " + strings.Repeat("x", padding) + "\n"
	got := runCLI(t, "", map[string]string{"job.yaml": job}, "validate", "@job.yaml")
	if got.code != 0 {
		t.Fatalf("a manifest of %d bytes: exit %d, stderr %q", len(job), got.code, got.stderr)
	}
}
