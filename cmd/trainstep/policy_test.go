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
		{"privilege escalation", workerPod + ".containers[0].securityContext={allowPrivilegeEscalation: true}", workerPod + ".containers[0].securityContext.allowPrivilegeEscalation"},
		{"control-plane toleration", workerPod + ".tolerations=[{key: node-role.kubernetes.io/control-plane, operator: Exists, effect: NoSchedule}]", workerPod + ".tolerations[0].key"},
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

// policySettingsDir is the trainstep-policy ConfigMap as the kubelet mounts
// it: a file per key (symlinks into ..data) beside the ..data entries.
func policySettingsDir(t *testing.T, data map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	stamp := filepath.Join(dir, "..2026_01_01_00_00_00.000000001")
	if err := os.Mkdir(stamp, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Base(stamp), filepath.Join(dir, "..data")); err != nil {
		t.Fatal(err)
	}
	for key, value := range data {
		if err := os.WriteFile(filepath.Join(stamp, key), []byte(value), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(filepath.Join("..data", key), filepath.Join(dir, key)); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// What a replica may read of its namespace, where it may run and which
// keys it may carry: each refused by validate with exit 11 and its field,
// then allowed by the template author's flag, by the same setting in a
// --policy-file directory (the ConfigMap mounted) and in a YAML file (the
// ConfigMap's manifest).
func TestReplicaPolicyAllowLists(t *testing.T) {
	cases := []struct {
		name, set, path, flag, key, value string
	}{
		{"a Secret env var", workerPod + ".containers[0].env=[{name: HF_TOKEN, valueFrom: {secretKeyRef: {name: hf-token, key: token}}}]",
			workerPod + ".containers[0].env[0].valueFrom.secretKeyRef.name", "--allowed-secrets", "allowedSecrets", "hf-token"},
		{"another job's SSH key", workerPod + ".volumes=[{name: ssh, secret: {secretName: victim-ssh}}]",
			workerPod + ".volumes[0].secret.secretName", "--allowed-secrets", "allowedSecrets", "victim-*"},
		{"the namespace's credentials by envFrom", workerPod + ".containers[0].envFrom=[{secretRef: {name: artifact-store}}]",
			workerPod + ".containers[0].envFrom[0].secretRef.name", "--allowed-secrets", "allowedSecrets", "artifact-store"},
		{"an image pull secret", workerPod + ".imagePullSecrets=[{name: registry}]",
			workerPod + ".imagePullSecrets[0].name", "--allowed-secrets", "allowedSecrets", "registry"},
		{"a dataset claim", workerPod + ".volumes=[{name: data, persistentVolumeClaim: {claimName: datasets}}]",
			workerPod + ".volumes[0].persistentVolumeClaim.claimName", "--allowed-pvcs", "allowedPVCs", "datasets"},
		{"an nfs volume", workerPod + ".volumes=[{name: data, nfs: {server: nfs.example.com, path: /}}]",
			workerPod + ".volumes[0].nfs", "--allowed-volume-types", "allowedVolumeTypes", "nfs"},
		{"a ConfigMap", workerPod + ".volumes=[{name: cfg, configMap: {name: team-settings}}]",
			workerPod + ".volumes[0].configMap.name", "--allowed-configmaps", "allowedConfigMaps", "team-*"},
		{"a priority class by schedulingPolicy", "spec.runPolicy.schedulingPolicy={priorityClass: system-node-critical}",
			"spec.runPolicy.schedulingPolicy.priorityClass", "--allowed-priority-classes", "allowedPriorityClasses", "system-node-critical"},
		{"a runtime class", workerPod + ".runtimeClassName=kata",
			workerPod + ".runtimeClassName", "--allowed-runtime-classes", "allowedRuntimeClasses", "kata"},
		{"a scheduler", workerPod + ".schedulerName=my-scheduler",
			workerPod + ".schedulerName", "--allowed-schedulers", "allowedSchedulers", "my-scheduler"},
	}
	files := map[string]string{"job.yaml": policyJob}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			refused := runCLI(t, "", files, "validate", "@job.yaml", "--set", tc.set)
			if refused.code != 11 || !strings.Contains(refused.stderr, tc.path+": Forbidden") || !strings.Contains(refused.stderr, tc.flag) {
				t.Fatalf("exit %d, stderr %q; want 11 naming %s and %s", refused.code, refused.stderr, tc.path, tc.flag)
			}
			byFlag := runCLI(t, "", files, "validate", "@job.yaml", "--set", tc.set, tc.flag, tc.value)
			dir := policySettingsDir(t, map[string]string{tc.key: tc.value})
			byDir := runCLI(t, "", files, "validate", "@job.yaml", "--set", tc.set, "--policy-file", dir)
			manifest := "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: trainstep-policy}\ndata:\n  " + tc.key + ": \"" + tc.value + "\"\n"
			byYAML := runCLI(t, "", map[string]string{"job.yaml": policyJob, "policy.yaml": manifest}, "validate", "@job.yaml", "--set", tc.set, "--policy-file", "@policy.yaml")
			for how, got := range map[string]cliResult{"flag": byFlag, "directory": byDir, "YAML file": byYAML} {
				if got.code != 0 || got.stdout != "valid\n" {
					t.Errorf("allowed by the %s: exit %d, stderr %q", how, got.code, got.stderr)
				}
			}
		})
	}
}

