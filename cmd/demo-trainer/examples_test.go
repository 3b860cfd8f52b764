package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/trainstep/trainstep/pkg/apis/trainstep/v1alpha1"
	"github.com/trainstep/trainstep/pkg/frameworks"
)

// loadExample reads one of the repository's example jobs, strictly, and
// checks it is a valid TrainJob once defaulted.
func loadExample(t *testing.T, name string) *v1alpha1.TrainJob {
	t.Helper()
	body, err := os.ReadFile(filepath.Join("..", "..", "workflows", "jobs", name))
	if err != nil {
		t.Fatal(err)
	}
	job := &v1alpha1.TrainJob{}
	if err := yaml.UnmarshalStrict(body, job); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	frameworks.SetDefaults(job)
	if errs := frameworks.Validate(job); len(errs) > 0 {
		t.Fatalf("%s is not a valid TrainJob: %v", name, errs.ToAggregate())
	}
	return job
}

// exampleArgs checks every replica runs the demo trainer in the
// framework's main container (Kubeflow's default names: "tensorflow",
// "pytorch") with the same arguments — so all replicas build the same
// dataset — and that the trainer accepts them.
func exampleArgs(t *testing.T, job *v1alpha1.TrainJob, container string) []string {
	t.Helper()
	var args []string
	for rt, spec := range job.Spec.ReplicaSpecs {
		containers := spec.Template.Spec.Containers
		if len(containers) != 1 || containers[0].Name != container {
			t.Fatalf("%s: want one container named %q", rt, container)
		}
		c := containers[0]
		if !slices.Equal(c.Command, []string{"demo-trainer"}) || !strings.HasPrefix(c.Image, "ghcr.io/trainstep/trainstep:") {
			t.Errorf("%s runs %v from %s", rt, c.Command, c.Image)
		}
		if args != nil && !slices.Equal(args, c.Args) {
			t.Errorf("%s has args %v, another replica type %v", rt, c.Args, args)
		}
		args = c.Args
	}
	if _, err := parseSettings(args, envFrom(nil), &bytes.Buffer{}); err != nil {
		t.Fatalf("the trainer rejects the example's args %v: %v", args, err)
	}
	// The checkpoint directory goes where the test says, not under /var/tmp.
	dir := t.TempDir()
	expanded := make([]string, len(args))
	for i, a := range args {
		if strings.HasPrefix(a, "--checkpoint-dir=") {
			a = "--checkpoint-dir=" + dir
		}
		expanded[i] = a
	}
	return expanded
}

func replicas(job *v1alpha1.TrainJob, rt v1alpha1.ReplicaType) int {
	if spec := job.Spec.ReplicaSpecs[rt]; spec != nil && spec.Replicas != nil {
		return int(*spec.Replicas)
	}
	return 0
}

// The examples run here with their own arguments but without the per-step
// sleep; the last --step-delay on the command line wins.
var noDelay = "--step-delay=0s"

func TestExampleParameterServerJobTrains(t *testing.T) {
	job := loadExample(t, "demo-ps.yaml")
	if job.Spec.Framework != v1alpha1.FrameworkTensorFlow || replicas(job, v1alpha1.ReplicaTypePS) != 1 || replicas(job, v1alpha1.ReplicaTypeWorker) != 2 {
		t.Fatalf("demo-ps.yaml should be TensorFlow with 1 PS and 2 workers")
	}
	args := append(exampleArgs(t, job, "tensorflow"), noDelay)
	cluster := map[string][]string{"ps": freeAddresses(t, 1), "worker": freeAddresses(t, 2)}
	var tasks []*replica
	for _, taskType := range []string{"ps", "worker"} {
		for i := range cluster[taskType] {
			tasks = append(tasks, startReplica(t, fmt.Sprintf("%s-%d", taskType, i), []string{tfConfig(t, cluster, taskType, i)}, args...))
		}
	}
	for _, r := range tasks {
		r.mustSucceed(t)
	}
	s, _ := parseSettings(args, envFrom(nil), &bytes.Buffer{})
	checkDecidingReplica(t, tasks[1], s)
}

func TestExampleAllReduceJobTrains(t *testing.T) {
	job := loadExample(t, "demo-allreduce.yaml")
	world := replicas(job, v1alpha1.ReplicaTypeMaster) + replicas(job, v1alpha1.ReplicaTypeWorker)
	if job.Spec.Framework != v1alpha1.FrameworkPyTorch || world != 4 {
		t.Fatalf("demo-allreduce.yaml should be PyTorch with 4 ranks, has %d", world)
	}
	args := append(exampleArgs(t, job, "pytorch"), noDelay)
	port := strconv.Itoa(freePort(t))
	ranks := make([]*replica, world)
	for rank := range world {
		env := []string{"MASTER_ADDR=127.0.0.1", "MASTER_PORT=" + port, "RANK=" + strconv.Itoa(rank), "WORLD_SIZE=" + strconv.Itoa(world)}
		ranks[rank] = startReplica(t, fmt.Sprintf("rank-%d", rank), env, args...)
	}
	for _, r := range ranks {
		r.mustSucceed(t)
	}
	s, _ := parseSettings(args, envFrom(nil), &bytes.Buffer{})
	checkDecidingReplica(t, ranks[0], s)
}
