package trainer

import (
	"slices"
	"strings"
	"testing"
)

func TestParameterShardAppliesPushesUntilFinished(t *testing.T) {
	shard := newParamShard(0, 1, 3, 2)
	ps := &psRPC{shard: shard}
	var push PushReply
	if err := ps.Push(PushArgs{Task: "worker/0", Features: 3, Gradient: []float64{1, 2, 3}, LR: 0.5, SquaredError: 8, Count: 2}, &push); err != nil {
		t.Fatal(err)
	}
	if err := ps.Push(PushArgs{Task: "worker/1", Features: 3, Gradient: []float64{1, 0, 0}, LR: 1, SquaredError: 2, Count: 3}, &push); err != nil {
		t.Fatal(err)
	}
	if push.Step != 2 || push.Loss != 2 || push.Done {
		t.Errorf("after two pushes: %+v, want step 2, loss (8+2)/(2+3) = 2, not done", push)
	}
	var pull PullReply
	ps.Pull(PullArgs{Task: "worker/0", Features: 3}, &pull)
	if want := []float64{-1.5, -1, -1.5}; !slices.Equal(pull.Weights, want) {
		t.Errorf("weights %v, want %v", pull.Weights, want)
	}

	var finish FinishReply
	ps.Finish(FinishArgs{Task: "worker/0"}, &finish)
	ps.Push(PushArgs{Task: "worker/1", Features: 3, Gradient: []float64{9, 9, 9}, LR: 1}, &push)
	if !push.Done || push.Step != 2 {
		t.Errorf("a push after the finish: %+v, want done and the step still 2", push)
	}
	ps.Pull(PullArgs{Task: "worker/1", Features: 3}, &pull)
	if !slices.Equal(pull.Weights, finish.Weights) {
		t.Errorf("weights moved after the finish: %v, then %v", finish.Weights, pull.Weights)
	}
	select {
	case <-shard.allToldCh:
	default:
		t.Error("both workers have been told training is over, but the shard still waits")
	}
}

func TestParameterShardWaitsUntilEveryTrainerIsTold(t *testing.T) {
	shard := newParamShard(1, 2, 4, 3)
	ps := &psRPC{shard: shard}
	var finish FinishReply
	ps.Finish(FinishArgs{Task: "chief/0"}, &finish)
	if finish.Start != 2 || finish.End != 4 {
		t.Errorf("shard 1 of 2 holds [%d, %d), want [2, 4)", finish.Start, finish.End)
	}
	var pull PullReply
	ps.Pull(PullArgs{Task: "worker/0", Features: 4}, &pull)
	ps.Pull(PullArgs{Task: "worker/0", Features: 4}, &pull) // told twice counts once
	select {
	case <-shard.allToldCh:
		t.Fatal("worker/1 has not been told, yet the shard considers everyone told")
	default:
	}
	ps.Pull(PullArgs{Task: "worker/1", Features: 4}, &pull)
	select {
	case <-shard.allToldCh:
	default:
		t.Error("all three trainers have been told, but the shard still waits")
	}
}

func TestParameterShardRejectsMismatchedFeatures(t *testing.T) {
	shard := newParamShard(0, 1, 4, 1)
	ps := &psRPC{shard: shard}
	err := ps.Pull(PullArgs{Task: "worker/0", Features: 5}, &PullReply{})
	if err == nil || !strings.Contains(err.Error(), "--features") {
		t.Errorf("err = %v, want one naming --features", err)
	}
	if err := ps.Push(PushArgs{Task: "worker/0", Features: 4, Gradient: []float64{1}}, &PushReply{}); err == nil {
		t.Error("a gradient of the wrong length was accepted")
	}
	if shard.step != 0 || slices.ContainsFunc(shard.weights, func(w float64) bool { return w != 0 }) {
		t.Errorf("a rejected push changed the shard: step %d, weights %v", shard.step, shard.weights)
	}
}
