package main

import (
	"fmt"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/trainstep/trainstep/cmd/demo-trainer/internal/trainer"
)

// fastArgs keep the end-to-end runs short while still pacing the steps.
var fastArgs = []string{"--step-delay=2ms"}

func TestSingleProcessTrains(t *testing.T) {
	cases := []struct {
		name      string
		env       []string
		args      []string
		wantSteps int
	}{
		{name: "defaults", wantSteps: trainer.DefaultSettings().Steps},
		{name: "steps from the environment", env: []string{"DEMO_STEPS=50"}, wantSteps: 50},
		{name: "a flag beats the environment", env: []string{"DEMO_STEPS=50"}, args: []string{"--steps=120"}, wantSteps: 120},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := startReplica(t, "single", tc.env, append(slices.Clone(fastArgs), tc.args...)...)
			r.mustSucceed(t)
			if m := checkDecidingReplica(t, r, trainer.DefaultSettings()); m.Steps != tc.wantSteps {
				t.Errorf("trained %d steps, want %d", m.Steps, tc.wantSteps)
			}
		})
	}
}

func TestParameterServerTopology(t *testing.T) {
	cases := []struct {
		name          string
		ps, workers   int
		chief         bool
		deciderPrefix string
	}{
		{name: "1 ps, 2 workers: worker 0 decides", ps: 1, workers: 2, deciderPrefix: "worker-0"},
		{name: "2 ps, chief and 2 workers: the chief decides", ps: 2, workers: 2, chief: true, deciderPrefix: "chief-0"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cluster := map[string][]string{"ps": freeAddresses(t, tc.ps), "worker": freeAddresses(t, tc.workers)}
			if tc.chief {
				cluster["chief"] = freeAddresses(t, 1)
			}
			start := time.Now()
			// Training tasks first: they must keep retrying until the ps are up.
			var trainers []*replica
			for _, taskType := range []string{"chief", "worker"} {
				for i := range cluster[taskType] {
					trainers = append(trainers, startReplica(t, fmt.Sprintf("%s-%d", taskType, i), []string{tfConfig(t, cluster, taskType, i)}, fastArgs...))
				}
			}
			time.Sleep(300 * time.Millisecond)
			var servers []*replica
			for i := range cluster["ps"] {
				servers = append(servers, startReplica(t, fmt.Sprintf("ps-%d", i), []string{tfConfig(t, cluster, "ps", i)}, fastArgs...))
			}
			for _, r := range append(trainers, servers...) {
				r.mustSucceed(t)
			}
			t.Logf("every task exited 0 after %v", time.Since(start).Round(time.Millisecond))

			decider := trainers[0]
			if decider.name != tc.deciderPrefix {
				t.Fatalf("test setup: expected %s to decide, started %s first", tc.deciderPrefix, decider.name)
			}
			m := checkDecidingReplica(t, decider, trainer.DefaultSettings())
			if m.Steps < trainer.DefaultSettings().Steps {
				t.Errorf("training ended after %d global steps, before the %d asked for", m.Steps, trainer.DefaultSettings().Steps)
			}
			for _, r := range trainers[1:] {
				if !strings.Contains(r.out.String(), "training is over; exiting") {
					t.Errorf("%s did not learn from the ps that training was over:\n%s", r.name, r.out.String())
				}
				if len(r.steps()) == 0 {
					t.Errorf("%s never trained:\n%s", r.name, r.out.String())
				}
			}
			for _, r := range servers {
				if !strings.Contains(r.out.String(), "every training task knows") {
					t.Errorf("%s exited without telling every training task:\n%s", r.name, r.out.String())
				}
			}
		})
	}
}

func TestAllReduceTopology(t *testing.T) {
	for _, world := range []int{2, 4} {
		t.Run(fmt.Sprintf("%d ranks", world), func(t *testing.T) {
			port := strconv.Itoa(freePort(t))
			start := time.Now()
			ranks := make([]*replica, world)
			// Highest rank first: the others must keep retrying until rank 0 listens.
			for rank := world - 1; rank >= 0; rank-- {
				env := []string{"MASTER_ADDR=127.0.0.1", "MASTER_PORT=" + port, "RANK=" + strconv.Itoa(rank), "WORLD_SIZE=" + strconv.Itoa(world)}
				ranks[rank] = startReplica(t, fmt.Sprintf("rank-%d", rank), env, fastArgs...)
				time.Sleep(50 * time.Millisecond)
			}
			for _, r := range ranks {
				r.mustSucceed(t)
			}
			t.Logf("every rank exited 0 after %v", time.Since(start).Round(time.Millisecond))
			s := trainer.DefaultSettings()
			m := checkDecidingReplica(t, ranks[0], s)
			data, _ := trainer.Generate(s.Seed, s.Samples, s.Features)
			initial := data.Loss(make([]float64, s.Features))
			if first := ranks[0].steps()[0]; first.step != 1 || math.Abs(first.loss-initial) > 1e-5*initial {
				t.Errorf("rank 0 first logged step %d loss %v, want step 1 at the initial loss %v", first.step, first.loss, initial)
			}
			if m.Steps != trainer.DefaultSettings().Steps {
				t.Errorf("trained %d steps, want %d", m.Steps, trainer.DefaultSettings().Steps)
			}
			for _, r := range ranks[1:] {
				if !slices.Equal(r.steps(), ranks[0].steps()) {
					t.Errorf("%s logged different steps or losses than rank 0, so the ranks did not train the same model", r.name)
				}
				if _, err := os.Stat(r.metricsPath); err == nil {
					t.Errorf("%s wrote metrics; only rank 0 decides", r.name)
				}
			}
		})
	}
}

