// Package v1alpha1 is the TrainJob API: the job spec a trainstep step runs.
//
// It holds the types, their defaulting (defaults.go) and their validation
// (validation.go). It must not talk to a cluster or read files: callers
// parse, default, validate and then hand the job to pkg/render.
package v1alpha1
