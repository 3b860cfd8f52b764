package trainer

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// allReducer sums a vector element-wise across every rank, in place, and
// leaves the bit-identical result on every rank.
type allReducer interface {
	AllReduce(ctx context.Context, v []float64) error
}

// soloReducer is the all-reduce of a world of one.
type soloReducer struct{}

func (soloReducer) AllReduce(context.Context, []float64) error { return nil }

// RunSingle trains on the whole dataset in this process and writes the
// metrics: the shape used when no topology is configured.
func RunSingle(ctx context.Context, s Settings, log *Logger) error {
	log.Printf("single process: %d samples, %d features", s.Samples, s.Features)
	return trainSynchronously(ctx, s, 0, 1, soloReducer{}, log, false)
}

// trainSynchronously is data-parallel gradient descent where every step's
// partial sums are all-reduced, so every rank applies the same update and
// holds the same weights. Rank 0 decides when to stop: the reduced vector
// carries a stop flag only rank 0 sets, so all ranks end on the same step.
// Rank 0 writes the metrics, or every rank when allWrite: Paddle's
// rendezvous, not the replica's index, decides which node is rank 0.
func trainSynchronously(ctx context.Context, s Settings, rank, world int, reducer allReducer, log *Logger, allWrite bool) error {
	full, _ := Generate(s.Seed, s.Samples, s.Features)
	shard := full.Shard(rank, world)
	f := s.Features
	weights := make([]float64, f)
	first, err := resume(ctx, s, rank, weights, reducer, log)
	if err != nil {
		return err
	}
	// Layout of the reduced vector: gradient sums, squared error, row count, stop flag.
	reduced := make([]float64, f+3)
	steps := stepLogger{log: log, every: s.LogEvery, report: rank == 0, total: s.Steps}
	previousLoss := 0.0
	for step := first; ; step++ {
		sums := shard.Sums(weights)
		copy(reduced, sums.Gradient)
		reduced[f], reduced[f+1], reduced[f+2] = sums.SquaredError, sums.Count, 0
		if rank == 0 && (step >= s.Steps || (step > 1 && s.reachedTarget(previousLoss))) {
			reduced[f+2] = 1
		}
		if err := reducer.AllReduce(ctx, reduced); err != nil {
			return fmt.Errorf("all-reducing step %d: %w", step, err)
		}
		total := PartialSums{Gradient: reduced[:f], SquaredError: reduced[f], Count: reduced[f+1]}
		previousLoss = total.Loss()
		for j, g := range total.MeanGradient() {
			weights[j] -= s.LR * g
		}
		steps.observe(step, previousLoss)
		if rank == 0 && s.CheckpointDir != "" && step%s.CheckpointEvery == 0 {
			if err := saveCheckpoint(s.CheckpointDir, checkpoint{Step: step, Weights: weights}); err != nil {
				return err
			}
		}
		if reduced[f+2] > 0 {
			return finishSynchronously(s, rank, step, weights, full, log, allWrite)
		}
		sleep(ctx, s.StepDelay)
		if err := ctx.Err(); err != nil {
			return err
		}
	}
}

func finishSynchronously(s Settings, rank, steps int, weights []float64, full Dataset, log *Logger, allWrite bool) error {
	if rank != 0 {
		log.Printf("training over after %d steps", steps)
		if allWrite {
			m := Metrics{Loss: full.Loss(weights), Steps: steps, Weights: weights}
			log.final(m)
			writeMetrics(log, s.TerminationMessagePath, m)
		}
		return nil
	}
	if s.CheckpointDir != "" {
		// The job is done: the next run of it starts afresh, and the
		// directory made for the checkpoint goes too (a node's /var/tmp/<pod>
		// would outlive the pod); one holding anything else is kept.
		if err := os.Remove(filepath.Join(s.CheckpointDir, checkpointFile)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			log.Printf("removing the checkpoint: %v", err)
		}
		_ = os.Remove(s.CheckpointDir)
	}
	m := Metrics{Loss: full.Loss(weights), Steps: steps, Weights: weights}
	log.final(m)
	log.Status.Final(steps, s.Steps, m.Loss, log)
	writeMetrics(log, s.TerminationMessagePath, m)
	return nil
}

// resume starts every rank where the last checkpoint left off: rank 0
// reads it and an all-reduce in which only rank 0 contributes hands its
// step and weights to every rank (no shared file system needed). It
// returns the first step to run.
func resume(ctx context.Context, s Settings, rank int, weights []float64, reducer allReducer, log *Logger) (int, error) {
	if s.CheckpointDir == "" {
		return 1, nil
	}
	// Layout: found flag, step, weights.
	state := make([]float64, 2+len(weights))
	if rank == 0 {
		if err := os.MkdirAll(s.CheckpointDir, 0o755); err != nil {
			return 0, fmt.Errorf("--checkpoint-dir: %w", err)
		}
		c, ok, err := loadCheckpoint(s.CheckpointDir, len(weights))
		if err != nil {
			return 0, err
		}
		if ok {
			state[0], state[1] = 1, float64(c.Step)
			copy(state[2:], c.Weights)
		}
	}
	if err := reducer.AllReduce(ctx, state); err != nil {
		return 0, fmt.Errorf("sharing the checkpoint: %w", err)
	}
	if state[0] == 0 {
		return 1, nil
	}
	copy(weights, state[2:])
	step := int(state[1])
	log.Printf("resuming from the checkpoint of step %d", step)
	return step + 1, nil
}
