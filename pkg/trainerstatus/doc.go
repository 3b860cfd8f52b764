// Package trainerstatus serves Kubeflow Trainer's progress protocol
// (KEP-2779) for one job: replicas POST
// {"trainerStatus": {"progressPercentage": 45, ...}} with a bearer token to
// the job's own path, and the latest valid status is handed to the caller.
//
// The package decodes and validates payloads, serves them over HTTPS with
// the job's token, a body limit, a rate limit and timeouts, and makes the
// per-job CA, serving certificate and token. It never talks to the
// Kubernetes API and decides nothing about the run: what a status changes
// (the progress file, outputs, Events) is the caller's.
package trainerstatus
