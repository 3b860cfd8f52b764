// Command demo-trainer is a small, real distributed trainer for trying
// trainstep without an ML framework: data-parallel linear regression on a
// synthetic dataset, in the topology its environment describes.
//
//   - TF_CONFIG set: TensorFlow parameter-server training. ps tasks hold the
//     weights in shards; chief and worker tasks pull, compute gradients on
//     their own data shard and push, asynchronously. The chief (else worker 0)
//     ends training and writes the metrics; the other workers exit 0 when told;
//     each ps exits 0 once every training task knows training is over (or
//     --ps-linger after it ended). A killed worker that is started again pulls
//     the current weights and carries on.
//   - RANK/WORLD_SIZE set: PyTorch-style ring all-reduce of the gradients
//     (MASTER_ADDR and MASTER_PORT locate rank 0's rendezvous). Rank 0's
//     settings are used by every rank; rank 0 ends training and writes the
//     metrics; all ranks exit 0. A rank that dies breaks the ring: the
//     others exit 1 on their next step, so the job must be restarted whole.
//   - PADDLE_MASTER set: PaddlePaddle's collective launch, as Training
//     Operator sets it for a PaddleJob (PADDLE_NNODES nodes). The node that
//     can listen on PADDLE_MASTER (its own pod IP) hosts the rendezvous and
//     is rank 0; the others are ranked as they register; then the same ring
//     all-reduce, every node writing the metrics. A stand-in for
//     `python -m paddle.distributed.launch` where Paddle is not installed.
//   - none of these: one process trains on the whole dataset.
//
// Under trainstep (or Kubeflow Trainer), the deciding replica also sends
// each logged step's progress and loss to $KUBEFLOW_TRAINER_SERVER_URL
// (else $KUBEFLOW_TRAINER_STATUS_URL), as Kubeflow's clients do.
//
// It logs "step N loss L" lines to stdout, and the deciding replica writes
// {"loss": …, "steps": …, "weights": […]} to $TRAINSTEP_TERMINATION_MESSAGE_PATH,
// else /dev/termination-log. Every flag can also be set by its environment
// variable (DEMO_ and the flag name in upper case, dashes as underscores, e.g.
// DEMO_STEP_DELAY=100ms); a flag on the command line wins.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/trainstep/trainstep/cmd/demo-trainer/internal/trainer"
)

// Exit codes: 0 trained (or told training is over), 1 training failed,
// 2 bad flags or environment.
const (
	exitFailed = 1
	exitUsage  = 2
)

// envPrefix prefixes the environment variable of every flag.
const envPrefix = "DEMO_"

// terminationPathEnv overrides where the metrics are written, for runs
// outside a container.
const terminationPathEnv = "TRAINSTEP_TERMINATION_MESSAGE_PATH"

func main() {
	os.Exit(run(context.Background(), os.Args[1:], os.Getenv, os.Stdout, os.Stderr))
}

func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	settings, err := parseSettings(args, getenv, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintf(stderr, "demo-trainer: %v\n", err)
		return exitUsage
	}
	train, err := chooseTopology(settings, getenv)
	if err != nil {
		fmt.Fprintf(stderr, "demo-trainer: %v\n", err)
		return exitUsage
	}
	log := trainer.NewLogger(stdout)
	if log.Status, err = trainer.NewStatusReporter(getenv); err != nil {
		// The status is a view of training, not part of it.
		fmt.Fprintf(stderr, "demo-trainer: %v; not reporting the training status\n", err)
	}
	if err := train(ctx, log); err != nil {
		fmt.Fprintf(stderr, "demo-trainer: %v\n", err)
		return exitFailed
	}
	return 0
}

