package trainer

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"sync"
	"time"
)

// Settings are the knobs of a training run. Every replica of a job should
// get the same Features, Samples and Seed so they build the same dataset.
type Settings struct {
	Steps      int           `json:"steps"`      // stop after this many (global) steps
	LR         float64       `json:"lr"`         // learning rate of plain gradient descent
	Features   int           `json:"features"`   // columns of the synthetic dataset
	Samples    int           `json:"samples"`    // rows of the synthetic dataset
	Seed       uint64        `json:"seed"`       // seed of the synthetic dataset
	TargetLoss float64       `json:"targetLoss"` // stop early once the loss is at or below this (0: never)
	StepDelay  time.Duration `json:"-"`          // sleep after each step so a demo is visible
	LogEvery   int           `json:"-"`          // log one step line every LogEvery steps

	// ConnectTimeout bounds how long a replica keeps retrying to reach a
	// peer (a parameter server, the rendezvous master, a ring neighbour)
	// before it gives up; peers may start later or restart.
	ConnectTimeout time.Duration `json:"-"`
	// PSLinger is how long a parameter server stays up after training is
	// over for workers it has not told yet.
	PSLinger time.Duration `json:"-"`
	// TerminationMessagePath is where the deciding replica writes the
	// metrics JSON.
	TerminationMessagePath string `json:"-"`
	// CheckpointDir, when set, is where rank 0 of an all-reduce job keeps
	// a checkpoint every CheckpointEvery steps, and where a restarted job
	// resumes from: rank 0 reads it and every rank starts from its step
	// and weights.
	CheckpointDir   string `json:"-"`
	CheckpointEvery int    `json:"-"`
}

// DefaultSettings converge to well under 1% of the initial loss in under a
// second of computation.
func DefaultSettings() Settings {
	return Settings{
		Steps:                  200,
		LR:                     0.05,
		Features:               12,
		Samples:                4000,
		Seed:                   1,
		LogEvery:               10,
		ConnectTimeout:         2 * time.Minute,
		PSLinger:               30 * time.Second,
		CheckpointEvery:        10,
		TerminationMessagePath: "/dev/termination-log",
	}
}

// Validate reports the first setting that cannot work, naming its flag.
func (s Settings) Validate() error {
	switch {
	case s.Steps < 1:
		return fmt.Errorf("--steps must be at least 1, got %d", s.Steps)
	case !(s.LR > 0) || math.IsInf(s.LR, 0):
		return fmt.Errorf("--lr must be a positive number, got %v", s.LR)
	case s.Features < 1:
		return fmt.Errorf("--features must be at least 1, got %d", s.Features)
	case s.Samples < 1:
		return fmt.Errorf("--samples must be at least 1, got %d", s.Samples)
	case s.TargetLoss < 0:
		return fmt.Errorf("--target-loss must not be negative, got %v", s.TargetLoss)
	case s.StepDelay < 0:
		return fmt.Errorf("--step-delay must not be negative, got %v", s.StepDelay)
	case s.LogEvery < 1:
		return fmt.Errorf("--log-every must be at least 1, got %d", s.LogEvery)
	case s.ConnectTimeout <= 0:
		return fmt.Errorf("--connect-timeout must be positive, got %v", s.ConnectTimeout)
	case s.CheckpointEvery < 1:
		return fmt.Errorf("--checkpoint-every must be at least 1, got %d", s.CheckpointEvery)
	}
	return nil
}

func (s Settings) reachedTarget(loss float64) bool {
	return s.TargetLoss > 0 && loss <= s.TargetLoss
}

// Metrics is the JSON the deciding replica writes as its termination
// message; trainstep surfaces it as the job's metrics.
type Metrics struct {
	Loss    float64   `json:"loss"`
	Steps   int       `json:"steps"`
	Weights []float64 `json:"weights"`
}

// writeMetrics writes m to path. A path that cannot be written (no
// /dev/termination-log outside a container) is reported, not fatal: the
// training itself succeeded.
func writeMetrics(log *Logger, path string, m Metrics) {
	body, err := json.Marshal(m)
	if err != nil {
		log.Printf("encoding metrics: %v", err)
		return
	}
	if err := os.WriteFile(path, body, 0o644); err != nil {
		log.Printf("warning: writing metrics to %s: %v", path, err)
		return
	}
	log.Printf("metrics %s", body)
}

// Logger writes whole lines to the trainer's output; it is safe for
// concurrent use.
type Logger struct {
	mu  sync.Mutex
	out io.Writer
	// Status, when set, receives the deciding replica's progress.
	Status *StatusReporter
}

// NewLogger logs to out.
func NewLogger(out io.Writer) *Logger { return &Logger{out: out} }

// Printf writes one line.
func (l *Logger) Printf(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	fmt.Fprintf(l.out, format+"\n", args...)
}

// step logs the line a user watches: "step 10 loss 0.0123".
func (l *Logger) step(step int, loss float64) {
	l.Printf("step %d loss %.6g", step, loss)
}

// final logs the result with the loss in full precision, so the line and
// the metrics JSON carry the same number.
func (l *Logger) final(m Metrics) {
	l.Printf("final steps %d loss %s", m.Steps, strconv.FormatFloat(m.Loss, 'g', -1, 64))
}

// stepLogger decides which steps get a line: the first, every LogEvery-th
// (also when steps are skipped, as asynchronous global steps are) and the last.
// The deciding replica (report) also sends each logged step as its
// training status, out of total steps.
type stepLogger struct {
	log    *Logger
	every  int
	last   int
	report bool
	total  int
}

func (s *stepLogger) observe(step int, loss float64) {
	if s.last == 0 || step/s.every > s.last/s.every {
		s.log.step(step, loss)
		if s.report {
			s.log.Status.Step(step, s.total, loss, s.log)
		}
	}
	s.last = step
}

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) {
	if d <= 0 {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}
