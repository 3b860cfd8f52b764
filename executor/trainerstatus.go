package executor

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"github.com/trainstep/trainstep/pkg/apis/trainstep/v1alpha1"
	"github.com/trainstep/trainstep/pkg/frameworks"
	"github.com/trainstep/trainstep/pkg/logs"
	"github.com/trainstep/trainstep/pkg/outputs"
	"github.com/trainstep/trainstep/pkg/render"
	"github.com/trainstep/trainstep/pkg/result"
	"github.com/trainstep/trainstep/pkg/trainerstatus"
)

// Event reasons of the reported training status, on the step's pod.
const (
	// EventTrainerStatus: the first status a replica reported.
	EventTrainerStatus = "TrainerStatus"
	// EventTrainerStatusFinal: the last status reported, when the job ended.
	EventTrainerStatusFinal = "TrainerStatusFinal"
	// EventJobResumed: the first status after a whole-job restart, with
	// how much work the restart cost.
	EventJobResumed = "JobResumed"
)

// DefaultTrainerStatusAddress is where the step's progress endpoint
// listens in its pod.
const DefaultTrainerStatusAddress = ":8443"

// statusLogInterval bounds the step's log lines of the reported status.
const statusLogInterval = 10 * time.Second

// statusEndpoint is the step's side of Kubeflow Trainer's progress
// protocol: it serves the job's endpoint (on a cluster when the step knows
// its own pod, locally on 127.0.0.1), takes statuses from leader replicas'
// log lines, and turns the latest status into the progress file, a log
// line, Events and the outputs. Its methods do nothing on a nil receiver,
// so a run without it needs no checks.
type statusEndpoint struct {
	jobName string
	// podLabel is LabelTrainerStatus's value on the serving step's pod,
	// the job's identity: what the <job>-status Service selects.
	podLabel     string
	namespace    string
	log          *zap.Logger
	progressFile string
	server       *trainerstatus.Server
	listener     net.Listener // nil: statuses come from log lines only
	material     trainerstatus.Material
	leaders      map[string]bool // log prefixes of the leader replicas
	// launched is closed once the job's objects are all created (jobLaunched).
	launched     chan struct{}
	launchedOnce sync.Once

	stopOnce  sync.Once
	mu        sync.Mutex
	last      *trainerstatus.Status
	raw       []byte
	logged    *trainerstatus.Status
	loggedAt  time.Time
	logTimer  *time.Timer
	firstSeen func(*trainerstatus.Status)
	// resumes pairs whole-job restarts with the statuses around them;
	// resumed is told of each restart's cost (an Event).
	resumes resumeLedger
	resumed func(*result.Resume)
}

func newStatusEndpoint(cfg *Config, job *v1alpha1.TrainJob, namespace string, material trainerstatus.Material, log *zap.Logger) *statusEndpoint {
	e := &statusEndpoint{jobName: job.Name, namespace: namespace, log: log, progressFile: cfg.ProgressFile, material: material, leaders: map[string]bool{}, launched: make(chan struct{})}
	for _, ref := range frameworks.Leaders(job) {
		e.leaders[logs.ReplicaPrefix(string(ref.Type), ref.Index)] = true
	}
	e.server = trainerstatus.New(trainerstatus.Options{Namespace: namespace, JobName: job.Name, Material: material, OnStatus: e.apply, Logger: log})
	return e
}

// servesTrainerStatus reports whether a cluster run serves the progress
// endpoint, which needs the job's Secret.
func servesTrainerStatus(cfg *Config) bool { return cfg.TrainerStatus && cfg.OwnerPod != "" }

// trainerStatusPermissions are what serving the endpoint needs beyond the
// job's other objects: its Secret (read back by a retried step and
// re-attached to it, created, deleted with the job), which deploy/secrets/
// grants. Its
// Service and the label on the step's own pod are covered by the rights on
// services and pods.
func trainerStatusPermissions() []permission {
	var perms []permission
	for _, v := range []string{"create", "get", "delete", "patch"} {
		perms = append(perms, permission{verb: v, resource: "secrets"})
	}
	return perms
}

