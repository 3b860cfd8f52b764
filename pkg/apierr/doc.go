// Package apierr is trainstep's one answer to "what does this error from
// the Kubernetes API server mean": a fault that passes (retry it), a
// ResourceQuota that is full (wait for room), or a refusal that retrying
// cannot change. It also retries a single write while its error is
// transient.
//
// It decides nothing about the job: callers turn the classes into outcomes
// (Invalid only before anything was created, Transient after a bound).
package apierr
