package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/trainstep/trainstep/hack/image/gobuild"
	"github.com/trainstep/trainstep/pkg/apistats"
)

// outputsPollInterval is how often the bench looks for trainstep's outputs:
// short against the 200 ms detection target, cheap for the CPU.
const outputsPollInterval = 2 * time.Millisecond

// BuildTrainstep compiles cmd/trainstep of the module at repoRoot into dir
// exactly as `make image` ships it (static, trimmed paths, stripped, version
// stamped), for this machine's architecture, and returns the binary's path.
func BuildTrainstep(ctx context.Context, repoRoot, dir, version string) (string, error) {
	binary := filepath.Join(dir, "trainstep")
	if err := gobuild.Build(ctx, repoRoot, runtime.GOARCH, gobuild.TrainstepPackage, binary, version); err != nil {
		return "", fmt.Errorf("building trainstep as the image does: %w", err)
	}
	return binary, nil
}

// TeardownGrace is the --termination-grace of the SIGTERM teardown runs: the
// default 25 s is less than this cluster needs for a 2048-worker job's 4096
// deletes (docs/argo.md tells users of such jobs to give a longer grace), and a
// teardown cut short would leave objects the measurement waits for.
const TeardownGrace = 3 * time.Minute

// RunOptions are one `trainstep run` invocation's inputs.
type RunOptions struct {
	Binary, Kubeconfig, Namespace string
	// JobFile is the TrainJob manifest.
	JobFile string
	// QPS and Burst are passed as --kube-api-qps/--kube-api-burst when QPS is not zero.
	QPS   float32
	Burst int
	// Dir receives the outputs directory and the API request counts.
	Dir string
	// ExtraArgs are appended to the command line.
	ExtraArgs []string
	// Env is added to the process's environment ("GODEBUG=gctrace=1").
	Env []string
	// MemorySample is how often the resident set is read (default
	// memorySampleInterval); many processes at once are read less often.
	MemorySample time.Duration
}

// Process is a running `trainstep run`.
type Process struct {
	// Started is taken just before the process is started, Exited as soon
	// as its exit is reaped (valid once Wait returned).
	Started, Exited time.Time
	OutputsDir      string
	StatsFile       string

	cmd            *exec.Cmd
	stdout, stderr lockedBuffer
	done           chan struct{}
	memory         chan residentPeaks // the sampler's result, once done is closed
}

// Exit is how a trainstep process ended.
type Exit struct {
	Code int
	// PeakRSS is the process's maximum resident set size, in bytes: the
	// kernel's high-water mark (VmHWM) as last read while sampling. Not
	// getrusage's ru_maxrss: a child started with vfork shares its parent's
	// memory until exec, and ru_maxrss keeps that high-water mark, so it
	// reports the benchmark's own size whenever that is larger.
	PeakRSS int64
	// PeakAnon and PeakFile are the largest anonymous (heap, stacks) and
	// file-backed (the binary's pages) parts of the resident set seen while
	// sampling /proc every memorySampleInterval, in bytes.
	PeakAnon, PeakFile int64
	// CPU is user plus system time.
	CPU    time.Duration
	Stdout string
	Stderr string
}

// StartTrainstep starts `trainstep run` as users run it (log streaming of
// the leaders included) with the bench's fixed flags: JSON logs, API
// request counting.
func StartTrainstep(o RunOptions) (*Process, error) {
	p := &Process{
		OutputsDir: filepath.Join(o.Dir, "outputs"),
		StatsFile:  filepath.Join(o.Dir, "api-requests.json"),
		done:       make(chan struct{}),
		memory:     make(chan residentPeaks, 1),
	}
	args := []string{"run", "-f", o.JobFile, "--kubeconfig", o.Kubeconfig, "-n", o.Namespace,
		"--outputs-dir", p.OutputsDir, "--api-stats-file", p.StatsFile, "--log-format", "json"}
	if o.QPS != 0 {
		args = append(args, "--kube-api-qps", strconv.FormatFloat(float64(o.QPS), 'f', -1, 32),
			"--kube-api-burst", strconv.Itoa(o.Burst))
	}
	args = append(args, o.ExtraArgs...)
	p.cmd = exec.Command(o.Binary, args...)
	p.cmd.Stdout, p.cmd.Stderr = &p.stdout, &p.stderr
	p.cmd.Env = append(append(os.Environ(), "KUBECONFIG="), o.Env...)
	p.Started = time.Now()
	if err := p.cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting trainstep: %w", err)
	}
	go func() {
		_ = p.cmd.Wait()
		p.Exited = time.Now()
		close(p.done)
	}()
	every := o.MemorySample
	if every <= 0 {
		every = memorySampleInterval
	}
	go func() { p.memory <- sampleResident(p.cmd.Process.Pid, every, p.done) }()
	return p, nil
}

// WhileRunning is ctx, also cancelled when the process exits: a wait for the
// cluster to reach a state ends as soon as trainstep gave up, instead of at
// its timeout.
func (p *Process) WhileRunning(ctx context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancelCause(ctx)
	go func() {
		select {
		case <-p.done:
			cancel(errors.New("trainstep exited"))
		case <-ctx.Done():
		}
	}()
	return ctx, func() { cancel(nil) }
}

// Signal sends sig to the process.
func (p *Process) Signal(sig os.Signal) error { return p.cmd.Process.Signal(sig) }

// Kill ends the process at once (for cleaning up after a failed measurement).
func (p *Process) Kill() {
	_ = p.cmd.Process.Kill()
	<-p.done
}