// prepareTrainerStatus, when the run serves the progress endpoint, listens
// on its address, reads the job's CA, certificate and token back from the
// Secret an earlier attempt created (its replicas trust those) or makes
// new ones, and tells the renderer. denied are the endpoint's permissions
// the preflight found missing: with any, there is no endpoint. Statuses
// from log lines are taken whenever cfg.TrainerStatus is set.
func prepareTrainerStatus(ctx context.Context, cfg *Config, conn *connection, job *v1alpha1.TrainJob, denied []permission, id *render.Identity, in *render.Inputs) (*statusEndpoint, error) {
	if !cfg.TrainerStatus {
		return nil, nil
	}
	log := cfg.Logger.With(zap.String("job", job.Name))
	if !servesTrainerStatus(cfg) {
		log.Info("no progress endpoint: the step does not know its own pod (--owner-pod), so the replicas could not reach it; statuses in the leaders' log lines are still read")
		return newStatusEndpoint(cfg, job, conn.namespace, trainerstatus.Material{}, log), nil
	}
	if len(denied) > 0 {
		missing := make([]string, 0, len(denied))
		for _, p := range denied {
			missing = append(missing, p.String())
		}
		log.Warn("no progress endpoint: it keeps its certificate and token in the job's Secret, and the step may not "+
			strings.Join(missing, ", ")+" (granted by "+secretsRoleFile+"); statuses in the leaders' log lines are still read",
			zap.String("namespace", conn.namespace))
		return newStatusEndpoint(cfg, job, conn.namespace, trainerstatus.Material{}, log), nil
	}
	address := cfg.TrainerStatusAddress
	if address == "" {
		address = DefaultTrainerStatusAddress
	}
	// The endpoint is worth no failed run: without it the replicas get no
	// status env and the job runs as it would have.
	listener, err := net.Listen("tcp", address)
	if err != nil {
		log.Warn("no progress endpoint: its address cannot be listened on; statuses in the leaders' log lines are still read",
			zap.String("address", address), zap.Error(err))
		return newStatusEndpoint(cfg, job, conn.namespace, trainerstatus.Material{}, log), nil
	}
	material, err := trainerStatusMaterial(ctx, cfg, conn, job, *id)
	if err != nil {
		_ = listener.Close()
		return nil, err
	}
	e := newStatusEndpoint(cfg, job, conn.namespace, material, log)
	e.listener = listener
	e.podLabel = render.TrainerStatusSelectorValue(*id)
	port := listener.Addr().(*net.TCPAddr).Port
	id.TrainerStatus = &render.TrainerStatusEndpoint{Port: int32(port)}
	in.TrainerStatus = &material
	return e, nil
}

// trainerStatusMaterial is the job's endpoint identity: the one its two
// Secrets hold when an earlier attempt of the job's identity created them,
// else a new one.
func trainerStatusMaterial(ctx context.Context, cfg *Config, conn *connection, job *v1alpha1.TrainJob, id render.Identity) (trainerstatus.Material, error) {
	client, err := readOwnSecret(ctx, conn, id, v1alpha1.TrainerStatusName(job.Name), cfg.APITimeout)
	if err != nil {
		return trainerstatus.Material{}, fmt.Errorf("reading the progress endpoint's secret: %w", err)
	}
	serving, err := readOwnSecret(ctx, conn, id, v1alpha1.TrainerStatusTLSName(job.Name), cfg.APITimeout)
	if err != nil {
		return trainerstatus.Material{}, fmt.Errorf("reading the progress endpoint's serving secret: %w", err)
	}
	if client != nil && serving != nil {
		if m, ok := trainerstatus.FromSecretData(client.Data, serving.Data); ok {
			return m, nil
		}
	}
	m, err := trainerstatus.NewMaterial(render.TrainerStatusHosts(conn.namespace, job.Name), time.Now())
	if err != nil {
		return trainerstatus.Material{}, fmt.Errorf("making the progress endpoint's certificate: %w", err)
	}
	return m, nil
}

// serve points the job's <job>-status Service at this step's pod (the
// label moves from an earlier attempt's pod to this one), starts serving,
// and returns the stop to call when the job ended: it records the last
// status as an Event and says how many requests were refused.
func (e *statusEndpoint) serve(ctx context.Context, cfg *Config, conn *connection, events *eventRecorder, eventObject runtime.Object) (stop func()) {
	if e == nil {
		return func() {}
	}
	e.mu.Lock()
	e.firstSeen = func(s *trainerstatus.Status) {
		if eventObject != nil {
			events.recorder.Eventf(eventObject, corev1.EventTypeNormal, EventTrainerStatus, "first training status from the replicas: %s", eventText(s))
		}
	}
	e.resumed = func(r *result.Resume) {
		if eventObject != nil {
			events.recorder.Eventf(eventObject, corev1.EventTypeNormal, EventJobResumed, "%s", describeResume(r))
		}
	}
	e.mu.Unlock()
	labelled := make(chan struct{})
	labelCtx, stopLabelling := context.WithCancel(ctx)
	if e.listener != nil {
		// No replica reaches the endpoint before the job's pods exist: the
		// step's pod is labelled once they are created (or, when some wait
		// for room, soon after they were first sent), not while their creates
		// queue behind it, as a sweep's steps' do behind each other's.
		go func() {
			defer close(labelled)
			wait := time.NewTimer(labelAtLatest)
			defer wait.Stop()
			select {
			case <-e.launched:
			case <-wait.C:
			case <-labelCtx.Done():
				return
			}
			if err := labelStepPod(labelCtx, cfg, conn, e.podLabel, e.log); err != nil && labelCtx.Err() == nil {
				e.log.Warn("the progress endpoint's Service may not reach this step: labelling its pod failed", zap.Error(err))
			}
		}()
		if err := e.server.Serve(e.listener); err != nil {
			e.log.Warn("not serving the progress endpoint", zap.Error(err))
		} else {
			e.log.Info("serving the progress endpoint", zap.String("url", render.TrainerStatusURL(e.namespace, e.jobName)), zap.Stringer("address", e.listener.Addr()))
		}
	} else {
		close(labelled)
	}
	return func() {
		stopLabelling()
		<-labelled
		e.shutdown()
		if s := e.lastStatus(); s != nil && eventObject != nil {
			events.recorder.Eventf(eventObject, corev1.EventTypeNormal, EventTrainerStatusFinal, "last training status: %s", eventText(s))
		}
	}
}

