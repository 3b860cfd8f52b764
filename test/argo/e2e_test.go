package argo_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	wfv1 "github.com/argoproj/argo-workflows/v3/pkg/apis/workflow/v1alpha1"
	"github.com/argoproj/argo-workflows/v3/workflow/common"
	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"

	"github.com/trainstep/trainstep/executor"
	"github.com/trainstep/trainstep/pkg/apis/trainstep/v1alpha1"
	"github.com/trainstep/trainstep/pkg/frameworks"
	"github.com/trainstep/trainstep/pkg/result"
	"github.com/trainstep/trainstep/pkg/spec"
	"github.com/trainstep/trainstep/test/cluster"
)

// KWOK Stage annotations of the test cluster: a replica whose template
// carries them exits, with that code and termination message.
const (
	kwokExitAfter   = "kwok.trainstep.dev/exit-after"
	kwokExitCode    = "kwok.trainstep.dev/exit-code"
	kwokTermMessage = "kwok.trainstep.dev/termination-message"
	replicaRunFor   = 3 * time.Second
)

// The train template, rendered as Argo renders it, run by the trainstep
// binary as the ServiceAccount deploy/ creates, with the job specs of
// workflows/jobs/: every framework's job succeeds and every output
// parameter file the template declares holds what the DAG expects; with the admission
// policy of deploy/admission in force, which trainstep's own writes all pass.
func TestTrainTemplateRunsEveryFrameworkAsTheDeployedServiceAccount(t *testing.T) {
	c := cluster.Get(t)
	ns := c.Namespace(t)
	// The MPI job keeps its SSH key in a Secret: deploy/secrets/ grants it.
	applyDeploy(t, c, ns, "secrets")
	applyAdmissionPolicy(t, c, ns)
	token := c.ServiceAccountToken(t, ns, serviceAccountName)
	checkStepAccess(t, kubernetes.NewForConfigOrDie(c.ConfigForToken(token)), ns)
	binary := buildTrainstep(t)
	train := trainTemplates(t)["WorkflowTemplate"]
	// The Workflow owns the step pods, as Argo's do: the step proves its
	// workflow from the pod its token is bound to.
	c.InstallArgoCRDs(t)
	wf := createWorkflow(t, c, ns, "e2e-"+strings.ToLower(string(uuid.NewUUID())[:5]))
	workflow, workflowUID := wf.GetName(), wf.GetUID()

	// The subtests share the endpoint's port: the one that listens on it labels its pod.
	var served atomic.Int32
	t.Cleanup(func() {
		if served.Load() == 0 {
			t.Error("no run served the progress endpoint: the admission policy's label on the step's own pod went untested")
		}
	})
	for _, framework := range []string{"tensorflow", "pytorch", "pytorch-elastic", "mpi", "jax", "xgboost", "paddle"} {
		t.Run(framework, func(t *testing.T) {
			t.Parallel()
			manifest, job, message := exitingJob(t, "workflows/jobs/"+framework+".yaml")
			step := argoStep{
				workflowName: workflow, workflowUID: workflowUID, namespace: ns,
				nodeName:  workflow + ".train-" + framework,
				arguments: []wfv1.Parameter{{Name: "job", Value: wfv1.AnyStringPtr(string(manifest))}},
			}
			rendered := renderTrain(t, train, step)
			stepPod := createStepPod(t, c, ns, rendered, wf)
			// The kubelet gives the step a token bound to its pod, and mounts the
			// namespace's settings where the template says.
			kubeconfig := c.KubeconfigForToken(t, c.PodToken(t, stepPod), ns)
			mounts := mountConfigMaps(t, c, ns, rendered.tmpl)
			run := runStep(t, binary, rendered, stepPod, kubeconfig, mounts)

			if run.exitCode != result.ExitSucceeded {
				t.Fatalf("exit code %d, want 0\nstdout: %s\nstderr (last lines):\n%s", run.exitCode, run.stdout, lastLines(run.stderr, 40))
			}
			name, _ := flagValue(rendered.tmpl.Container.Args, "--name")
			checkResultLine(t, run.stdout, name)
			checkOutputFiles(t, rendered.tmpl, run, name, job, message)
			checkProgress(t, run)
			checkGoMemoryLimit(t, rendered.tmpl.Container, run)
			checkReplicasBelongToTheStep(t, c, ns, name, workflow, stepPod)
			checkStepPodLabelled(t, c, stepPod, executor.WorkflowIdentity(string(workflowUID), step.nodeName), run, &served)
		})
	}
}

