package trainer

import (
	"context"
	"errors"
	"fmt"
	"net/rpc"
	"sync"
	"time"
)

// psClient is a worker's connection to one parameter server. Calls that
// fail because the connection broke (the server is not up yet, or it
// restarted) are retried on a new connection for up to timeout; errors the
// server returns are not.
type psClient struct {
	addr    string
	timeout time.Duration
	client  *rpc.Client
}

// callPS makes one call of the parameter-server protocol, reconnecting as needed.
func callPS[A any, R any](ctx context.Context, c *psClient, method string, args A, reply *R) error {
	var failingSince time.Time
	wait := 50 * time.Millisecond
	for {
		if c.client == nil {
			conn, err := dialWithRetry(ctx, c.addr, c.timeout)
			if err != nil {
				return fmt.Errorf("reaching ps at %s: %w", c.addr, err)
			}
			c.client = rpc.NewClient(conn)
		}
		*reply = *new(R) // gob leaves zero-valued fields untouched: start clean
		call := c.client.Go(psService+"."+method, args, reply, make(chan *rpc.Call, 1))
		select {
		case <-call.Done:
		case <-ctx.Done():
			return ctx.Err()
		}
		var refused rpc.ServerError
		if call.Error == nil || errors.As(call.Error, &refused) {
			if call.Error != nil {
				return fmt.Errorf("ps at %s: %w", c.addr, call.Error)
			}
			return nil
		}
		c.client.Close()
		c.client = nil
		if failingSince.IsZero() {
			failingSince = time.Now()
		}
		if time.Since(failingSince) > c.timeout {
			return fmt.Errorf("calling ps at %s (gave up after %v): %w", c.addr, c.timeout, call.Error)
		}
		sleep(ctx, wait)
		wait = min(2*wait, time.Second)
	}
}

// psWorker is a training task of a parameter-server cluster.
type psWorker struct {
	s       Settings
	cfg     TFConfig
	log     *Logger
	clients []*psClient
	full    Dataset // every task builds the same dataset from the seed
	shard   Dataset // the rows this task trains on
}

// RunPSWorker trains as a chief or worker task: each step it pulls the
// weights from every parameter server, computes the gradient on its own
// data shard and pushes each server its slice. Updates are asynchronous,
// as in TensorFlow's parameter-server training. The deciding task (the
// chief, else worker 0) ends training after Steps global steps or at the
// target loss and writes the metrics; the others exit when a parameter
// server tells them training is over. A restarted task simply pulls the
// current weights and carries on.
func RunPSWorker(ctx context.Context, s Settings, cfg TFConfig, log *Logger) error {
	rank, world, ok := cfg.trainingRank()
	if !ok {
		return fmt.Errorf("task %s does not train", cfg.Self())
	}
	w := &psWorker{s: s, cfg: cfg, log: log}
	for _, addr := range cfg.Cluster[taskPS] {
		w.clients = append(w.clients, &psClient{addr: addr, timeout: s.ConnectTimeout})
	}
	defer w.close()
	w.full, _ = Generate(s.Seed, s.Samples, s.Features)
	w.shard = w.full.Shard(rank, world)
	role := "worker"
	if cfg.isDecider() {
		role = "deciding worker"
	}
	log.Printf("%s: %s, data shard %d of %d (%d samples), %d parameter servers", cfg.Self(), role, rank, world, w.shard.Samples(), len(w.clients))
	return w.train(ctx)
}

func (w *psWorker) train(ctx context.Context) error {
	steps := stepLogger{log: w.log, every: w.s.LogEvery, report: w.cfg.isDecider(), total: w.s.Steps}
	for {
		weights, done, err := w.pull(ctx)
		if err != nil {
			return err
		}
		if done {
			return w.trainingOver(ctx)
		}
		step, loss, done, err := w.push(ctx, w.shard.Sums(weights))
		if err != nil {
			return err
		}
		if done {
			return w.trainingOver(ctx)
		}
		steps.observe(step, loss)
		if w.cfg.isDecider() && (step >= w.s.Steps || w.s.reachedTarget(loss)) {
			return w.finish(ctx)
		}
		sleep(ctx, w.s.StepDelay)
		if err := ctx.Err(); err != nil {
			return err
		}
	}
}