// labelAtLatest is how long the step's pod waits for the job's launch
// before it is labelled anyway.
const labelAtLatest = 5 * time.Second

// jobLaunched says the job's objects are all created: the step's pod may
// be labelled now.
func (e *statusEndpoint) jobLaunched() {
	if e != nil {
		e.launchedOnce.Do(func() { close(e.launched) })
	}
}

// labelStepPod sets LabelTrainerStatus on the step's own pod, whose name
// and UID the downward API gave, and removes it from any other pod that
// carries it for this job: the pod of an earlier attempt, still running
// or not. Each patch names the pod's UID, so it changes only that pod.
func labelStepPod(ctx context.Context, cfg *Config, conn *connection, value string, log *zap.Logger) error {
	pods := conn.core.Pods(conn.namespace)
	patch := func(name, uid string, value any) error {
		body, err := json.Marshal(map[string]any{"metadata": map[string]any{"uid": uid, "labels": map[string]any{v1alpha1.LabelTrainerStatus: value}}})
		if err != nil {
			return err
		}
		return retryTransient(ctx, cfg.APITimeout, func() error {
			_, err := pods.Patch(ctx, name, types.MergePatchType, body, metav1.PatchOptions{})
			return classify(err)
		})
	}
	if err := patch(cfg.OwnerPod, cfg.OwnerUID, value); err != nil {
		return fmt.Errorf("labelling the step's pod %s: %w", cfg.OwnerPod, err)
	}
	var earlier *corev1.PodList
	err := retryTransient(ctx, cfg.APITimeout, func() (err error) {
		earlier, err = pods.List(ctx, metav1.ListOptions{LabelSelector: v1alpha1.LabelTrainerStatus + "=" + value})
		return classify(err)
	})
	if err != nil {
		return fmt.Errorf("listing the pods serving the job's progress endpoint: %w", err)
	}
	for _, pod := range earlier.Items {
		if pod.UID == types.UID(cfg.OwnerUID) {
			continue
		}
		if err := patch(pod.Name, string(pod.UID), nil); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("moving the progress endpoint from the earlier step pod %s: %w", pod.Name, err)
		}
		log.Info("the progress endpoint moved to this step from an earlier one", zap.String("earlierPod", pod.Name))
	}
	return nil
}

// finish ends the endpoint, if still serving, and puts the last status
// into the result: every exit of a run calls it.
func (e *statusEndpoint) finish(res *result.Result) {
	e.shutdown()
	e.fill(res)
}

// shutdown stops serving and logs a status not logged yet; only the first
// call does anything.
func (e *statusEndpoint) shutdown() {
	if e == nil {
		return
	}
	e.stopOnce.Do(e.stop)
}