// checkGoMemoryLimit checks that trainstep gave the Go runtime 90% of the
// container's memory limit, which the template passes in bytes.
func checkGoMemoryLimit(t *testing.T, c *corev1.Container, run stepRun) {
	t.Helper()
	limit := c.Resources.Limits[corev1.ResourceMemory]
	want := fmt.Sprintf(`"msg":"Go memory limit set","bytes":%d`, limit.Value()*9/10)
	if !strings.Contains(run.stderr, want) {
		t.Errorf("trainstep's log has no %s", want)
	}
}

// exitingJob reads a job spec and marks the replica types that decide its
// success so their pods exit 0 after replicaRunFor with a JSON termination
// message (the metrics), leaving everything else in the file as it is.
func exitingJob(t *testing.T, path string) (manifest []byte, job *v1alpha1.TrainJob, message map[string]any) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(repoRoot(t), path))
	if err != nil {
		t.Fatal(err)
	}
	job, _, err = spec.Load(data, spec.Options{})
	if err != nil {
		t.Fatal(err)
	}
	rule := frameworks.SuccessRuleFor(job)
	deciding := append(append([]v1alpha1.ReplicaType{}, rule.AllOf...), rule.AnyOf...)
	if rule.Leader != nil {
		deciding = append(deciding, rule.Leader.Type)
	}
	message = map[string]any{"accuracy": 0.97, "job": path}
	msg, _ := json.Marshal(message)

	var doc map[string]any
	if err := yaml.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	specs := doc["spec"].(map[string]any)["replicaSpecs"].(map[string]any)
	for _, rt := range deciding {
		tmpl := specs[string(rt)].(map[string]any)["template"].(map[string]any)
		meta, _ := tmpl["metadata"].(map[string]any)
		if meta == nil {
			meta = map[string]any{}
			tmpl["metadata"] = meta
		}
		meta["annotations"] = map[string]any{
			kwokExitAfter: replicaRunFor.String(), kwokExitCode: "0", kwokTermMessage: string(msg),
		}
	}
	manifest, err = yaml.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	return manifest, job, message
}

// checkStepPodLabelled checks that a run serving the progress endpoint labelled its own pod
// with the job's identity, which the job's progress Service selects, as the admission policy
// lets it (with a token bound to that pod).
func checkStepPodLabelled(t *testing.T, c *cluster.Cluster, stepPod *corev1.Pod, identity string, run stepRun, served *atomic.Int32) {
	t.Helper()
	if strings.Contains(run.stderr, "labelling its pod failed") {
		t.Errorf("the step could not label its pod:\n%s", lastLines(run.stderr, 20))
	}
	if !strings.Contains(run.stderr, "serving the progress endpoint") {
		return
	}
	served.Add(1)
	pod, err := c.Client.CoreV1().Pods(stepPod.Namespace).Get(context.Background(), stepPod.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := pod.Labels[v1alpha1.LabelTrainerStatus]; got != identity {
		t.Errorf("the step pod's %s label is %q, want the job's identity %q", v1alpha1.LabelTrainerStatus, got, identity)
	}
}

// mountConfigMaps writes each ConfigMap the template's container mounts, as namespace ns
// holds it, into a directory of one file per key, as the kubelet would (an optional one that
// does not exist is an empty directory), and returns the directories by mount path.
func mountConfigMaps(t *testing.T, c *cluster.Cluster, ns string, tmpl *wfv1.Template) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, m := range tmpl.Container.VolumeMounts {
		for _, v := range tmpl.Volumes {
			if v.Name != m.Name || v.ConfigMap == nil {
				continue
			}
			dir := t.TempDir()
			cm, err := c.Client.CoreV1().ConfigMaps(ns).Get(context.Background(), v.ConfigMap.Name, metav1.GetOptions{})
			switch {
			case apierrors.IsNotFound(err) && v.ConfigMap.Optional != nil && *v.ConfigMap.Optional:
			case err != nil:
				t.Fatalf("ConfigMap %s the step mounts: %v", v.ConfigMap.Name, err)
			default:
				for key, value := range cm.Data {
					if err := os.WriteFile(filepath.Join(dir, key), []byte(value), 0o644); err != nil {
						t.Fatal(err)
					}
				}
			}
			out[m.MountPath] = dir
		}
	}
	return out
}