// parseSettings reads the flags, falling back to their DEMO_* variables.
func parseSettings(args []string, getenv func(string) string, stderr io.Writer) (trainer.Settings, error) {
	s := trainer.DefaultSettings()
	fs := flag.NewFlagSet("demo-trainer", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.IntVar(&s.Steps, "steps", s.Steps, "stop after this many steps (global steps with parameter servers)")
	fs.Float64Var(&s.LR, "lr", s.LR, "learning rate")
	fs.IntVar(&s.Features, "features", s.Features, "features of the synthetic dataset (same on every replica)")
	fs.IntVar(&s.Samples, "samples", s.Samples, "samples of the synthetic dataset (same on every replica)")
	fs.Uint64Var(&s.Seed, "seed", s.Seed, "seed of the synthetic dataset (same on every replica)")
	fs.Float64Var(&s.TargetLoss, "target-loss", s.TargetLoss, "stop once the loss is at or below this (0: run all steps)")
	fs.DurationVar(&s.StepDelay, "step-delay", s.StepDelay, "sleep after every step, so a demo runs visibly")
	fs.IntVar(&s.LogEvery, "log-every", s.LogEvery, "log the loss every this many steps")
	fs.DurationVar(&s.ConnectTimeout, "connect-timeout", s.ConnectTimeout, "how long to keep retrying an unreachable peer")
	fs.DurationVar(&s.PSLinger, "ps-linger", s.PSLinger, "how long a ps waits, after training, for workers to learn it is over")
	fs.StringVar(&s.CheckpointDir, "checkpoint-dir", s.CheckpointDir, "all-reduce: rank 0 keeps a checkpoint here, and a restarted job resumes from it")
	fs.IntVar(&s.CheckpointEvery, "checkpoint-every", s.CheckpointEvery, "all-reduce: save the checkpoint every this many steps")
	if err := fs.Parse(args); err != nil {
		return s, err
	}
	if fs.NArg() > 0 {
		return s, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	onCommandLine := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { onCommandLine[f.Name] = true })
	var errs []error
	fs.VisitAll(func(f *flag.Flag) {
		name := envName(f.Name)
		if value := getenv(name); value != "" && !onCommandLine[f.Name] {
			if err := f.Value.Set(value); err != nil {
				errs = append(errs, fmt.Errorf("%s=%q: %w", name, value, err))
			}
		}
	})
	if err := errors.Join(errs...); err != nil {
		return s, err
	}
	if path := getenv(terminationPathEnv); path != "" {
		s.TerminationMessagePath = path
	}
	return s, s.Validate()
}

// envName is the environment variable of a flag: step-delay ⇒ DEMO_STEP_DELAY.
func envName(flagName string) string {
	return envPrefix + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

type trainFunc func(context.Context, *trainer.Logger) error

// chooseTopology picks the training shape from the environment trainstep
// (or a training operator) sets.
func chooseTopology(s trainer.Settings, getenv func(string) string) (trainFunc, error) {
	if raw := getenv("TF_CONFIG"); raw != "" {
		cfg, err := trainer.ParseTFConfig(raw)
		if err != nil {
			return nil, err
		}
		switch cfg.Task.Type {
		case "ps":
			return func(ctx context.Context, log *trainer.Logger) error { return trainer.RunPS(ctx, s, cfg, log) }, nil
		case "chief", "master", "worker":
			return func(ctx context.Context, log *trainer.Logger) error { return trainer.RunPSWorker(ctx, s, cfg, log) }, nil
		case "evaluator":
			return func(_ context.Context, log *trainer.Logger) error {
				log.Printf("%s: this trainer has nothing to evaluate; exiting", cfg.Self())
				return nil
			}, nil
		}
		return nil, fmt.Errorf("TF_CONFIG task.type %q is not ps, chief, master, worker or evaluator", cfg.Task.Type)
	}
	if getenv("PADDLE_MASTER") != "" {
		env, err := paddleEnv(getenv)
		if err != nil {
			return nil, err
		}
		return func(ctx context.Context, log *trainer.Logger) error { return trainer.RunPaddle(ctx, s, env, log) }, nil
	}
	if getenv("WORLD_SIZE") != "" || getenv("RANK") != "" {
		env, err := pytorchEnv(getenv)
		if err != nil {
			return nil, err
		}
		return func(ctx context.Context, log *trainer.Logger) error { return trainer.RunAllReduce(ctx, s, env, log) }, nil
	}
	return func(ctx context.Context, log *trainer.Logger) error { return trainer.RunSingle(ctx, s, log) }, nil
}

// paddleEnv reads Paddle's launch environment.
func paddleEnv(getenv func(string) string) (trainer.PaddleEnv, error) {
	env := trainer.PaddleEnv{Master: getenv("PADDLE_MASTER"), JobID: getenv("PADDLE_JOB_ID")}
	nodes, err := strconv.Atoi(getenv("PADDLE_NNODES"))
	if err != nil {
		return env, fmt.Errorf("PADDLE_NNODES=%q is not a number", getenv("PADDLE_NNODES"))
	}
	env.Nodes = nodes
	switch {
	case getenv("PADDLE_SERVER_NUM") != "":
		env.Role = "server"
	case getenv("PADDLE_TRAINER_NUM") != "":
		env.Role = "trainer"
	}
	return env, env.Validate()
}

func pytorchEnv(getenv func(string) string) (trainer.PyTorchEnv, error) {
	env := trainer.PyTorchEnv{MasterAddr: getenv("MASTER_ADDR")}
	var errs []error
	for name, into := range map[string]*int{"MASTER_PORT": &env.MasterPort, "RANK": &env.Rank, "WORLD_SIZE": &env.WorldSize} {
		value := getenv(name)
		if value == "" && name == "MASTER_PORT" {
			continue // only needed with more than one rank; Validate says so
		}
		n, err := strconv.Atoi(value)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s=%q is not a number", name, value))
		}
		*into = n
	}
	if err := errors.Join(errs...); err != nil {
		return env, err
	}
	return env, env.Validate()
}
