package local

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/trainstep/trainstep/pkg/apis/trainstep/v1alpha1"
	"github.com/trainstep/trainstep/pkg/policy"
	"github.com/trainstep/trainstep/pkg/result"
)

// planned builds the backend of job without starting anything.
func planned(t *testing.T, job *v1alpha1.TrainJob) (*backend, *observer.ObservedLogs) {
	t.Helper()
	core, logs := observer.New(zap.WarnLevel)
	opts := Options{Job: job, Logger: zap.New(core), Environ: []string{"PATH=" + os.Getenv("PATH"), "HOME=/home/me"}}
	opts.setDefaults()
	b, err := newBackend(opts, t.TempDir())
	if err != nil {
		t.Fatalf("planning: %v", err)
	}
	return b, logs
}

// envOf reads a replica's environment as the process sees it: the last
// of duplicate names wins.
func envOf(t *testing.T, b *backend, id policy.ReplicaID) map[string]string {
	t.Helper()
	r := b.byID[id]
	if r == nil {
		t.Fatalf("no replica %s", id)
	}
	env := map[string]string{}
	for _, kv := range r.env {
		k, v, _ := strings.Cut(kv, "=")
		env[k] = v
	}
	return env
}

const pytorchJob = `
apiVersion: trainstep.dev/v1alpha1
kind: TrainJob
metadata: {name: ddp, namespace: research}
spec:
  framework: pytorch
  replicaSpecs:
    Master:
      replicas: 1
      template:
        spec:
          containers:
          - name: pytorch
            image: any
            command: [train, --rank=$(RANK), --home=$$(HOME)]
            env:
            - {name: POD, valueFrom: {fieldRef: {fieldPath: metadata.name}}}
            - {name: NS, valueFrom: {fieldRef: {fieldPath: metadata.namespace}}}
            - {name: IP, valueFrom: {fieldRef: {fieldPath: status.podIP}}}
            - {name: TYPE_LABEL, valueFrom: {fieldRef: {fieldPath: "metadata.labels['trainstep.dev/replica-type']"}}}
            - {name: GREETING, value: hello-$(POD)}
            - {name: TOKEN, valueFrom: {secretKeyRef: {name: creds, key: token}}}
    Worker:
      replicas: 2
      template:
        spec:
          containers:
          - name: pytorch
            image: any
            command: [train]
`

func TestPyTorchReplicasReachTheMasterOnItsLocalPort(t *testing.T) {
	b, _ := planned(t, loadJob(t, strings.ReplaceAll(pytorchJob, "[train", "[sh")))
	master := envOf(t, b, master0)
	masterPort := master["MASTER_PORT"]
	if _, err := strconv.Atoi(masterPort); err != nil || masterPort == "23456" {
		t.Fatalf("master's MASTER_PORT = %q, want its own free local port", masterPort)
	}
	for _, id := range []policy.ReplicaID{master0, worker0, worker1} {
		env := envOf(t, b, id)
		for name, want := range map[string]string{
			"MASTER_ADDR": "127.0.0.1", "PET_MASTER_ADDR": "127.0.0.1",
			"MASTER_PORT": masterPort, "PET_MASTER_PORT": masterPort, "WORLD_SIZE": "3",
		} {
			if env[name] != want {
				t.Errorf("%s: %s = %q, want %q", id, name, env[name], want)
			}
		}
	}
	if got := envOf(t, b, worker1)["RANK"]; got != "2" {
		t.Errorf("Worker/1 RANK = %q, want 2", got)
	}
}

func TestEnvFromThePodIsResolvedLocally(t *testing.T) {
	b, warnings := planned(t, loadJob(t, strings.ReplaceAll(pytorchJob, "[train", "[sh")))
	env := envOf(t, b, master0)
	want := map[string]string{
		"POD": "ddp-master-0", "NS": "research", "IP": "127.0.0.1", "TYPE_LABEL": "master",
		"GREETING": "hello-ddp-master-0", "HOME": "/home/me",
	}
	for name, value := range want {
		if env[name] != value {
			t.Errorf("%s = %q, want %q", name, env[name], value)
		}
	}
	if _, set := env["TOKEN"]; set {
		t.Errorf("TOKEN from a Secret is set to %q; a Secret does not exist locally", env["TOKEN"])
	}
	found := false
	for _, w := range warnings.All() {
		if strings.Contains(w.Message, "spec.replicaSpecs.Master.template.spec.containers[0].env[5].valueFrom") && strings.Contains(w.Message, "TOKEN") {
			found = true
		}
	}
	if !found {
		t.Errorf("no warning names the Secret variable's field; warnings: %v", warnings.All())
	}
}

