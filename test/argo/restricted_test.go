package argo_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	wfv1 "github.com/argoproj/argo-workflows/v3/pkg/apis/workflow/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/trainstep/trainstep/pkg/render"
	"github.com/trainstep/trainstep/pkg/spec"
	"github.com/trainstep/trainstep/test/cluster"
)

// examplePod is one pod a shipped file would have created, and where it comes from.
type examplePod struct {
	where string
	pod   *corev1.Pod
}

// renderedReplicas renders every replica pod of a job manifest (with a call's overrides)
// as `trainstep render` does, into namespace ns.
func renderedReplicas(where string, manifest []byte, opts spec.Options, ns string) ([]examplePod, error) {
	job, _, err := spec.Load(manifest, opts)
	if err != nil {
		return nil, fmt.Errorf("%s: loading the job: %w", where, err)
	}
	r, err := render.NewRenderer(job, render.Identity{Namespace: ns, JobName: job.Name})
	if err != nil {
		return nil, fmt.Errorf("%s: rendering the job: %w", where, err)
	}
	var pods []examplePod
	for _, ref := range r.Replicas() {
		pod, err := r.Pod(ref.Type, ref.Index, 0)
		if err != nil {
			return nil, fmt.Errorf("%s: rendering %s %d: %w", where, ref.Type, ref.Index, err)
		}
		pods = append(pods, examplePod{where: where + " " + string(ref.Type), pod: pod})
	}
	return pods, nil
}

// argoTemplatePods converts each container and script template of a workflow spec into the
// pod Argo would run for it, as far as PodSecurity looks: the template's containers and the
// workflow's and template's volumes, with the template's securityContext, else the
// workflow's, for the pod. Argo's own init and wait
// containers are the controller's configuration, not the file's, and are left out.
func argoTemplatePods(where string, wf *wfv1.WorkflowSpec, ns string) []examplePod {
	var pods []examplePod
	for _, tmpl := range wf.Templates {
		var main *corev1.Container
		switch {
		case tmpl.Container != nil:
			main = tmpl.Container.DeepCopy()
		case tmpl.Script != nil:
			main = tmpl.Script.Container.DeepCopy()
		default:
			continue
		}
		main.Name = "main"
		security := wf.SecurityContext
		if tmpl.SecurityContext != nil {
			security = tmpl.SecurityContext
		}
		noToken := false
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "template-" + strings.ToLower(tmpl.Name), Namespace: ns},
			Spec: corev1.PodSpec{
				RestartPolicy:                corev1.RestartPolicyNever,
				AutomountServiceAccountToken: &noToken,
				SecurityContext:              security.DeepCopy(),
				Containers:                   []corev1.Container{*main},
				Volumes:                      append(append([]corev1.Volume{}, wf.Volumes...), tmpl.Volumes...),
			},
		}
		for _, c := range tmpl.InitContainers {
			pod.Spec.InitContainers = append(pod.Spec.InitContainers, c.Container)
		}
		for _, c := range tmpl.Sidecars {
			pod.Spec.Containers = append(pod.Spec.Containers, c.Container)
		}
		pods = append(pods, examplePod{where: where + " template " + tmpl.Name, pod: pod})
	}
	return pods
}

// shippedPods is every pod the shipped files would create: the replicas of each job
// manifest of workflows/jobs and of each call of the train template (with its overrides),
// and a pod per container or script template of every Workflow, CronWorkflow,
// WorkflowTemplate and ClusterWorkflowTemplate.
func shippedPods(t *testing.T, c *catalog, ns string) []examplePod {
	t.Helper()
	var pods []examplePod
	add := func(more []examplePod, err error) {
		if err != nil {
			t.Error(err)
		}
		pods = append(pods, more...)
	}
	for path, doc := range c.jobs {
		add(renderedReplicas(path, doc, spec.Options{Policy: examplesPolicy}, ns))
	}
	for _, call := range trainArguments(c) {
		args := map[string]string{}
		for _, p := range call.params {
			if p.Value != nil {
				args[p.Name] = resolveForCheck(p.Value.String(), call.globals)
			}
		}
		opts := spec.Options{Policy: examplesPolicy}
		for name, into := range map[string]*[]string{"set": &opts.Sets, "image": &opts.Images, "env": &opts.Envs, "arg": &opts.Args} {
			if v := args[name]; v != "" {
				*into = []string{v}
			}
		}
		add(renderedReplicas(call.path+" "+call.where, []byte(args["job"]), opts, ns))
	}
	for path, wf := range c.workflows {
		pods = append(pods, argoTemplatePods(path, &wf.Spec, ns)...)
	}
	for path, cron := range c.cronWorkflows {
		pods = append(pods, argoTemplatePods(path, &cron.Spec.WorkflowSpec, ns)...)
	}
	for path, tmpl := range c.templates {
		pods = append(pods, argoTemplatePods(path, &tmpl.Spec, ns)...)
	}
	for path, tmpl := range c.clusterTemplate {
		pods = append(pods, argoTemplatePods(path, &tmpl.Spec, ns)...)
	}
	sort.SliceStable(pods, func(i, j int) bool { return pods[i].where < pods[j].where })
	return pods
}

