package local

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/trainstep/trainstep/pkg/result"
)

// A command that exists but cannot be executed is reported as such, not as
// missing: by path, found on PATH, or a directory.
func TestCommandThatIsNotExecutableIsNamedSo(t *testing.T) {
	dir := t.TempDir()
	script := filepath.Join(dir, "train.sh")
	if err := os.WriteFile(script, []byte("#!/bin/sh\necho hi\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", dir+string(os.PathListSeparator)+os.Getenv("PATH"))
	cases := []struct{ command, want string }{
		{script, `"` + script + `": exists but is not executable: chmod +x ` + script},
		{"train.sh", `"train.sh": found as ` + script + `, which is not executable`},
		{dir, `"` + dir + `": is a directory, not a command`},
		{"no-such-command-here", `"no-such-command-here": not found on this machine`},
	}
	for _, tc := range cases {
		t.Run(tc.command, func(t *testing.T) {
			manifest := strings.Replace(shellJob("noexec", "", shellReplicas{"Worker", 1, "Never", "true", ""}), "[sh,", "["+tc.command+",", 1)
			r := runJob(t, t.Context(), loadJob(t, manifest), nil)
			if result.PhaseOf(r.err) != result.PhaseInvalid {
				t.Fatalf("error = %v, want Invalid", r.err)
			}
			if !strings.Contains(r.err.Error(), tc.want) {
				t.Errorf("error %q does not say %q", r.err, tc.want)
			}
		})
	}
}
