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

// The environment every container of every replica gets, as Kubeflow
// Trainer sets it: the URL, and the files holding the CA and the token.
const (
	EnvURL    = "KUBEFLOW_TRAINER_STATUS_URL"
	EnvCACert = "KUBEFLOW_TRAINER_STATUS_CA_CERT"
	EnvToken  = "KUBEFLOW_TRAINER_STATUS_TOKEN"
)

// MountDir is where replicas find ca.crt and token, Kubeflow Trainer's path.
const MountDir = "/var/run/secrets/kubeflow/trainer"
