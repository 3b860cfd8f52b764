package executor_test

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	"github.com/trainstep/trainstep/pkg/result"
	"github.com/trainstep/trainstep/test/cluster"
)

// operatorEnv is the first container's variables of pod that names holds,
// in order: the ones the framework's operator sets.
func operatorEnv(pod corev1.Pod, names map[string]bool) []corev1.EnvVar {
	var out []corev1.EnvVar
	for _, v := range pod.Spec.Containers[0].Env {
		if names[v.Name] {
			out = append(out, v)
		}
	}
	return out
}

func podNamed(t *testing.T, pods []corev1.Pod, name string) corev1.Pod {
	t.Helper()
	for _, p := range pods {
		if p.Name == name {
			return p
		}
	}
	t.Fatalf("no pod %s", name)
	return corev1.Pod{}
}

// A Kubeflow PaddleJob runs on the cluster, in parameter-server and in
// collective mode, with Training Operator v1.9's env on every replica, a
// Service per replica exposing its "master" port, and the operator's
// success rule: the Masters decide in parameter-server mode, every worker
// in collective mode.
func TestKubeflowPaddleJobRunsWithTheOperatorsEnv(t *testing.T) {
	t.Parallel()
	c := cluster.Get(t)
	paddleNames := map[string]bool{"PYTHONUNBUFFERED": true, "PADDLE_JOB_ID": true, "PADDLE_NNODES": true,
		"POD_IP_DUMMY": true, "PADDLE_MASTER": true, "PADDLE_SERVER_NUM": true, "PADDLE_TRAINER_NUM": true}
	env := func(pairs ...string) []corev1.EnvVar {
		var out []corev1.EnvVar
		for i := 0; i < len(pairs); i += 2 {
			if pairs[i] == "POD_IP_DUMMY" {
				out = append(out, corev1.EnvVar{Name: "POD_IP_DUMMY", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "status.podIP"}}})
				continue
			}
			out = append(out, corev1.EnvVar{Name: pairs[i], Value: pairs[i+1]})
		}
		return out
	}
	replica := func(rt string, n int, exitIn string) string {
		return fmt.Sprintf(`    %s:
      replicas: %d
      template:
        metadata:
          annotations: {%q: %s, %q: "0"}
        spec:
          containers: [{name: paddle, image: registry.example/paddle:2.6, command: [python, -m, paddle.distributed.launch, train.py]}]
`, rt, n, exitAfter, exitIn, exitCode)
	}
	for _, tc := range []struct {
		name, job string
		// restart is the pods' restart policy: PaddleJob's OnFailure, or
		// Never where the job restarts as a whole (collective mode).
		restart  corev1.RestartPolicy
		replicas string
		want     map[string][]corev1.EnvVar
	}{
		{"parameter-server mode", "ctr", corev1.RestartPolicyOnFailure, replica("Master", 1, "3s") + replica("Worker", 2, "2s"), map[string][]corev1.EnvVar{
			"ctr-master-0": env("PYTHONUNBUFFERED", "1", "PADDLE_JOB_ID", "ctr", "PADDLE_NNODES", "3", "POD_IP_DUMMY", "", "PADDLE_MASTER", "$(POD_IP_DUMMY):36543", "PADDLE_SERVER_NUM", "1"),
			"ctr-worker-0": env("PYTHONUNBUFFERED", "1", "PADDLE_JOB_ID", "ctr", "PADDLE_NNODES", "3", "PADDLE_MASTER", "ctr-master-0:36543", "PADDLE_TRAINER_NUM", "1"),
			"ctr-worker-1": env("PYTHONUNBUFFERED", "1", "PADDLE_JOB_ID", "ctr", "PADDLE_NNODES", "3", "PADDLE_MASTER", "ctr-master-0:36543", "PADDLE_TRAINER_NUM", "1"),
		}},
		{"collective mode", "resnet", corev1.RestartPolicyNever, replica("Worker", 2, "2s"), map[string][]corev1.EnvVar{
			"resnet-worker-0": env("PYTHONUNBUFFERED", "1", "PADDLE_JOB_ID", "resnet", "PADDLE_NNODES", "2", "POD_IP_DUMMY", "", "PADDLE_MASTER", "$(POD_IP_DUMMY):36543"),
			"resnet-worker-1": env("PYTHONUNBUFFERED", "1", "PADDLE_JOB_ID", "resnet", "PADDLE_NNODES", "2", "PADDLE_MASTER", "resnet-worker-0:36543"),
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ns := c.Namespace(t)
			// cleanPodPolicy None keeps the pods to read back.
			manifest := "apiVersion: kubeflow.org/v1\nkind: PaddleJob\nmetadata: {name: " + tc.job + "}\nspec:\n  runPolicy: {cleanPodPolicy: None}\n  paddleReplicaSpecs:\n" + tc.replicas
			out := runJob(t, c, ns, []byte(manifest))
			if out.err != nil || out.res.Phase != result.PhaseSucceeded {
				t.Fatalf("run: phase %s (%s), err %v; stderr:\n%s", out.res.Phase, out.res.Message, out.err, out.stderr)
			}
			pods := listPods(t, c, ns, tc.job)
			if len(pods) != len(tc.want) {
				t.Fatalf("%d pods, want %d", len(pods), len(tc.want))
			}
			for name, want := range tc.want {
				pod := podNamed(t, pods, name)
				if diff := cmp.Diff(want, operatorEnv(pod, paddleNames)); diff != "" {
					t.Errorf("%s: Paddle's env (-operator +trainstep):\n%s", name, diff)
				}
				if pod.Spec.RestartPolicy != tc.restart {
					t.Errorf("%s: restartPolicy %s, want %s", name, pod.Spec.RestartPolicy, tc.restart)
				}
			}
			services := map[string]int32{}
			for _, svc := range listServices(t, c, ns, tc.job) {
				for _, p := range svc.Spec.Ports {
					if p.Name == "master" {
						services[svc.Name] = p.Port
					}
				}
			}
			for name := range tc.want {
				if services[name] != 36543 {
					t.Errorf("Service %s exposes master on %d, want a Service per replica on 36543 (services %v)", name, services[name], services)
				}
			}
		})
	}
}