// createStepPod creates the pod Argo would run the step in: its name, uid
// and namespace reach trainstep through the downward API.
func createStepPod(t *testing.T, c *cluster.Cluster, ns string, r renderedStep, wf *unstructured.Unstructured) *corev1.Pod {
	t.Helper()
	yes := true
	pod, err := c.Client.CoreV1().Pods(ns).Create(context.Background(), &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name:   r.podName,
			Labels: map[string]string{common.LabelKeyWorkflow: wf.GetName()},
			// Argo's controller makes the Workflow the controller of its pods.
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "argoproj.io/v1alpha1", Kind: "Workflow", Name: wf.GetName(), UID: wf.GetUID(), Controller: &yes}},
		},
		Spec: corev1.PodSpec{
			ServiceAccountName: r.tmpl.ServiceAccountName,
			Containers:         []corev1.Container{{Name: common.MainContainerName, Image: r.tmpl.Container.Image}},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating the step pod: %v", err)
	}
	return pod
}

// Where Argo puts things in the main container that this test puts in a
// temporary directory instead.
const argoProgressPath = "/var/run/argo/progress"

// stepRun is what running the step's container produced.
type stepRun struct {
	exitCode       int
	stdout, stderr string
	// local maps a path in the container to where the test put it.
	local map[string]string
}

// runStep runs the trainstep binary with the container's arguments and
// environment after Kubernetes' $(VAR) expansion, the downward-API values of
// the step pod, and the variables Argo's controller adds to a main
// container. Only two things differ from the pod: the paths of the
// container's files (the job file, the outputs directory and Argo's progress
// file) live in a temporary directory, and KUBECONFIG stands in for the
// in-cluster configuration of the ServiceAccount.
func runStep(t *testing.T, binary string, r renderedStep, pod *corev1.Pod, kubeconfig string, mounts map[string]string) stepRun {
	t.Helper()
	c := r.tmpl.Container
	if left := unresolved(c); len(left) > 0 {
		t.Fatalf("Argo would leave variables unresolved: %q", left)
	}
	if len(c.Command) != 1 || c.Command[0] != "/trainstep" {
		t.Fatalf("command %q, want [/trainstep] (the image's binary)", c.Command)
	}
	dir := t.TempDir()
	outputsDir, _ := flagValue(c.Args, "--outputs-dir")
	jobPath := artifactPath(t, r.tmpl, "job-file")
	run := stepRun{local: map[string]string{
		jobPath:          filepath.Join(dir, "job.yaml"),
		outputsDir:       filepath.Join(dir, "outputs"),
		argoProgressPath: filepath.Join(dir, "progress"),
	}}
	if err := os.WriteFile(run.local[jobPath], []byte(r.jobFile), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(run.local[outputsDir], 0o755); err != nil {
		t.Fatal(err)
	}
	for inPod, local := range mounts {
		run.local[inPod] = local
	}

	env := containerEnv(t, c, pod)
	env = append(env,
		corev1.EnvVar{Name: common.EnvVarContainerName, Value: common.MainContainerName},
		corev1.EnvVar{Name: common.EnvVarIncludeScriptOutput, Value: "false"},
		corev1.EnvVar{Name: common.EnvVarProgressFile, Value: argoProgressPath},
	)
	var args []string
	used := map[string]bool{}
	for _, a := range c.Args {
		a = expandVars(a, env)
		for inPod, local := range run.local {
			if flag, value, ok := strings.Cut(a, "="); ok && value == inPod {
				a, used[inPod] = flag+"="+local, true
			}
		}
		args = append(args, a)
	}
	for _, inPod := range []string{jobPath, outputsDir} {
		if !used[inPod] {
			t.Fatalf("no argument names %s; args %q", inPod, c.Args)
		}
	}
	var environ []string
	for _, e := range env {
		if local, ok := run.local[e.Value]; ok {
			e.Value = local
		}
		environ = append(environ, e.Name+"="+e.Value)
	}
	environ = append(environ, "KUBECONFIG="+kubeconfig, "HOME="+dir)
	t.Logf("trainstep %s", strings.Join(args, " "))

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, args...)
	cmd.Env = environ
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	run.stdout, run.stderr = stdout.String(), stderr.String()
	var exitErr *exec.ExitError
	switch {
	case errors.As(err, &exitErr):
		run.exitCode = exitErr.ExitCode()
	case err != nil:
		t.Fatalf("running trainstep: %v", err)
	}
	return run
}