// Wait waits for the process to exit, killing it when ctx ends first.
func (p *Process) Wait(ctx context.Context) (Exit, error) {
	select {
	case <-p.done:
	case <-ctx.Done():
		p.Kill()
		return p.exit(), fmt.Errorf("trainstep did not exit: %w; stderr:\n%s", ctx.Err(), tail(p.stderr.String(), 4000))
	}
	return p.exit(), nil
}

func (p *Process) exit() Exit {
	state := p.cmd.ProcessState
	e := Exit{Code: state.ExitCode(), CPU: state.UserTime() + state.SystemTime(),
		Stdout: p.stdout.String(), Stderr: p.stderr.String()}
	peaks := <-p.memory
	p.memory <- peaks // exit may be called again
	e.PeakRSS, e.PeakAnon, e.PeakFile = peaks.hwm, peaks.anon, peaks.file
	return e
}

// OutputsWrittenAt polls for the outputs' phase file and returns when it was
// first seen. trainstep writes every output through a rename, so the file's
// presence means its content is complete.
func (p *Process) OutputsWrittenAt(ctx context.Context) (time.Time, error) {
	path := filepath.Join(p.OutputsDir, "phase")
	ticker := time.NewTicker(outputsPollInterval)
	defer ticker.Stop()
	for {
		if _, err := os.Stat(path); err == nil {
			return time.Now(), nil
		}
		select {
		case <-ticker.C:
		case <-p.done:
			if _, err := os.Stat(path); err == nil {
				return time.Now(), nil
			}
			return time.Time{}, errors.New("trainstep exited without writing its outputs")
		case <-ctx.Done():
			return time.Time{}, fmt.Errorf("waiting for trainstep's outputs: %w", ctx.Err())
		}
	}
}

// LastCreate finds, in the table of a `trainstep run --timeline` file, when
// its last create was accepted, counted from the process's start.
// trainstep writes the file just after that create, so it is there by the
// time a watcher has seen every object.
func LastCreate(table string) (time.Duration, error) {
	for _, line := range strings.Split(table, "\n") {
		fields := strings.Fields(line)
		if len(fields) > 3 && fields[2] == "last" && fields[3] == "create" {
			millis, err := strconv.ParseFloat(strings.TrimSuffix(fields[0], "ms"), 64)
			if err != nil {
				return 0, fmt.Errorf("trainstep's timeline: %q has no time", line)
			}
			return time.Duration(millis * float64(time.Millisecond)), nil
		}
	}
	return 0, fmt.Errorf("trainstep's timeline has no \"last create\" line:\n%s", table)
}

// APIRequests reads the run's request counts (written when trainstep exits).
func (p *Process) APIRequests() (map[string]int, error) {
	requests, _, err := p.APIStats()
	return requests, err
}

// APIStats reads the run's request counts and, apart, the requests the API
// server turned away with 429, by "verb resource" (each then sent again, and
// counted again among the requests).
func (p *Process) APIStats() (requests, throttled map[string]int, err error) {
	data, err := os.ReadFile(p.StatsFile)
	if err != nil {
		return nil, nil, fmt.Errorf("reading API request counts: %w", err)
	}
	counts := map[string]int{}
	if err := json.Unmarshal(data, &counts); err != nil {
		return nil, nil, fmt.Errorf("decoding API request counts %s: %w", p.StatsFile, err)
	}
	requests, throttled = map[string]int{}, map[string]int{}
	for key, n := range counts {
		if kind, ok := strings.CutPrefix(key, apistats.ThrottledPrefix); ok {
			throttled[kind] += n
			continue
		}
		requests[key] = n
	}
	return requests, throttled, nil
}

// lockedBuffer is a bytes.Buffer safe for the process's concurrent writers.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "…" + s[len(s)-n:]
}

// CPUSoFar is the CPU time the running process has used until now.
func (p *Process) CPUSoFar() (time.Duration, error) { return processCPU(p.cmd.Process.Pid) }

// LaunchStages are the stages of a step's start that its --timeline marks,
// in order: what a step does before its first replica exists.
var LaunchStages = []string{"job loaded", "preflight done", "rendered", "lease acquired", "informers synced", "first create", "last create"}

// TimelinePeakRSS is the peak resident memory a `trainstep run --timeline`
// table gives on its last line (the process's high-water mark then), in
// bytes; 0 when it gives none.
func TimelinePeakRSS(table string) int64 {
	lines := strings.Split(strings.TrimSpace(table), "\n")
	fields := strings.Fields(lines[len(lines)-1])
	if len(fields) == 0 {
		return 0
	}
	mib, err := strconv.ParseFloat(strings.TrimSuffix(fields[len(fields)-1], "MiB"), 64)
	if err != nil || !strings.HasSuffix(fields[len(fields)-1], "MiB") {
		return 0
	}
	return int64(mib * (1 << 20))
}

// StageTimes reads, from a `trainstep run --timeline` table, when each of
// stages was first reached, counted from the process's start; a stage not
// in the table is left out.
func StageTimes(table string, stages ...string) map[string]time.Duration {
	out := map[string]time.Duration{}
	for _, line := range strings.Split(table, "\n") {
		fields := strings.Fields(line)
		if len(fields) < 3 {
			continue
		}
		rest := " " + strings.Join(fields[2:], " ") + " "
		for _, stage := range stages {
			if _, seen := out[stage]; seen || !strings.HasPrefix(rest, " "+stage+" ") {
				continue
			}
			millis, err := strconv.ParseFloat(strings.TrimSuffix(fields[0], "ms"), 64)
			if err == nil {
				out[stage] = time.Duration(millis * float64(time.Millisecond))
			}
		}
	}
	return out
}
