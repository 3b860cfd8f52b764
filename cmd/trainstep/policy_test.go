package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// policyJob is a valid TensorFlow job whose Worker template the cases below
// change, in the file or through --set.
const policyJob = `apiVersion: trainstep.dev/v1alpha1
kind: TrainJob
metadata: {name: mnist, namespace: team-a}
spec:
  framework: tensorflow
  replicaSpecs:
    Worker:
      replicas: 2
      template:
        spec:
          containers: [{name: tensorflow, image: example.com/mnist:1}]
`

const workerPod = "spec.replicaSpecs.Worker.template.spec"

// Each field that would let a replica reach beyond its pod is refused by
// validate with its path and exit 11, whether it is in the file or arrives
// through --set, and accepted with --allow-privileged.
func TestReplicaPolicyRefusesHostAccess(t *testing.T) {
	cases := []struct {
		name, set, path string
	}{
		{"privileged", workerPod + ".containers[0].securityContext={privileged: true}", workerPod + ".containers[0].securityContext.privileged"},
		{"hostPID", workerPod + ".hostPID=true", workerPod + ".hostPID"},
		{"hostNetwork", workerPod + ".hostNetwork=true", workerPod + ".hostNetwork"},
		{"hostIPC", workerPod + ".hostIPC=true", workerPod + ".hostIPC"},
		{"hostPath", workerPod + ".volumes=[{name: root, hostPath: {path: /}}]", workerPod + ".volumes[0].hostPath"},
		{"nodeName", workerPod + ".nodeName=node-1", workerPod + ".nodeName"},
		{"capability", workerPod + ".containers[0].securityContext={capabilities: {add: [NET_BIND_SERVICE, SYS_ADMIN]}}", workerPod + ".containers[0].securityContext.capabilities.add[1]"},
		{"hostPort", workerPod + ".containers[0].ports=[{containerPort: 2222, hostPort: 2222}]", workerPod + ".containers[0].ports[0].hostPort"},
		{"init container", workerPod + ".initContainers=[{name: init, image: busybox:1, securityContext: {privileged: true}}]", workerPod + ".initContainers[0].securityContext.privileged"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			viaSet := runCLI(t, "", map[string]string{"job.yaml": policyJob}, "validate", "-f", "@job.yaml", "--set", tc.set)
			if viaSet.code != 11 || !strings.Contains(viaSet.stderr, tc.path+": Forbidden") {
				t.Errorf("through --set: exit %d, stderr %q; want 11 naming %s", viaSet.code, viaSet.stderr, tc.path)
			}
			if !strings.Contains(viaSet.stderr, "--allow-privileged") {
				t.Errorf("the error does not name the flag that allows it: %q", viaSet.stderr)
			}

			inFile := runCLI(t, "", map[string]string{"job.yaml": policyJob}, "render", "-f", "@job.yaml", "--set", tc.set, "--allow-privileged")
			if inFile.code != 0 {
				t.Fatalf("with --allow-privileged: exit %d, stderr %q", inFile.code, inFile.stderr)
			}
			// The rendered job, fed back as a file, is refused the same way.
			written := runCLI(t, "", map[string]string{"job.yaml": policyJob}, "convert", "-f", "@job.yaml", "--set", tc.set, "--allow-privileged")
			if written.code != 0 {
				t.Fatalf("convert: exit %d, stderr %q", written.code, written.stderr)
			}
			fromFile := runCLI(t, "", map[string]string{"job.yaml": written.stdout}, "validate", "@job.yaml")
			if fromFile.code != 11 || !strings.Contains(fromFile.stderr, tc.path+": Forbidden") {
				t.Errorf("in the file: exit %d, stderr %q; want 11 naming %s", fromFile.code, fromFile.stderr, tc.path)
			}
		})
	}
}

// serviceAccountName is held to the list the template author gives; the
// namespace's default ServiceAccount is always allowed, and
// --allow-privileged does not lift the list.
func TestReplicaPolicyServiceAccountAllowList(t *testing.T) {
	files := map[string]string{"job.yaml": policyJob}
	set := workerPod + ".serviceAccountName="
	cases := []struct {
		name     string
		args     []string
		wantCode int
	}{
		{"the step's own, no list", []string{"--set", set + "trainstep"}, 11},
		{"the step's own, privileged", []string{"--set", set + "trainstep", "--allow-privileged"}, 11},
		{"another, not listed", []string{"--set", set + "trainstep", "--allowed-service-accounts", "reader,writer"}, 11},
		{"listed", []string{"--set", set + "writer", "--allowed-service-accounts", "reader,writer"}, 0},
		{"listed twice", []string{"--set", set + "reader", "--allowed-service-accounts", "writer", "--allowed-service-accounts", "reader"}, 0},
		{"default", []string{"--set", set + "default"}, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := runCLI(t, "", files, append([]string{"validate", "@job.yaml"}, tc.args...)...)
			if got.code != tc.wantCode {
				t.Fatalf("exit %d, want %d; stderr %q", got.code, tc.wantCode, got.stderr)
			}
			if tc.wantCode != 0 && !strings.Contains(got.stderr, workerPod+`.serviceAccountName: Forbidden: ServiceAccount "trainstep"`) {
				t.Errorf("stderr %q does not name the field and the ServiceAccount", got.stderr)
			}
		})
	}
}

// A Kubeflow manifest's errors name its own fields, and run refuses the job
// before connecting to any cluster: its outputs say Invalid.
func TestReplicaPolicyInKubeflowTermsAndInRun(t *testing.T) {
	outputs := t.TempDir()
	got := runCLI(t, "", map[string]string{"tfjob.yaml": kubeflowTFJob, "kubeconfig": "not a kubeconfig"},
		"run", "-f", "@tfjob.yaml", "--kubeconfig", "@kubeconfig", "--outputs-dir", outputs,
		"--set", "spec.tfReplicaSpecs.Worker.template.spec.hostNetwork=true")
	if got.code != 11 || !strings.Contains(got.stderr, "spec.tfReplicaSpecs.Worker.template.spec.hostNetwork: Forbidden") {
		t.Fatalf("exit %d, stderr %q; want 11 naming spec.tfReplicaSpecs.Worker.template.spec.hostNetwork", got.code, got.stderr)
	}
	phase, err := os.ReadFile(filepath.Join(outputs, "phase"))
	if err != nil || string(phase) != "Invalid" {
		t.Errorf("outputs phase %q (%v), want Invalid", phase, err)
	}
}

// render shows the job's NetworkPolicy, as run creates it, and leaves it out
// with --network-policy=false.
func TestRenderShowsTheNetworkPolicyUnlessOptedOut(t *testing.T) {
	files := map[string]string{"job.yaml": policyJob}
	with := runCLI(t, "", files, "render", "@job.yaml")
	without := runCLI(t, "", files, "render", "@job.yaml", "--network-policy=false")
	if with.code != 0 || without.code != 0 {
		t.Fatalf("exit %d and %d, stderr %q %q", with.code, without.code, with.stderr, without.stderr)
	}
	if !strings.HasPrefix(with.stdout, "apiVersion: networking.k8s.io/v1\nkind: NetworkPolicy\n") {
		t.Errorf("the render does not start with the NetworkPolicy:\n%s", with.stdout)
	}
	if strings.Contains(without.stdout, "NetworkPolicy") {
		t.Errorf("--network-policy=false still shows a NetworkPolicy:\n%s", without.stdout)
	}
}
