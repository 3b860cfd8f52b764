package trainer

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

// The environment of Kubeflow Trainer's progress protocol, which trainstep
// serves (KEP-2779), under the names its TrainJobStatus plugin, the
// Kubeflow SDK and the transformers integration read; the trainer falls
// back to those of Trainer's first plugin.
const (
	EnvServerURL    = "KUBEFLOW_TRAINER_SERVER_URL"
	EnvServerCACert = "KUBEFLOW_TRAINER_SERVER_CA_CERT"
	EnvServerToken  = "KUBEFLOW_TRAINER_SERVER_TOKEN"
	EnvStatusURL    = "KUBEFLOW_TRAINER_STATUS_URL"
	EnvStatusCACert = "KUBEFLOW_TRAINER_STATUS_CA_CERT"
	EnvStatusToken  = "KUBEFLOW_TRAINER_STATUS_TOKEN"
)

// statusTimeout bounds one post: training never waits longer for it.
const statusTimeout = 5 * time.Second

// StatusReporter posts the deciding replica's progress and loss to the
// endpoint its environment names. A post in flight is never waited for
// during training (a newer step is dropped meanwhile), and a failed post
// is logged once and otherwise ignored: the status is a view of training,
// not part of it.
type StatusReporter struct {
	url string
	// tokenPath is re-read for every post, as Kubeflow's clients do: the
	// token rotates under Kubeflow Trainer.
	tokenPath string
	client    *http.Client

	mu        sync.Mutex
	inFlight  bool
	done      sync.WaitGroup
	warned    bool
	startedAt time.Time
}

// NewStatusReporter reads the protocol's environment; it returns nil, and
// no error, when the URL is not set.
func NewStatusReporter(getenv func(string) string) (*StatusReporter, error) {
	urlVar, caVar, tokenVar := EnvServerURL, EnvServerCACert, EnvServerToken
	if getenv(urlVar) == "" {
		urlVar, caVar, tokenVar = EnvStatusURL, EnvStatusCACert, EnvStatusToken
	}
	url := getenv(urlVar)
	if url == "" {
		return nil, nil
	}
	ca, err := os.ReadFile(getenv(caVar))
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", caVar, err)
	}
	r := &StatusReporter{url: url, tokenPath: getenv(tokenVar), startedAt: time.Now()}
	if _, err := r.token(); err != nil {
		return nil, fmt.Errorf("reading %s: %w", tokenVar, err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(ca) {
		return nil, fmt.Errorf("%s holds no PEM certificate", caVar)
	}
	r.client = &http.Client{Timeout: statusTimeout, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}}
	return r, nil
}

// token reads the bearer token from its file.
func (r *StatusReporter) token() (string, error) {
	data, err := os.ReadFile(r.tokenPath)
	return strings.TrimSpace(string(data)), err
}

// statusBody is Kubeflow Trainer's payload.
func statusBody(step, total int, loss float64, elapsed time.Duration, now time.Time) ([]byte, error) {
	percent := min(100, step*100/total)
	status := map[string]any{
		"progressPercentage": percent,
		"metrics": []map[string]string{
			{"name": "loss", "value": strconv.FormatFloat(loss, 'g', 6, 64)},
			{"name": "step", "value": strconv.Itoa(step)},
		},
		"lastUpdatedTime": now.UTC().Format(time.RFC3339),
	}
	// A few steps' pace says too little of the rest.
	if step >= 10 && step < total {
		status["estimatedRemainingSeconds"] = int(elapsed.Seconds() * float64(total-step) / float64(step))
	} else if step >= total {
		status["estimatedRemainingSeconds"] = 0
	}
	return json.Marshal(map[string]any{"trainerStatus": status})
}

// Step reports a step in the background, unless a post is still in flight.
func (r *StatusReporter) Step(step, total int, loss float64, log *Logger) {
	if r == nil {
		return
	}
	r.mu.Lock()
	if r.inFlight {
		r.mu.Unlock()
		return
	}
	r.inFlight = true
	r.done.Add(1)
	r.mu.Unlock()
	go func() {
		defer r.done.Done()
		r.post(step, total, loss, log)
		r.mu.Lock()
		r.inFlight = false
		r.mu.Unlock()
	}()
}

// Final reports the last step, after any post in flight.
func (r *StatusReporter) Final(step, total int, loss float64, log *Logger) {
	if r == nil {
		return
	}
	r.done.Wait()
	r.post(max(step, total), total, loss, log)
}

func (r *StatusReporter) post(step, total int, loss float64, log *Logger) {
	body, err := statusBody(step, total, loss, time.Since(r.startedAt), time.Now())
	if err == nil {
		err = r.send(body)
	}
	if err != nil {
		r.mu.Lock()
		first := !r.warned
		r.warned = true
		r.mu.Unlock()
		if first {
			log.Printf("warning: sending the training status: %v (training goes on)", err)
		}
	}
}

func (r *StatusReporter) send(body []byte) error {
	ctx, cancel := context.WithTimeout(context.Background(), statusTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, r.url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	token, err := r.token()
	if err != nil {
		return fmt.Errorf("reading the token: %w", err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := r.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusTooManyRequests {
		return fmt.Errorf("the endpoint answered %s", resp.Status)
	}
	return nil
}