// The rendered pods are held to PodSecurity baseline by Kubernetes' own
// checks, and to restricted with --pod-security; render refuses what
// validate refuses; the errors name the template's field.
func TestReplicaPolicyPodSecurity(t *testing.T) {
	files := map[string]string{"job.yaml": policyJob}
	cases := []struct {
		name  string
		args  []string
		field string
	}{
		{"SELinux spc_t", []string{"--set", workerPod + ".securityContext={seLinuxOptions: {type: spc_t}}"}, workerPod + ".securityContext.seLinuxOptions"},
		{"seccomp Unconfined", []string{"--set", workerPod + ".containers[0].securityContext={seccompProfile: {type: Unconfined}}"}, workerPod + ".containers[0].securityContext.seccompProfile.type"},
		{"AppArmor annotation", []string{"--set", "spec.replicaSpecs.Worker.template.metadata.annotations={container.apparmor.security.beta.kubernetes.io/tensorflow: unconfined}"},
			"spec.replicaSpecs.Worker.template.metadata.annotations[container.apparmor.security.beta.kubernetes.io/tensorflow]"},
		{"procMount Unmasked", []string{"--set", workerPod + ".containers[0].securityContext={procMount: Unmasked}"}, workerPod + ".containers[0].securityContext.procMount"},
		{"unsafe sysctl", []string{"--set", workerPod + ".securityContext={sysctls: [{name: kernel.msgmax, value: '65536'}]}"}, workerPod + ".securityContext.sysctls[0].name"},
		{"restricted", []string{"--pod-security", "restricted"}, workerPod + ".containers[0].securityContext.runAsNonRoot"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for _, command := range []string{"validate", "render"} {
				got := runCLI(t, "", files, append([]string{command, "@job.yaml"}, tc.args...)...)
				if got.code != 11 || !strings.Contains(got.stderr, tc.field+`: Forbidden: every replica's pod must pass PodSecurity`) {
					t.Errorf("%s: exit %d, stderr %q; want 11 naming %s", command, got.code, got.stderr, tc.field)
				}
			}
		})
	}
}

// A reserved key in a template is refused naming the key; the test
// cluster's kwok.trainstep.dev annotations are not in trainstep's domain.
func TestReplicaPolicyReservedKeys(t *testing.T) {
	files := map[string]string{"job.yaml": policyJob}
	meta := "spec.replicaSpecs.Worker.template.metadata"
	got := runCLI(t, "", files, "validate", "@job.yaml", "--set", meta+".labels={trainstep.dev/trainer-status: other-job}")
	if got.code != 11 || !strings.Contains(got.stderr, meta+".labels[trainstep.dev/trainer-status]: Forbidden") {
		t.Errorf("exit %d, stderr %q", got.code, got.stderr)
	}
	kwok := runCLI(t, "", files, "validate", "@job.yaml", "--set", meta+".annotations={kwok.trainstep.dev/exit-after: 1s}")
	if kwok.code != 0 {
		t.Errorf("kwok.trainstep.dev refused: exit %d, stderr %q", kwok.code, kwok.stderr)
	}
}