func TestCommandAndArgsExpandContainerVariables(t *testing.T) {
	b, _ := planned(t, loadJob(t, strings.ReplaceAll(pytorchJob, "[train", "[sh")))
	want := []string{"sh", "--rank=0", "--home=$(HOME)"}
	if diff := cmp.Diff(want, b.byID[master0].argv); diff != "" {
		t.Errorf("argv (-want +got):\n%s", diff)
	}
}

func TestEveryReplicaHasItsOwnTerminationMessageFile(t *testing.T) {
	b, _ := planned(t, loadJob(t, strings.ReplaceAll(pytorchJob, "[train", "[sh")))
	seen := map[string]policy.ReplicaID{}
	for _, id := range []policy.ReplicaID{master0, worker0, worker1} {
		path := envOf(t, b, id)[EnvTerminationMessagePath]
		if path == "" {
			t.Fatalf("%s has no %s", id, EnvTerminationMessagePath)
		}
		if other, dup := seen[path]; dup {
			t.Errorf("%s and %s share termination message file %s", id, other, path)
		}
		seen[path] = id
	}
}

func TestTFConfigListsEveryReplicaAtItsOwnLocalPort(t *testing.T) {
	job := loadJob(t, shellJob("tf", "", shellReplicas{"PS", 1, "Never", "true", ""}, shellReplicas{"Worker", 2, "Never", "true", ""}))
	b, _ := planned(t, job)
	type tfConfig struct {
		Cluster map[string][]string
		Task    struct {
			Type  string
			Index int
		}
	}
	var first tfConfig
	for i, id := range []policy.ReplicaID{ps0, worker0, worker1} {
		var cfg tfConfig
		if err := json.Unmarshal([]byte(envOf(t, b, id)["TF_CONFIG"]), &cfg); err != nil {
			t.Fatalf("%s TF_CONFIG: %v", id, err)
		}
		if i == 0 {
			first = cfg
		}
		if diff := cmp.Diff(first.Cluster, cfg.Cluster); diff != "" {
			t.Errorf("%s sees another cluster than PS/0 (-ps +this):\n%s", id, diff)
		}
		if cfg.Task.Type != strings.ToLower(string(id.Type)) || cfg.Task.Index != id.Index {
			t.Errorf("%s TF_CONFIG task = %+v", id, cfg.Task)
		}
		// The variable TF_CONFIG is expanded from, read from the job's
		// cluster ConfigMap as the kubelet would, names the same local addresses.
		var cluster map[string][]string
		if err := json.Unmarshal([]byte(envOf(t, b, id)["TRAINSTEP_TF_CLUSTER"]), &cluster); err != nil {
			t.Fatalf("%s TRAINSTEP_TF_CLUSTER: %v", id, err)
		}
		if diff := cmp.Diff(cfg.Cluster, cluster); diff != "" {
			t.Errorf("%s TRAINSTEP_TF_CLUSTER is not TF_CONFIG's cluster (-TF_CONFIG +variable):\n%s", id, diff)
		}
	}
	seen := map[string]bool{}
	for _, addrs := range first.Cluster {
		for _, addr := range addrs {
			if !strings.HasPrefix(addr, "127.0.0.1:") || seen[addr] {
				t.Errorf("cluster address %q is not a distinct 127.0.0.1 address (cluster %v)", addr, first.Cluster)
			}
			seen[addr] = true
		}
	}
	if len(seen) != 3 {
		t.Errorf("cluster has %d addresses, want 3: %v", len(seen), first.Cluster)
	}
}