func artifactPath(t *testing.T, tmpl *wfv1.Template, name string) string {
	t.Helper()
	for _, a := range tmpl.Inputs.Artifacts {
		if a.Name == name {
			return a.Path
		}
	}
	t.Fatalf("no input artifact %s", name)
	return ""
}

// containerEnv resolves the container's env as the kubelet would: literal
// values, downward-API fields of the pod and the container's own resources.
func containerEnv(t *testing.T, c *corev1.Container, pod *corev1.Pod) []corev1.EnvVar {
	t.Helper()
	var out []corev1.EnvVar
	for _, e := range c.Env {
		value := e.Value
		if e.ValueFrom != nil && e.ValueFrom.ResourceFieldRef != nil {
			out = append(out, corev1.EnvVar{Name: e.Name, Value: resourceFieldValue(t, e.Name, c, e.ValueFrom.ResourceFieldRef)})
			continue
		}
		if e.ValueFrom != nil {
			if e.ValueFrom.FieldRef == nil {
				t.Fatalf("env %s: only downward-API fields and resources are resolved here", e.Name)
			}
			switch e.ValueFrom.FieldRef.FieldPath {
			case "metadata.name":
				value = pod.Name
			case "metadata.uid":
				value = string(pod.UID)
			case "metadata.namespace":
				value = pod.Namespace
			default:
				t.Fatalf("env %s: field %s is not resolved here", e.Name, e.ValueFrom.FieldRef.FieldPath)
			}
		}
		out = append(out, corev1.EnvVar{Name: e.Name, Value: value})
	}
	return out
}

// resourceFieldValue is the kubelet's value of a resourceFieldRef to the
// container's own limits.memory: the limit in bytes (divisor 1).
func resourceFieldValue(t *testing.T, name string, c *corev1.Container, ref *corev1.ResourceFieldSelector) string {
	t.Helper()
	if ref.ContainerName != "" && ref.ContainerName != c.Name || ref.Resource != "limits.memory" || !ref.Divisor.IsZero() {
		t.Fatalf("env %s: only the container's own limits.memory in bytes is resolved here, not %+v", name, ref)
	}
	limit, ok := c.Resources.Limits[corev1.ResourceMemory]
	if !ok {
		t.Fatalf("env %s: the container has no memory limit", name)
	}
	return strconv.FormatInt(limit.Value(), 10)
}