// A job that renders over --max-rendered-size is refused, naming the size
// and the replicas, before anything is sent anywhere; the policy file's bad
// values and a missing file are flag errors.
func TestReplicaPolicyBoundsAndSettings(t *testing.T) {
	files := map[string]string{"job.yaml": policyJob}
	big := runCLI(t, "", files, "validate", "@job.yaml", "--max-rendered-size", "1Ki")
	if big.code != 11 || !strings.Contains(big.stderr, "spec.replicaSpecs: Forbidden: the job's 2 replicas render to about") ||
		!strings.Contains(big.stderr, "over the limit of 1.0 KiB set by --max-rendered-size") {
		t.Errorf("exit %d, stderr %q", big.code, big.stderr)
	}
	cases := map[string][]string{
		"--policy-file: stat":                  {"--policy-file", "/nonexistent/policy"},
		"--pod-security: \"privileged\"":       {"--pod-security", "privileged"},
		"--max-rendered-size: \"lots\"":        {"--max-rendered-size", "lots"},
		"names ports but":                      {"--network-policy-ingress-ports", "9090"},
		"maxRenderedSize: \"-5\" is not a pos": {"--policy-file", policySettingsDir(t, map[string]string{"maxRenderedSize": "-5"})},
	}
	for want, args := range cases {
		got := runCLI(t, "", files, append([]string{"validate", "@job.yaml"}, args...)...)
		if got.code != 11 || !strings.Contains(got.stderr, want) {
			t.Errorf("%v: exit %d, stderr %q; want 11 saying %q", args, got.code, got.stderr, want)
		}
	}
	unknown := runCLI(t, "", files, "validate", "@job.yaml", "--policy-file", policySettingsDir(t, map[string]string{"allowedSecret": "x"}))
	if unknown.code != 0 || !strings.Contains(unknown.stderr, `Warning: --policy-file `) || !strings.Contains(unknown.stderr, `unknown setting "allowedSecret"`) {
		t.Errorf("unknown key: exit %d, stderr %q; want valid with a warning", unknown.code, unknown.stderr)
	}
}

// render draws the NetworkPolicy with the namespaces the settings admit;
// validate warns that the NetworkPolicy shuts Prometheus out when nothing
// admits it.
func TestReplicaPolicyNetworkPolicySettings(t *testing.T) {
	files := map[string]string{"job.yaml": policyJob}
	scrape := "spec.replicaSpecs.Worker.template.metadata.annotations={prometheus.io/scrape: 'true'}"
	warned := runCLI(t, "", files, "validate", "@job.yaml", "--set", scrape)
	if warned.code != 0 || !strings.Contains(warned.stderr, "so Prometheus cannot scrape them") {
		t.Errorf("exit %d, stderr %q; want a warning about Prometheus", warned.code, warned.stderr)
	}
	dir := policySettingsDir(t, map[string]string{"networkPolicyIngressNamespaces": "monitoring", "networkPolicyIngressPorts": "9090"})
	quiet := runCLI(t, "", files, "validate", "@job.yaml", "--set", scrape, "--policy-file", dir)
	if quiet.code != 0 || quiet.stderr != "" {
		t.Errorf("exit %d, stderr %q; want no warning once monitoring is admitted", quiet.code, quiet.stderr)
	}
	rendered := runCLI(t, "", files, "render", "@job.yaml", "--policy-file", dir)
	if rendered.code != 0 || !strings.Contains(rendered.stdout, "key: kubernetes.io/metadata.name") || !strings.Contains(rendered.stdout, "port: 9090") || !strings.Contains(rendered.stdout, "- monitoring") {
		t.Errorf("exit %d, the NetworkPolicy does not admit monitoring on 9090:\n%s", rendered.code, rendered.stdout)
	}
	off := runCLI(t, "", files, "render", "@job.yaml", "--policy-file", policySettingsDir(t, map[string]string{"networkPolicy": "false"}))
	if off.code != 0 || strings.Contains(off.stdout, "NetworkPolicy") {
		t.Errorf("networkPolicy false: exit %d, stdout %q", off.code, off.stdout)
	}
}
