package main

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// client-go logs through klog: API warnings, leader election, reflectors.
// Those lines reach stderr as trainstep's own JSON lines, so a parser of the
// step's log meets one format. An API server's Warning header is the klog
// line a test can ask for.
func TestKlogLinesAreTrainstepJSONLines(t *testing.T) {
	const warning = "trainstep-test: this API is going away"
	server := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Warning", `299 - "`+warning+`"`)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusForbidden)
		_, _ = io.WriteString(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"Forbidden","message":"forbidden","code":403}`)
	}))
	defer server.Close()
	dir := t.TempDir()
	files := map[string]string{"job.yaml": localJob("klog", "true"), "kubeconfig": kubeconfigFor(server.URL)}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command(trainstepBinary(t), "run", "-f", filepath.Join(dir, "job.yaml"), "--kubeconfig", filepath.Join(dir, "kubeconfig"),
		"--outputs-dir", filepath.Join(dir, "outputs"), "--log-format", "json")
	cmd.Env = append(os.Environ(), "HOME="+dir, "KUBECONFIG=", "KUBERNETES_SERVICE_HOST=", "POD_NAMESPACE=")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Run(); err == nil {
		t.Fatal("the run succeeded against an API server that forbids everything")
	}
	var found bool
	for _, line := range strings.Split(stderr.String(), "\n") {
		if !strings.Contains(line, warning) {
			continue
		}
		var entry struct {
			Level string `json:"level"`
			TS    string `json:"ts"`
			Msg   string `json:"msg"`
		}
		if err := json.Unmarshal([]byte(line), &entry); err != nil || entry.Level == "" || entry.TS == "" {
			t.Errorf("the API warning came out as %q, not a trainstep JSON line (%v)", line, err)
			continue
		}
		if entry.Msg != "Warning: "+warning {
			t.Errorf("msg = %q, want %q", entry.Msg, "Warning: "+warning)
		}
		found = true
	}
	if !found {
		t.Errorf("no JSON line carries the API server's warning; stderr:\n%s", stderr.String())
	}
}