func TestJobsThatCannotRunHereAreInvalidAndNameTheField(t *testing.T) {
	noCommand := `
apiVersion: trainstep.dev/v1alpha1
kind: TrainJob
metadata: {name: nocmd}
spec:
  framework: tensorflow
  replicaSpecs:
    Worker:
      replicas: 2
      template:
        spec:
          containers:
          - {name: sidecar, image: busybox, command: [sleep, "1"]}
          - {name: tensorflow, image: tensorflow/tensorflow, args: [train.py]}
`
	cases := []struct {
		name, manifest string
		wantField      string
	}{
		{"image without command", noCommand, "spec.replicaSpecs.Worker.template.spec.containers[1].command: Required value"},
		{"command not on this machine", shellJob("gone", "", shellReplicas{"Worker", 1, "Never", "true", ""}), ""},
	}
	cases[1].manifest = strings.Replace(cases[1].manifest, "[sh,", "[no-such-command-on-this-machine,", 1)
	cases[1].wantField = `spec.replicaSpecs.Worker.template.spec.containers[0].command[0]: Invalid value: "no-such-command-on-this-machine"`
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := runJob(t, t.Context(), loadJob(t, tc.manifest), nil)
			if result.PhaseOf(r.err) != result.PhaseInvalid {
				t.Fatalf("error = %v, want an Invalid error", r.err)
			}
			if !strings.Contains(r.err.Error(), tc.wantField) {
				t.Errorf("error %q does not name %q", r.err, tc.wantField)
			}
			if n := strings.Count(r.err.Error(), "\n") + 1; n != 1 {
				t.Errorf("error has %d lines, want one per replica type:\n%v", n, r.err)
			}
			if started := r.logs.FilterMessage("replica started").Len(); started != 0 {
				t.Errorf("%d processes were started for an invalid job", started)
			}
			var re *result.Error
			if !errors.As(r.err, &re) || re.Reason != result.ReasonInvalidSpec {
				t.Errorf("reason = %v, want %s", r.err, result.ReasonInvalidSpec)
			}
		})
	}
}

const mpiJob = `
apiVersion: trainstep.dev/v1alpha1
kind: TrainJob
metadata: {name: pi}
spec:
  framework: mpi
  slotsPerWorker: 3
  replicaSpecs:
    Launcher:
      replicas: 1
      template:
        spec:
          containers:
          - {name: launcher, image: mpi, command: [mpirun, --hostfile, /etc/mpi/hostfile, -np, "6", pi]}
    Worker:
      replicas: 2
      template:
        spec:
          containers:
          - {name: worker, image: mpi}
`

func TestMPIWorkersAreSlotsOfALocalHostfile(t *testing.T) {
	job := loadJob(t, strings.Replace(mpiJob, "[mpirun,", "[sh,", 1))
	b, _ := planned(t, job)
	launcher := b.byID[policy.ReplicaID{Type: v1alpha1.ReplicaTypeLauncher, Index: 0}]
	if launcher == nil || launcher.slot {
		t.Fatal("the launcher must be a process")
	}
	for _, id := range []policy.ReplicaID{worker0, worker1} {
		if r := b.byID[id]; r == nil || !r.slot || len(r.argv) != 0 {
			t.Errorf("%s must be a slot without a process, got %+v", id, r)
		}
	}
	env := envOf(t, b, launcher.id)
	hostfile := env["OMPI_MCA_orte_default_hostfile"]
	if hostfile == "" || strings.HasPrefix(hostfile, "/etc/mpi") {
		t.Fatalf("OMPI_MCA_orte_default_hostfile = %q, want the local hostfile", hostfile)
	}
	content, err := os.ReadFile(hostfile)
	if err != nil {
		t.Fatal(err)
	}
	if string(content) != "localhost slots=6\n" {
		t.Errorf("hostfile = %q, want %q (2 workers × 3 slots)", content, "localhost slots=6\n")
	}
	if want := []string{"sh", "--hostfile", hostfile, "-np", "6", "pi"}; !cmp.Equal(want, launcher.argv) {
		t.Errorf("argv = %q, want the hostfile path rewritten: %q", launcher.argv, want)
	}
	if filepath.Dir(hostfile) != filepath.Dir(envOf(t, b, launcher.id)[EnvTerminationMessagePath])+"/mpi" {
		t.Errorf("hostfile %s is not in the run's own directory", hostfile)
	}
	_, rootAllowed := env["OMPI_ALLOW_RUN_AS_ROOT"]
	if asRoot := os.Geteuid() == 0; rootAllowed != asRoot || (asRoot && env["OMPI_ALLOW_RUN_AS_ROOT_CONFIRM"] != "1") {
		t.Errorf("running as root: %v, but OMPI_ALLOW_RUN_AS_ROOT set: %v (confirm %q)", asRoot, rootAllowed, env["OMPI_ALLOW_RUN_AS_ROOT_CONFIRM"])
	}
}

func TestExpand(t *testing.T) {
	vars := map[string]string{"A": "1", "B": "two"}
	cases := map[string]string{
		"$(A)-$(B)":  "1-two",
		"$$(A)":      "$(A)",
		"$(UNKNOWN)": "$(UNKNOWN)",
		"$(A":        "$(A",
		"cost $5":    "cost $5",
		"$":          "$",
		"$$$(A)":     "$1",
	}
	for in, want := range cases {
		if got := expand(in, lookupIn(vars)); got != want {
			t.Errorf("expand(%q) = %q, want %q", in, got, want)
		}
	}
}