var varReference = regexp.MustCompile(`\$\$|\$\(([A-Za-z_][A-Za-z0-9_.-]*)\)`)

// expandVars is Kubernetes' expansion of $(VAR) in a container's args: a
// defined variable is replaced by its value, $$ is a literal $, anything
// else stays as written.
func expandVars(s string, env []corev1.EnvVar) string {
	return varReference.ReplaceAllStringFunc(s, func(ref string) string {
		if ref == "$$" {
			return "$"
		}
		name := ref[2 : len(ref)-1]
		for _, e := range env {
			if e.Name == name {
				return e.Value
			}
		}
		return ref
	})
}

// buildTrainstep builds cmd/trainstep into the test's temporary directory.
func buildTrainstep(t *testing.T) string {
	t.Helper()
	binary := filepath.Join(t.TempDir(), "trainstep")
	cmd := exec.Command("go", "build", "-o", binary, "./cmd/trainstep")
	cmd.Dir = repoRoot(t)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building trainstep: %v\n%s", err, out)
	}
	return binary
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// checkResultLine: stdout is exactly one JSON line, the result (Argo's
// outputs.result).
func checkResultLine(t *testing.T, stdout, jobName string) {
	t.Helper()
	lines := strings.Split(strings.TrimRight(stdout, "\n"), "\n")
	if len(lines) != 1 {
		t.Fatalf("stdout has %d lines, want one JSON line:\n%s", len(lines), stdout)
	}
	var res result.Result
	if err := json.Unmarshal([]byte(lines[0]), &res); err != nil {
		t.Fatalf("stdout is not the result JSON: %v\n%s", err, stdout)
	}
	if res.Phase != result.PhaseSucceeded || res.JobName != jobName {
		t.Errorf("result phase %s job %q, want Succeeded and %q", res.Phase, res.JobName, jobName)
	}
}

// checkOutputFiles reads every output parameter the template declares from
// the path it declares.
func checkOutputFiles(t *testing.T, tmpl *wfv1.Template, run stepRun, jobName string, job *v1alpha1.TrainJob, metrics map[string]any) {
	t.Helper()
	outputsDir, _ := flagValue(tmpl.Container.Args, "--outputs-dir")
	read := func(p wfv1.Parameter) string {
		rel := strings.TrimPrefix(p.ValueFrom.Path, outputsDir)
		b, err := os.ReadFile(run.local[outputsDir] + rel)
		if err != nil {
			t.Errorf("output parameter %s: %v", p.Name, err)
		}
		return string(b)
	}
	checks := map[string]func(string) error{
		"phase":    equals(string(result.PhaseSucceeded)),
		"reason":   equals(result.ReasonSucceeded),
		"job-name": equals(jobName),
		"restarts": equals("0"),
		// No whole-job restart: nothing resumed.
		"resumes": equals("[]"),
		"duration-seconds": func(v string) error {
			d, err := strconv.ParseFloat(v, 64)
			if err != nil || d < replicaRunFor.Seconds() || d > 180 {
				return fmt.Errorf("%q, want seconds between %v and 180", v, replicaRunFor.Seconds())
			}
			return nil
		},
		"replicas": func(v string) error { return checkReplicas(v, job) },
		"metrics": func(v string) error {
			var got map[string]any
			if err := json.Unmarshal([]byte(v), &got); err != nil {
				return err
			}
			if diff := cmp.Diff(metrics, got); diff != "" {
				return fmt.Errorf("(-termination message +metrics):\n%s", diff)
			}
			return nil
		},
		// KWOK's replicas report no training status.
		"trainer-status": func(v string) error {
			if v != "{}" {
				return fmt.Errorf("%q, want {} as no status was reported", v)
			}
			return nil
		},
		"termination-message": func(v string) error {
			var got map[string]any
			if err := json.Unmarshal([]byte(v), &got); err != nil {
				return fmt.Errorf("%q is not the JSON termination message: %w", v, err)
			}
			if diff := cmp.Diff(metrics, got); diff != "" {
				return fmt.Errorf("(-termination message +termination-message):\n%s", diff)
			}
			return nil
		},
	}
	for _, p := range tmpl.Outputs.Parameters {
		check, ok := checks[p.Name]
		if !ok {
			t.Errorf("output parameter %s: no expectation for it here", p.Name)
			continue
		}
		delete(checks, p.Name)
		if err := check(read(p)); err != nil {
			t.Errorf("output parameter %s: %v", p.Name, err)
		}
	}
	for name := range checks {
		t.Errorf("the template declares no output parameter %s", name)
	}
}

