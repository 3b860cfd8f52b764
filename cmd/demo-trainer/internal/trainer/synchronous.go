package trainer

import (
	"context"
	"fmt"
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
	return trainSynchronously(ctx, s, 0, 1, soloReducer{}, log)
}

// trainSynchronously is data-parallel gradient descent where every step's
// partial sums are all-reduced, so every rank applies the same update and
// holds the same weights. Rank 0 decides when to stop: the reduced vector
// carries a stop flag only rank 0 sets, so all ranks end on the same step.
func trainSynchronously(ctx context.Context, s Settings, rank, world int, reducer allReducer, log *Logger) error {
	full, _ := Generate(s.Seed, s.Samples, s.Features)
	shard := full.Shard(rank, world)
	f := s.Features
	weights := make([]float64, f)
	// Layout of the reduced vector: gradient sums, squared error, row count, stop flag.
	reduced := make([]float64, f+3)
	steps := stepLogger{log: log, every: s.LogEvery}
	previousLoss := 0.0
	for step := 1; ; step++ {
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
		if reduced[f+2] > 0 {
			return finishSynchronously(s, rank, step, weights, full, log)
		}
		sleep(ctx, s.StepDelay)
		if err := ctx.Err(); err != nil {
			return err
		}
	}
}

func finishSynchronously(s Settings, rank, steps int, weights []float64, full Dataset, log *Logger) error {
	if rank != 0 {
		log.Printf("training over after %d steps", steps)
		return nil
	}
	m := Metrics{Loss: full.Loss(weights), Steps: steps, Weights: weights}
	log.final(m)
	writeMetrics(log, s.TerminationMessagePath, m)
	return nil
}