// An elastic PyTorchJob starts as Training Operator starts it: its
// Worker.replicas workers, not maxReplicas, and WORLD_SIZE counting the
// replicas it declares times nprocPerNode; PET_NNODES is the elastic
// range. The Master's success ends it.
func TestKubeflowElasticPyTorchJobStartsItsReplicasWithTheOperatorsEnv(t *testing.T) {
	t.Parallel()
	c := cluster.Get(t)
	ns := c.Namespace(t)
	manifest := fmt.Sprintf(`apiVersion: kubeflow.org/v1
kind: PyTorchJob
metadata: {name: el}
spec:
  nprocPerNode: "8"
  elasticPolicy: {minReplicas: 2, maxReplicas: 4, rdzvBackend: c10d}
  runPolicy: {cleanPodPolicy: None}
  pytorchReplicaSpecs:
    Master:
      template:
        metadata:
          annotations: {%q: 3s, %q: "0"}
        spec:
          containers: [{name: pytorch, image: registry.example/ddp:1, command: [torchrun, train.py]}]
    Worker:
      replicas: 2
      template:
        spec:
          containers: [{name: pytorch, image: registry.example/ddp:1, command: [torchrun, train.py]}]
`, exitAfter, exitCode)
	out := runJob(t, c, ns, []byte(manifest))
	if out.err != nil || out.res.Phase != result.PhaseSucceeded {
		t.Fatalf("run: phase %s (%s), err %v; stderr:\n%s", out.res.Phase, out.res.Message, out.err, out.stderr)
	}
	pods := listPods(t, c, ns, "el")
	var names []string
	for _, p := range pods {
		names = append(names, p.Name)
	}
	if diff := cmp.Diff([]string{"el-master-0", "el-worker-0", "el-worker-1"}, names); diff != "" {
		t.Fatalf("pods (-Training Operator's +trainstep's):\n%s", diff)
	}
	torch := map[string]bool{"WORLD_SIZE": true, "RANK": true, "PET_NODE_RANK": true, "PET_NPROC_PER_NODE": true,
		"PET_NNODES": true, "PET_RDZV_ENDPOINT": true, "PET_RDZV_BACKEND": true, "MASTER_ADDR": true, "MASTER_PORT": true}
	want := []corev1.EnvVar{
		{Name: "MASTER_PORT", Value: "23456"}, {Name: "MASTER_ADDR", Value: "el-master-0"},
		{Name: "WORLD_SIZE", Value: "24"}, {Name: "RANK", Value: "2"}, {Name: "PET_NODE_RANK", Value: "2"},
		{Name: "PET_NPROC_PER_NODE", Value: "8"},
		{Name: "PET_RDZV_ENDPOINT", Value: "el-worker-0:23456"}, {Name: "PET_RDZV_BACKEND", Value: "c10d"}, {Name: "PET_NNODES", Value: "2:4"},
	}
	if diff := cmp.Diff(want, operatorEnv(podNamed(t, pods, "el-worker-1"), torch)); diff != "" {
		t.Errorf("worker 1's env (-Training Operator's +trainstep's):\n%s", diff)
	}
}