func equals(want string) func(string) error {
	return func(got string) error {
		if got != want {
			return fmt.Errorf("%q, want %q", got, want)
		}
		return nil
	}
}

// checkReplicas: one entry per replica of the job, by type and index.
func checkReplicas(v string, job *v1alpha1.TrainJob) error {
	var replicas []result.ReplicaStatus
	if err := json.Unmarshal([]byte(v), &replicas); err != nil {
		return err
	}
	got, want := map[string]bool{}, map[string]bool{}
	for _, r := range replicas {
		got[fmt.Sprintf("%s/%d", strings.ToLower(r.Type), r.Index)] = true
	}
	for rt, rs := range job.Spec.ReplicaSpecs {
		for i := 0; i < int(rs.ReplicaCount()); i++ {
			want[fmt.Sprintf("%s/%d", strings.ToLower(string(rt)), i)] = true
		}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		return fmt.Errorf("replicas (-job +replicas.json):\n%s", diff)
	}
	return nil
}

var progressPattern = regexp.MustCompile(`^\d+/\d+$`)

// checkProgress: trainstep wrote Argo's N/M progress to $ARGO_PROGRESS_FILE.
func checkProgress(t *testing.T, run stepRun) {
	t.Helper()
	b, err := os.ReadFile(run.local[argoProgressPath])
	if err != nil {
		t.Errorf("progress file: %v", err)
		return
	}
	if !progressPattern.Match(bytes.TrimSpace(b)) {
		t.Errorf("progress %q, want N/M", b)
	}
}

// checkReplicasBelongToTheStep: the replicas left after the run are owned
// by the step pod and carry the labels `argo logs <wf> -l
// trainstep.dev/job-name=<job>` selects by.
func checkReplicasBelongToTheStep(t *testing.T, c *cluster.Cluster, ns, jobName, workflow string, step *corev1.Pod) {
	t.Helper()
	selector := fmt.Sprintf("%s=%s,%s=%s", common.LabelKeyWorkflow, workflow, v1alpha1.LabelJobName, jobName)
	pods, err := c.Client.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		t.Fatal(err)
	}
	if len(pods.Items) == 0 {
		t.Fatalf("no replica pod matches %s (the deciding replicas stay after success)", selector)
	}
	for _, p := range pods.Items {
		if ref := metav1.GetControllerOf(&p); ref == nil || ref.Kind != "Workflow" || ref.Name != workflow {
			t.Errorf("replica %s is not controlled by workflow %s, which outlives the step pod %s: %+v", p.Name, workflow, step.Name, p.OwnerReferences)
		}
	}
}

// createWorkflow creates a Workflow object that owns step pods (no Argo
// controller acts on it here).
func createWorkflow(t *testing.T, c *cluster.Cluster, ns, name string) *unstructured.Unstructured {
	t.Helper()
	wf := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "argoproj.io/v1alpha1", "kind": "Workflow",
		"metadata": map[string]any{"name": name, "namespace": ns},
		"spec":     map[string]any{"workflowTemplateRef": map[string]any{"name": "trainstep"}},
	}}
	created, err := c.Dynamic().Resource(cluster.WorkflowResource).Namespace(ns).Create(context.Background(), wf, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating workflow %s: %v", name, err)
	}
	return created
}