// Paddle's nodes are ranked by the rendezvous: the node that can listen on
// PADDLE_MASTER hosts it as rank 0 whatever its index; on one machine every
// node could, so the first to listen does, as one of Paddle's launchers
// would. Every node trains the same model and writes the metrics.
func TestPaddleTopology(t *testing.T) {
	for _, tc := range []struct {
		name  string
		roles []string // PADDLE_SERVER_NUM / PADDLE_TRAINER_NUM per node; "" collective
	}{
		{"collective", []string{"", "", ""}},
		{"parameter-server mode", []string{"PADDLE_SERVER_NUM=1", "PADDLE_TRAINER_NUM=1", "PADDLE_TRAINER_NUM=1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			master := "127.0.0.1:" + strconv.Itoa(freePort(t))
			nodes := make([]*replica, len(tc.roles))
			for i := len(nodes) - 1; i >= 0; i-- {
				env := []string{"PADDLE_MASTER=" + master, "PADDLE_NNODES=" + strconv.Itoa(len(nodes)), "PADDLE_JOB_ID=resnet", "PYTHONUNBUFFERED=1"}
				if tc.roles[i] != "" {
					env = append(env, tc.roles[i])
				}
				nodes[i] = startReplica(t, fmt.Sprintf("worker-%d", i), env, fastArgs...)
			}
			hosts := 0
			for _, n := range nodes {
				n.mustSucceed(t)
				if strings.Contains(n.out.String(), "hosting the rendezvous at "+master+" as rank 0") {
					hosts++
				}
			}
			if hosts != 1 {
				t.Errorf("%d nodes hosted the rendezvous, want 1", hosts)
			}
			s := trainer.DefaultSettings()
			first := checkDecidingReplica(t, nodes[0], s)
			for _, n := range nodes[1:] {
				if !slices.Equal(n.steps(), nodes[0].steps()) {
					t.Errorf("%s logged other steps or losses than worker-0: the nodes did not train one model", n.name)
				}
				if m := checkDecidingReplica(t, n, s); m.Loss != first.Loss || m.Steps != first.Steps {
					t.Errorf("%s's metrics %+v differ from worker-0's %+v", n.name, m, first)
				}
			}
		})
	}
}

func TestRestartedWorkerRejoinsParameterServer(t *testing.T) {
	cases := []struct {
		name   string
		victim int // worker index; worker 0 is the decider
	}{
		{name: "a worker", victim: 1},
		{name: "the deciding worker", victim: 0},
	}
	const steps = 400
	args := []string{"--step-delay=10ms", "--steps=" + strconv.Itoa(steps)}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cluster := map[string][]string{"ps": freeAddresses(t, 1), "worker": freeAddresses(t, 2)}
			ps := startReplica(t, "ps-0", []string{tfConfig(t, cluster, "ps", 0)}, args...)
			workers := []*replica{
				startReplica(t, "worker-0", []string{tfConfig(t, cluster, "worker", 0)}, args...),
				startReplica(t, "worker-1", []string{tfConfig(t, cluster, "worker", 1)}, args...),
			}
			victim := workers[tc.victim]
			before := victim.waitForStep(t, 60)
			victim.kill(t)
			time.Sleep(200 * time.Millisecond)
			victim.start(t, args...)
			for _, r := range append(workers, ps) {
				r.mustSucceed(t)
			}
			after := victim.steps()
			if len(after) == 0 {
				t.Fatalf("the restarted %s never trained:\n%s", victim.name, victim.out.String())
			}
			if after[0].step <= before.step {
				t.Errorf("the restarted %s started at global step %d, not after step %d where it was killed", victim.name, after[0].step, before.step)
			}
			data, _ := trainer.Generate(1, trainer.DefaultSettings().Samples, trainer.DefaultSettings().Features)
			if initial := data.Loss(make([]float64, trainer.DefaultSettings().Features)); after[0].loss > 0.1*initial {
				t.Errorf("the restarted %s started at loss %v, as if from scratch (initial %v)", victim.name, after[0].loss, initial)
			}
			s := trainer.DefaultSettings()
			s.Steps = steps
			checkDecidingReplica(t, workers[0], s)
		})
	}
}

func TestDeadRankFailsTheOtherRanks(t *testing.T) {
	const world = 3
	port := strconv.Itoa(freePort(t))
	ranks := make([]*replica, world)
	for rank := range world {
		env := []string{"MASTER_ADDR=127.0.0.1", "MASTER_PORT=" + port, "RANK=" + strconv.Itoa(rank), "WORLD_SIZE=" + strconv.Itoa(world)}
		ranks[rank] = startReplica(t, fmt.Sprintf("rank-%d", rank), env, "--steps=100000", "--step-delay=5ms")
	}
	ranks[2].waitForStep(t, 20)
	ranks[2].kill(t)
	for _, r := range ranks[:2] {
		if code := r.exitCode(t, 15*time.Second); code != exitFailed {
			t.Errorf("%s exited %d after rank 2 died, want %d; output:\n%s", r.name, code, exitFailed, r.out.String())
		}
		if !strings.Contains(r.out.String(), "all-reducing step") {
			t.Errorf("%s did not say the all-reduce failed:\n%s", r.name, r.out.String())
		}
	}
}