// trainingOver ends a task that learnt from a parameter server that
// training is over. The decider still collects the final weights and
// writes the metrics: it may have been restarted after ending training.
func (w *psWorker) trainingOver(ctx context.Context) error {
	if w.cfg.isDecider() {
		return w.finish(ctx)
	}
	// Pass the news on to every server: one may not have heard it yet
	// (the decider ends training server by server) and each waits to have
	// told every task before it exits. Best effort, briefly.
	passOn, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	_ = w.eachServer(func(i int) error {
		return callPS(passOn, w.clients[i], "Finish", FinishArgs{Task: w.cfg.Self()}, &FinishReply{})
	})
	w.log.Printf("training is over; exiting")
	return nil
}

func (w *psWorker) pull(ctx context.Context) (weights []float64, done bool, err error) {
	weights = make([]float64, w.s.Features)
	replies := make([]PullReply, len(w.clients))
	err = w.eachServer(func(i int) error {
		return callPS(ctx, w.clients[i], "Pull", PullArgs{Task: w.cfg.Self(), Features: w.s.Features}, &replies[i])
	})
	if err != nil {
		return nil, false, fmt.Errorf("pulling weights: %w", err)
	}
	for i, r := range replies {
		if err := w.place(weights, i, r.Start, r.End, r.Weights); err != nil {
			return nil, false, err
		}
		done = done || r.Done
	}
	return weights, done, nil
}

func (w *psWorker) push(ctx context.Context, sums PartialSums) (step int, loss float64, done bool, err error) {
	gradient := sums.MeanGradient()
	replies := make([]PushReply, len(w.clients))
	err = w.eachServer(func(i int) error {
		start, end := shardRange(w.s.Features, len(w.clients), i)
		args := PushArgs{Task: w.cfg.Self(), Features: w.s.Features, Gradient: gradient[start:end], LR: w.s.LR}
		if i == 0 {
			args.SquaredError, args.Count = sums.SquaredError, sums.Count
		}
		return callPS(ctx, w.clients[i], "Push", args, &replies[i])
	})
	if err != nil {
		return 0, 0, false, fmt.Errorf("pushing gradients: %w", err)
	}
	for _, r := range replies {
		done = done || r.Done
	}
	return replies[0].Step, replies[0].Loss, done, nil
}

// finish ends training on every parameter server, assembles the final
// weights, and reports the loss over the whole dataset.
func (w *psWorker) finish(ctx context.Context) error {
	weights := make([]float64, w.s.Features)
	replies := make([]FinishReply, len(w.clients))
	err := w.eachServer(func(i int) error {
		return callPS(ctx, w.clients[i], "Finish", FinishArgs{Task: w.cfg.Self()}, &replies[i])
	})
	if err != nil {
		return fmt.Errorf("ending training: %w", err)
	}
	for i, r := range replies {
		if err := w.place(weights, i, r.Start, r.End, r.Weights); err != nil {
			return err
		}
	}
	m := Metrics{Loss: w.full.Loss(weights), Steps: replies[0].Step, Weights: weights}
	w.log.final(m)
	w.log.Status.Final(m.Steps, w.s.Steps, m.Loss, w.log)
	writeMetrics(w.log, w.s.TerminationMessagePath, m)
	return nil
}

// place copies server i's slice into weights after checking it is the
// slice this task expects server i to hold.
func (w *psWorker) place(weights []float64, i, start, end int, values []float64) error {
	wantStart, wantEnd := shardRange(w.s.Features, len(w.clients), i)
	if start != wantStart || end != wantEnd || len(values) != end-start {
		return fmt.Errorf("ps %d holds features [%d, %d) with %d values, expected [%d, %d)", i, start, end, len(values), wantStart, wantEnd)
	}
	copy(weights[start:end], values)
	return nil
}

// eachServer runs call for every parameter server at once.
func (w *psWorker) eachServer(call func(i int) error) error {
	errs := make([]error, len(w.clients))
	var wg sync.WaitGroup
	for i := range w.clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = call(i)
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

func (w *psWorker) close() {
	for _, c := range w.clients {
		if c.client != nil {
			c.client.Close()
		}
	}
}
