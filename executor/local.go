package executor

import (
	"context"
	"errors"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"

	"github.com/trainstep/trainstep/pkg/apis/trainstep/v1alpha1"
	"github.com/trainstep/trainstep/pkg/backend/local"
	"github.com/trainstep/trainstep/pkg/logs"
	"github.com/trainstep/trainstep/pkg/policy"
	"github.com/trainstep/trainstep/pkg/reconcile"
	"github.com/trainstep/trainstep/pkg/result"
	"github.com/trainstep/trainstep/pkg/spec"
)

// runLocal runs the job as local processes with the same policies, log
// prefixes, progress line and result as on a cluster. The first signal
// stops every process group and the run ends Terminated.
func runLocal(ctx context.Context, cfg *Config, job *v1alpha1.TrainJob, res *result.Result) error {
	runCtx, cancelRun := context.WithCancel(ctx)
	defer cancelRun()
	terminated, _ := watchSignals(runCtx, cfg.Signals, cancelRun, nil)
	log := cfg.Logger.With(zap.String("job", job.Name))

	var statusEnv []corev1.EnvVar
	var closeStatus func()
	var err error
	if cfg.status, statusEnv, closeStatus, err = startLocalTrainerStatus(cfg, job, log); err != nil {
		return err
	}
	defer closeStatus()
	logOutput := cfg.Stderr
	if cfg.Logs != logs.ModeNone {
		// A leader's log line may carry its training status.
		logOutput = cfg.status.tapLogs(cfg.Stderr)
	}
	report := progressReporter(cfg, log)
	lastProgress := ""
	outcome, err := local.Run(runCtx, local.Options{
		Job:          job,
		Timeouts:     policy.Timeouts{Stuck: cfg.StuckTimeout, Pending: cfg.PendingTimeout},
		Logs:         cfg.Logs,
		LogOutput:    logOutput,
		JobEnv:       statusEnv,
		Logger:       log,
		Clock:        cfg.Clock,
		MaxStopGrace: cfg.TerminationGrace,
		Supervisor:   cfg.LocalSupervisor,
		OnView: func(v *policy.View) {
			p := reconcile.ProgressOf(v)
			if line := p.String(); line != lastProgress {
				lastProgress = line
				report(p)
			}
		},
	})
	if err != nil {
		// The backend's own checks (a command to run) name TrainJob paths.
		return spec.InManifestTerms(cfg.Spec, err)
	}
	fillResult(res, job, &outcome.View, outcome.Decision, log)
	// Every process still running when the job ended was stopped.
	markStopped(res, policy.Desired(job))
	if terminated() || outcome.Terminated {
		res.Phase, res.Reason, res.Message = result.PhaseTerminated, result.ReasonTerminated, "the run was stopped; every local process of the job was stopped"
	}
	log.Info("job ended", zap.String("phase", string(res.Phase)), zap.String("reason", res.Reason), zap.String("message", res.Message))
	if res.Phase != result.PhaseSucceeded {
		return &result.Error{Phase: res.Phase, Reason: res.Reason, Err: errors.New(res.Message)}
	}
	return nil
}
