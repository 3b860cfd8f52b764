package trainer

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/trainstep/trainstep/pkg/trainerstatus"
)

// statusEndpoint serves trainstep's progress endpoint on 127.0.0.1 and
// returns the environment a replica gets, and the statuses applied.
func statusEndpoint(t *testing.T) (func(string) string, func() []*trainerstatus.Status) {
	t.Helper()
	m, err := trainerstatus.NewMaterial([]string{"127.0.0.1"}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var got []*trainerstatus.Status
	server := trainerstatus.New(trainerstatus.Options{Namespace: "ns", JobName: "demo", Material: m,
		OnStatus: func(s *trainerstatus.Status, _ []byte, _ trainerstatus.Source) {
			mu.Lock()
			defer mu.Unlock()
			got = append(got, s)
		}})
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if err := server.Serve(l); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = server.Shutdown(context.Background()) })
	dir := t.TempDir()
	for name, content := range map[string][]byte{"ca.crt": m.CACert, "token": m.Token} {
		if err := os.WriteFile(filepath.Join(dir, name), content, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	env := map[string]string{
		EnvStatusURL:    "https://" + l.Addr().String() + trainerstatus.Path("ns", "demo"),
		EnvStatusCACert: filepath.Join(dir, "ca.crt"),
		EnvStatusToken:  filepath.Join(dir, "token"),
	}
	return func(k string) string { return env[k] }, func() []*trainerstatus.Status {
		mu.Lock()
		defer mu.Unlock()
		return append([]*trainerstatus.Status(nil), got...)
	}
}

// A run reports its progress as it trains and 100% with the final loss
// at its end, to the endpoint trainstep serves.
func TestRunSingleReportsItsProgress(t *testing.T) {
	getenv, statuses := statusEndpoint(t)
	reporter, err := NewStatusReporter(getenv)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	log := NewLogger(&out)
	log.Status = reporter
	s := DefaultSettings()
	s.Steps, s.LogEvery, s.StepDelay = 30, 10, 20*time.Millisecond
	s.TerminationMessagePath = filepath.Join(t.TempDir(), "metrics")
	if err := RunSingle(context.Background(), s, log); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	got := statuses()
	if len(got) < 3 {
		t.Fatalf("%d statuses, want one per logged step and the final one:\n%s", len(got), out.String())
	}
	last := got[len(got)-1]
	if last.ProgressPercentage == nil || *last.ProgressPercentage != 100 {
		t.Errorf("last status %s, want 100%%", last.Summary())
	}
	if *got[0].ProgressPercentage >= 100 {
		t.Errorf("first status %s is already done", got[0].Summary())
	}
	metrics := last.MetricsMap()
	if fmt.Sprint(metrics["step"]) != strconv.Itoa(s.Steps) {
		t.Errorf("last status %s, want step %d", last.Summary(), s.Steps)
	}
	if _, ok := metrics["loss"]; !ok {
		t.Errorf("last status %s has no loss", last.Summary())
	}
}

func TestNoStatusEnvNoReporter(t *testing.T) {
	r, err := NewStatusReporter(func(string) string { return "" })
	if r != nil || err != nil {
		t.Fatalf("got %v, %v; want no reporter", r, err)
	}
	r.Step(1, 10, 0.5, NewLogger(&bytes.Buffer{})) // a nil reporter does nothing
}

// Under the names Kubeflow's current clients read (KUBEFLOW_TRAINER_SERVER_*)
// the reporter posts as they do, reading the token file again for every
// post: a token that rotates is picked up without a restart.
func TestReporterReadsTheServerNamesAndTheTokenFileAgain(t *testing.T) {
	getenv, statuses := statusEndpoint(t)
	token := getenv(EnvStatusToken)
	good, err := os.ReadFile(token)
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{EnvServerURL: getenv(EnvStatusURL), EnvServerCACert: getenv(EnvStatusCACert), EnvServerToken: token}
	if err := os.WriteFile(token, []byte("not-the-token"), 0o600); err != nil {
		t.Fatal(err)
	}
	reporter, err := NewStatusReporter(func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	log := NewLogger(&out)
	reporter.Final(5, 10, 0.5, log)
	if n := len(statuses()); n != 0 {
		t.Fatalf("%d statuses applied with a wrong token", n)
	}
	if err := os.WriteFile(token, good, 0o600); err != nil {
		t.Fatal(err)
	}
	reporter.Final(10, 10, 0.25, log)
	got := statuses()
	if len(got) != 1 || got[0].ProgressPercentage == nil || *got[0].ProgressPercentage != 100 {
		t.Fatalf("statuses %+v, want the one posted after the token file changed; log:\n%s", got, out.String())
	}
}
