package executor

import "sync"

// OutputGate makes one process write one result: the final outputs and
// the stdout line exactly once, whichever of the run's end, a second
// signal or a recovered panic comes first, and the early Terminated files
// of a signal only while the outcome is still open.
type OutputGate struct {
	mu sync.Mutex
	// settled: the job's outcome is known; a signal no longer makes it Terminated.
	settled bool
	// written: the final result went out.
	written bool
}

// NewOutputGate returns a gate for one process's result. A nil gate
// writes every time.
func NewOutputGate() *OutputGate { return &OutputGate{} }

// settle records that the outcome is known.
func (g *OutputGate) settle() {
	if g == nil {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.settled = true
}

// early runs write (the Terminated files of a signal) unless the outcome
// is settled or the final result went out.
func (g *OutputGate) early(write func()) {
	if g == nil {
		write()
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.settled && !g.written {
		write()
	}
}

// final runs write if no final result went out yet, and reports whether
// it did.
func (g *OutputGate) final(write func()) bool {
	if g == nil {
		write()
		return true
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.written {
		return false
	}
	g.settled, g.written = true, true
	write()
	return true
}
