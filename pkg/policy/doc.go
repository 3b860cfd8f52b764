// Package policy holds trainstep's pure decisions about a running job:
// restart, stuck replicas, success, failure, elastic membership, deadline
// and cleanup, one file each, and how the step's run of it ends (ending.go).
//
// The decisions read a backend-neutral View of the replicas so that the
// Kubernetes reconciler and the local-process backend share one copy. This
// package must not call a cluster, start processes, sleep or read the clock:
// the caller passes Now.
package policy
