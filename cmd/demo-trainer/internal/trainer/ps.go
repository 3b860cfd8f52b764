package trainer

import (
	"context"
	"fmt"
	"net"
	"net/rpc"
	"sync"
	"time"
)

// The parameter-server wire protocol: Go's net/rpc (gob over TCP) with the
// service name psService. A shard answers with the weights it holds; only
// shard 0 also counts the global step and the loss estimate, as
// TensorFlow's global_step lives on one parameter server.
const psService = "PS"

// PullArgs asks a shard for its weights.
type PullArgs struct {
	Task     string
	Features int
}

// PullReply carries a shard's weights, which features they are, and
// whether training is over.
type PullReply struct {
	Start, End int
	Weights    []float64
	Step       int
	Done       bool
}

// PushArgs carries a worker's mean gradient for the shard's features, the
// learning rate to apply it with (it is the worker's optimizer setting, as
// in TensorFlow) and, for shard 0, the worker's loss sums.
type PushArgs struct {
	Task         string
	Features     int
	Gradient     []float64
	LR           float64
	SquaredError float64
	Count        float64
}

// PushReply tells the worker the global step after its update, the loss
// estimate (shard 0 only) and whether training is over.
type PushReply struct {
	Step int
	Loss float64
	Done bool
}

// FinishArgs is the deciding task ending training.
type FinishArgs struct{ Task string }

// FinishReply carries the shard's final weights and, on shard 0, the final
// global step.
type FinishReply struct {
	Start, End int
	Weights    []float64
	Step       int
}

// paramShard is one parameter server's state.
type paramShard struct {
	mu          sync.Mutex
	index       int
	features    int
	start, end  int
	weights     []float64
	step        int
	lossReports map[string]PartialSums // latest loss sums per task (shard 0)
	finished    bool
	told        map[string]bool // tasks that know training is over
	trainers    int             // how many tasks train, so how many to tell

	finishedCh chan struct{} // closed when training is over
	allToldCh  chan struct{} // closed when every training task knows
}

func newParamShard(index, shards, features, trainers int) *paramShard {
	start, end := shardRange(features, shards, index)
	return &paramShard{
		index: index, features: features, start: start, end: end,
		weights:     make([]float64, end-start),
		lossReports: map[string]PartialSums{},
		told:        map[string]bool{},
		trainers:    trainers,
		finishedCh:  make(chan struct{}),
		allToldCh:   make(chan struct{}),
	}
}

// psRPC exposes a shard over net/rpc; its methods are the protocol.
type psRPC struct{ shard *paramShard }

func (p *psRPC) Pull(args PullArgs, reply *PullReply) error {
	s := p.shard
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.checkFeatures(args.Features); err != nil {
		return err
	}
	*reply = PullReply{Start: s.start, End: s.end, Weights: append([]float64(nil), s.weights...), Step: s.step, Done: s.finished}
	s.noteTold(args.Task)
	return nil
}

func (p *psRPC) Push(args PushArgs, reply *PushReply) error {
	s := p.shard
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.checkFeatures(args.Features); err != nil {
		return err
	}
	if len(args.Gradient) != len(s.weights) {
		return fmt.Errorf("gradient has %d values, shard %d holds %d", len(args.Gradient), s.index, len(s.weights))
	}
	if !s.finished {
		for j, g := range args.Gradient {
			s.weights[j] -= args.LR * g
		}
		s.step++
		if s.index == 0 {
			s.lossReports[args.Task] = PartialSums{SquaredError: args.SquaredError, Count: args.Count}
		}
	}
	*reply = PushReply{Step: s.step, Loss: s.lossEstimate(), Done: s.finished}
	s.noteTold(args.Task)
	return nil
}

func (p *psRPC) Finish(args FinishArgs, reply *FinishReply) error {
	s := p.shard
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.finished {
		s.finished = true
		close(s.finishedCh)
	}
	*reply = FinishReply{Start: s.start, End: s.end, Weights: append([]float64(nil), s.weights...), Step: s.step}
	s.noteTold(args.Task)
	return nil
}

func (s *paramShard) checkFeatures(features int) error {
	if features != s.features {
		return fmt.Errorf("ps %d has %d features, the caller %d: every replica needs the same --features", s.index, s.features, features)
	}
	return nil
}

// lossEstimate is the mean squared error over each task's latest report:
// a running view of the training loss, as each task saw it at its last step.
func (s *paramShard) lossEstimate() float64 {
	var total PartialSums
	for _, r := range s.lossReports {
		total.SquaredError += r.SquaredError
		total.Count += r.Count
	}
	return total.Loss()
}

// noteTold records that task has seen the finished state; the caller holds mu.
func (s *paramShard) noteTold(task string) {
	if !s.finished || s.told[task] {
		return
	}
	s.told[task] = true
	if len(s.told) == s.trainers {
		close(s.allToldCh)
	}
}

// RunPS serves one shard of the weights on the port of this task's address
// in the cluster spec. Unlike a TensorFlow server it does not run forever:
// it exits (returns nil) once training is over and every training task has
// been told so, or PSLinger after training ended, whichever comes first.
// A restarted parameter server starts its shard from zero again.
func RunPS(ctx context.Context, s Settings, cfg TFConfig, log *Logger) error {
	_, port, err := net.SplitHostPort(cfg.Cluster[taskPS][cfg.Task.Index])
	if err != nil {
		return fmt.Errorf("reading this ps task's address: %w", err)
	}
	shards := len(cfg.Cluster[taskPS])
	shard := newParamShard(cfg.Task.Index, shards, s.Features, len(cfg.trainingTasks()))
	server := rpc.NewServer()
	if err := server.RegisterName(psService, &psRPC{shard: shard}); err != nil {
		return fmt.Errorf("registering the ps service: %w", err)
	}
	ln, err := net.Listen("tcp", ":"+port)
	if err != nil {
		return fmt.Errorf("listening on this ps task's port: %w", err)
	}
	defer ln.Close()
	go serve(ln, server)
	log.Printf("ps %d of %d: serving features [%d, %d) on :%s", cfg.Task.Index, shards, shard.start, shard.end, port)

	select {
	case <-shard.finishedCh:
	case <-ctx.Done():
		return ctx.Err()
	}
	linger := time.NewTimer(s.PSLinger)
	defer linger.Stop()
	select {
	case <-shard.allToldCh:
		log.Printf("training is over and every training task knows; exiting")
	case <-linger.C:
		log.Printf("training is over; exiting after %v without hearing from every training task", s.PSLinger)
	case <-ctx.Done():
		return ctx.Err()
	}
	// Let the replies that told the last tasks leave the socket buffers.
	sleep(ctx, 200*time.Millisecond)
	return nil
}

func serve(ln net.Listener, server *rpc.Server) {
	for {
		conn, err := ln.Accept()
		if err != nil {
			return
		}
		go server.ServeConn(conn)
	}
}
