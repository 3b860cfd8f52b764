package main

import (
	"runtime/debug"
	"strings"
	"testing"
)

func TestGoMemoryLimit(t *testing.T) {
	cases := []struct {
		name      string
		env       map[string]string
		wantLimit int64
		wantOK    bool
		wantErr   string
	}{
		{name: "90% of the container's limit", env: map[string]string{"TRAINSTEP_MEMORY_LIMIT": "1073741824"}, wantLimit: 966367641, wantOK: true},
		{name: "no limit given", env: map[string]string{}},
		{name: "GOMEMLIMIT wins", env: map[string]string{"TRAINSTEP_MEMORY_LIMIT": "1073741824", "GOMEMLIMIT": "500MiB"}},
		{name: "not a number", env: map[string]string{"TRAINSTEP_MEMORY_LIMIT": "1Gi"}, wantErr: `$TRAINSTEP_MEMORY_LIMIT: "1Gi" is not a positive number of bytes`},
		{name: "zero", env: map[string]string{"TRAINSTEP_MEMORY_LIMIT": "0"}, wantErr: "TRAINSTEP_MEMORY_LIMIT"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			limit, ok, err := goMemoryLimit(func(k string) string { return tc.env[k] })
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error = %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || ok != tc.wantOK || limit != tc.wantLimit {
				t.Errorf("goMemoryLimit = %d, %v, %v; want %d, %v, nil", limit, ok, err, tc.wantLimit, tc.wantOK)
			}
		})
	}
}

// trainstep run gives the Go runtime 90% of the limit the template passes
// in TRAINSTEP_MEMORY_LIMIT, before it reads the job; a value that is not
// bytes is an Invalid error naming the variable.
func TestRunSetsTheGoMemoryLimit(t *testing.T) {
	previous := debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetMemoryLimit(previous) })
	t.Setenv("GOMEMLIMIT", "")

	t.Setenv("TRAINSTEP_MEMORY_LIMIT", "2147483648")
	got := runCLI(t, "", nil, "run", "-f", "@missing.yaml", "--outputs-dir", t.TempDir())
	if got.code != 11 {
		t.Fatalf("exit code = %d, want 11 for the missing file (stderr %q)", got.code, got.stderr)
	}
	if limit := debug.SetMemoryLimit(-1); limit != 1932735283 {
		t.Errorf("Go memory limit = %d, want 1932735283 (90%% of 2 GiB)", limit)
	}

	t.Setenv("TRAINSTEP_MEMORY_LIMIT", "lots")
	got = runCLI(t, "", nil, "run", "-f", "@missing.yaml", "--outputs-dir", t.TempDir())
	if got.code != 11 || !strings.Contains(got.stderr, "TRAINSTEP_MEMORY_LIMIT") {
		t.Errorf("exit %d, stderr %q; want 11 naming TRAINSTEP_MEMORY_LIMIT", got.code, got.stderr)
	}
}
