// Package executor is the step lifecycle of `trainstep run`: load the spec,
// connect, render, reconcile until the job ends or the step is stopped,
// clean up, and write the outputs.
//
// It receives everything through Config: it must not read flags or the
// environment (cmd/trainstep does). Work that must survive SIGTERM —
// deleting the job's objects and writing outputs — runs on contexts the
// signal does not cancel, each with its own deadline.
package executor