// dockerfileUser is the USER line of deploy/Dockerfile.
var dockerfileUser = regexp.MustCompile(`(?m)^USER\s+(\d+)`)

// trainstepImage is the repository of the image deploy/Dockerfile builds.
const trainstepImage = "ghcr.io/trainstep/trainstep"

// runsAsRootOrByName reports the containers of pod whose user the kubelet could not prove
// non-root: runAsNonRoot with no numeric runAsUser leaves it to the image's USER, and every
// image but trainstep's own (deploy/Dockerfile's numeric USER) is root or names its user,
// which the kubelet refuses to start under runAsNonRoot. PodSecurity cannot see images, so
// this is checked here.
func runsAsRootOrByName(pod *corev1.Pod, numericUserImage bool) []string {
	var refused []string
	podUser := pod.Spec.SecurityContext != nil && pod.Spec.SecurityContext.RunAsUser != nil
	for _, c := range append(append([]corev1.Container{}, pod.Spec.InitContainers...), pod.Spec.Containers...) {
		if podUser || (c.SecurityContext != nil && c.SecurityContext.RunAsUser != nil) {
			continue
		}
		if numericUserImage && (strings.HasPrefix(c.Image, trainstepImage+":") || strings.HasPrefix(c.Image, trainstepImage+"@")) {
			continue
		}
		refused = append(refused, fmt.Sprintf("container %s (image %s) sets no runAsUser", c.Name, c.Image))
	}
	return refused
}

// Every pod a shipped example or template would create passes PodSecurity `restricted`:
// each is created, server-side dry run, in a namespace that enforces it, so the API server's
// own PodSecurity admission judges it; a refusal names the file and the API server's reasons.
// A container whose image runs as root needs a numeric runAsUser, which PodSecurity cannot
// check and the kubelet enforces.
func TestEveryShippedPodPassesPodSecurityRestricted(t *testing.T) {
	t.Parallel()
	cat := manifests(t)
	dockerfile, err := os.ReadFile(filepath.Join(repoRoot(t), "deploy", "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	m := dockerfileUser.FindSubmatch(dockerfile)
	numericUserImage := m != nil && string(m[1]) != "0"
	if !numericUserImage {
		t.Errorf("deploy/Dockerfile has no numeric non-root USER")
	}

	c := cluster.Get(t)
	ns := c.Namespace(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c.EnforceRestricted(t, ns)

	pods := shippedPods(t, cat, ns)
	// Two job manifests, the train template's callers and the templates' steps at least.
	if len(pods) < 20 {
		t.Fatalf("found %d pods in the shipped files, want every replica and step of them (≥ 20)", len(pods))
	}
	for _, p := range pods {
		if _, err := c.Client.CoreV1().Pods(ns).Create(ctx, p.pod, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}); err != nil {
			t.Errorf("%s: pod %s: %v", p.where, p.pod.Name, err)
		}
		for _, why := range runsAsRootOrByName(p.pod, numericUserImage) {
			t.Errorf("%s: pod %s: %s: the kubelet refuses runAsNonRoot for an image's root or named user", p.where, p.pod.Name, why)
		}
	}
	t.Logf("%d pods of the shipped files dry-run created under PodSecurity restricted", len(pods))
}
