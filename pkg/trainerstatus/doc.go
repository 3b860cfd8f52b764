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
// Trainer sets it: the URL, and the files holding the CA and the token,
// under the names of Trainer's TrainJobStatus plugin, which the Kubeflow
// SDK and the Hugging Face transformers integration read
// (KUBEFLOW_TRAINER_SERVER_*), and of its first plugin
// (KUBEFLOW_TRAINER_STATUS_*).
const (
	EnvServerURL    = "KUBEFLOW_TRAINER_SERVER_URL"
	EnvServerCACert = "KUBEFLOW_TRAINER_SERVER_CA_CERT"
	EnvServerToken  = "KUBEFLOW_TRAINER_SERVER_TOKEN"
	EnvURL          = "KUBEFLOW_TRAINER_STATUS_URL"
	EnvCACert       = "KUBEFLOW_TRAINER_STATUS_CA_CERT"
	EnvToken        = "KUBEFLOW_TRAINER_STATUS_TOKEN"
)

// Variable is one variable of the endpoint's environment.
type Variable struct{ Name, Value string }

// Environment is what a replica's container gets to reach the endpoint,
// under both names: the URL, the CA's file and the token's file. Clients
// read the token file again as they post (it rotates under Kubeflow
// Trainer), so the file is mounted, never copied into a variable.
func Environment(url, caCertFile, tokenFile string) []Variable {
	return []Variable{
		{EnvServerURL, url}, {EnvServerCACert, caCertFile}, {EnvServerToken, tokenFile},
		{EnvURL, url}, {EnvCACert, caCertFile}, {EnvToken, tokenFile},
	}
}

// MountDir is where replicas find ca.crt and token, Kubeflow Trainer's path.
const MountDir = "/var/run/secrets/kubeflow/trainer"