func (e *statusEndpoint) stop() {
	if e.listener != nil {
		// The job is over: a post still in flight is not worth waiting
		// for, and a client's idle keep-alive connections would hold a
		// graceful shutdown for seconds.
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		defer cancel()
		_ = e.server.Shutdown(ctx)
		_ = e.listener.Close() // when Serve never ran
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.logTimer != nil {
		e.logTimer.Stop()
		e.logTimer = nil
	}
	if e.last != nil && !sameSummary(e.last, e.logged) {
		e.logStatus()
	}
	if refused := e.server.Refused(); len(refused) > 0 {
		fields := make([]zap.Field, 0, len(refused))
		for code, n := range refused {
			fields = append(fields, zap.Int(strconv.Itoa(code), n))
		}
		e.log.Info("the progress endpoint refused some requests, by HTTP status", fields...)
	}
}

// apply takes one status, already validated; the server calls it one at a
// time.
func (e *statusEndpoint) apply(s *trainerstatus.Status, raw []byte, from trainerstatus.Source) {
	e.mu.Lock()
	defer e.mu.Unlock()
	first := e.last == nil
	e.last, e.raw = s, raw
	if r := e.resumes.status(s); r != nil {
		e.log.Info(describeResume(r))
		if e.resumed != nil {
			e.resumed(r)
		}
	}
	if s.ProgressPercentage != nil {
		if err := outputs.WriteProgress(e.progressFile, int(*s.ProgressPercentage), 100); err != nil {
			e.log.Warn("writing the progress file", zap.String("path", e.progressFile), zap.Error(err))
		}
	}
	if first {
		e.log.Info("the replicas report their training status", zap.String("from", string(from)))
		if e.firstSeen != nil {
			e.firstSeen(s)
		}
	}
	e.scheduleLog()
}

// scheduleLog logs a changed status at once, or when statusLogInterval has
// passed since the last line; e.mu is held.
func (e *statusEndpoint) scheduleLog() {
	if sameSummary(e.last, e.logged) || e.logTimer != nil {
		return
	}
	wait := statusLogInterval - time.Since(e.loggedAt)
	if e.logged == nil || wait <= 0 {
		e.logStatus()
		return
	}
	e.logTimer = time.AfterFunc(wait, func() {
		e.mu.Lock()
		defer e.mu.Unlock()
		if e.logTimer == nil {
			return // shut down meanwhile
		}
		e.logTimer = nil
		if !sameSummary(e.last, e.logged) {
			e.logStatus()
		}
	})
}

// logStatus writes the status's line; e.mu is held.
func (e *statusEndpoint) logStatus() {
	e.logged, e.loggedAt = e.last, time.Now()
	e.log.Info(e.last.Summary())
}

// maxEventText keeps an Event's message within the kilobyte events.k8s.io
// allows; a status may carry 64 metrics.
const maxEventText = 900

func eventText(s *trainerstatus.Status) string {
	text := s.Summary()
	if len(text) > maxEventText {
		text = text[:maxEventText] + " …"
	}
	return text
}

func sameSummary(a, b *trainerstatus.Status) bool {
	return a != nil && b != nil && a.Summary() == b.Summary()
}

func (e *statusEndpoint) lastStatus() *trainerstatus.Status {
	if e == nil {
		return nil
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.last
}

// percentage is the last reported progress, if any: it then owns Argo's
// progress file.
func (e *statusEndpoint) percentage() (int32, bool) {
	s := e.lastStatus()
	if s == nil || s.ProgressPercentage == nil {
		return 0, false
	}
	return *s.ProgressPercentage, true
}

// fill puts the last status and its metrics into the result.
func (e *statusEndpoint) fill(res *result.Result) {
	if e == nil {
		return
	}
	res.Resumes = e.resumes.resumes()
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.last == nil {
		return
	}
	res.TrainerStatus = append([]byte(nil), e.raw...)
	res.TrainerMetrics = e.last.MetricsMap()
}

// tapLogs returns out wrapped so that a leader replica's log line that is
// exactly one JSON object with a trainerStatus key is taken as a status.
// It sees the prefixed lines a logs.Prefixer writes, whole lines only.
func (e *statusEndpoint) tapLogs(out io.Writer) io.Writer {
	if e == nil {
		return out
	}
	return &statusLogTap{out: out, endpoint: e}
}

type statusLogTap struct {
	out      io.Writer
	endpoint *statusEndpoint
}

// statusKey is what a line must contain to be decoded at all.
var statusKey = []byte(`"trainerStatus"`)

func (t *statusLogTap) Write(batch []byte) (int, error) {
	for rest := batch; len(rest) > 0; {
		line := rest
		if i := bytes.IndexByte(rest, '\n'); i >= 0 {
			line, rest = rest[:i], rest[i+1:]
		} else {
			rest = nil
		}
		t.take(line)
	}
	return t.out.Write(batch)
}

// take reads one "[prefix] content" line.
func (t *statusLogTap) take(line []byte) {
	if len(line) == 0 || line[0] != '[' || !bytes.Contains(line, statusKey) {
		return
	}
	end := bytes.Index(line, []byte("] "))
	if end < 0 || !t.endpoint.leaders[string(line[1:end])] {
		return
	}
	content := bytes.TrimSpace(line[end+2:])
	if len(content) == 0 || content[0] != '{' {
		return
	}
	if err := t.endpoint.server.Accept(content, trainerstatus.SourceLogLine); err != nil {
		t.endpoint.log.Debug("a log line's status was not taken", zap.Error(err))
	}
}

// jobRestarted records a whole-job restart, so that the first status after
// it says what the restart cost.
func (e *statusEndpoint) jobRestarted(attempt int, reason string) {
	if e != nil {
		e.resumes.restarted(attempt, reason)
	}
}
