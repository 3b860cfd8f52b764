package replicapolicy

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/trainstep/trainstep/pkg/apis/trainstep/v1alpha1"
)

// Priority classes (the pod's and the job's schedulingPolicy's), runtime
// classes and schedulers are held to their lists; a pattern never allows a
// system-* priority class; control-plane tolerations are refused but for
// --allow-privileged.
func TestCheckHoldsSchedulingToTheLists(t *testing.T) {
	kata := "kata"
	pod := func(edit func(*corev1.PodSpec)) corev1.PodSpec {
		p := corev1.PodSpec{Containers: []corev1.Container{{Name: "jax", Image: "example.com/jax:1"}}}
		edit(&p)
		return p
	}
	withPriority := func(class string) func(*v1alpha1.TrainJob) {
		return func(j *v1alpha1.TrainJob) {
			j.Spec.RunPolicy.SchedulingPolicy = &v1alpha1.SchedulingPolicy{PriorityClass: class}
		}
	}
	cases := []struct {
		name string
		pod  corev1.PodSpec
		job  func(*v1alpha1.TrainJob)
		p    Policy
		want []string
	}{
		{"priority class of the pod", pod(func(p *corev1.PodSpec) { p.PriorityClassName = "high" }), nil, Policy{}, []string{"priorityClassName"}},
		{"priority class listed", pod(func(p *corev1.PodSpec) { p.PriorityClassName = "team-a-high" }), nil, Policy{PriorityClasses: []string{"team-a-*"}}, nil},
		{"system-node-critical by the schedulingPolicy", pod(func(*corev1.PodSpec) {}), withPriority("system-node-critical"),
			Policy{PriorityClasses: []string{"*"}}, []string{"spec.runPolicy.schedulingPolicy.priorityClass"}},
		{"system-node-critical by a pattern", pod(func(p *corev1.PodSpec) { p.PriorityClassName = "system-node-critical" }), nil,
			Policy{PriorityClasses: []string{"system-*"}}, []string{"priorityClassName"}},
		{"system-node-critical by its exact name", pod(func(p *corev1.PodSpec) { p.PriorityClassName = "system-node-critical" }), nil,
			Policy{PriorityClasses: []string{"system-node-critical"}}, nil},
		{"runtime class", pod(func(p *corev1.PodSpec) { p.RuntimeClassName = &kata }), nil, Policy{}, []string{"runtimeClassName"}},
		{"runtime class listed", pod(func(p *corev1.PodSpec) { p.RuntimeClassName = &kata }), nil, Policy{RuntimeClasses: []string{"kata"}}, nil},
		{"scheduler", pod(func(p *corev1.PodSpec) { p.SchedulerName = "my-scheduler" }), nil, Policy{}, []string{"schedulerName"}},
		{"default-scheduler", pod(func(p *corev1.PodSpec) { p.SchedulerName = corev1.DefaultSchedulerName }), nil, Policy{}, nil},
		{"the gang's scheduler", pod(func(p *corev1.PodSpec) { p.SchedulerName = "volcano" }), func(j *v1alpha1.TrainJob) {
			j.Spec.RunPolicy.SchedulingPolicy = &v1alpha1.SchedulingPolicy{Gang: v1alpha1.GangVolcano}
		}, Policy{}, nil},
		{"another gang's scheduler", pod(func(p *corev1.PodSpec) { p.SchedulerName = "volcano" }), nil, Policy{}, []string{"schedulerName"}},
		{"scheduler listed", pod(func(p *corev1.PodSpec) { p.SchedulerName = "my-scheduler" }), nil, Policy{Schedulers: []string{"my-*"}}, nil},
		{"control-plane tolerations", pod(func(p *corev1.PodSpec) {
			p.Tolerations = []corev1.Toleration{
				{Key: "pool", Operator: corev1.TolerationOpEqual, Value: "gpu", Effect: corev1.TaintEffectNoSchedule},
				{Key: "node-role.kubernetes.io/control-plane", Operator: corev1.TolerationOpExists},
				{Key: "node-role.kubernetes.io/master", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
				{Operator: corev1.TolerationOpExists},
			}
		}), nil, Policy{}, []string{"tolerations[1].key", "tolerations[2].key", "tolerations[3].operator"}},
		{"control-plane tolerations, privileged", pod(func(p *corev1.PodSpec) {
			p.Tolerations = []corev1.Toleration{{Key: "node-role.kubernetes.io/control-plane", Operator: corev1.TolerationOpExists}}
		}), nil, Policy{AllowPrivileged: true}, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			job := jobWithWorker(tc.pod)
			if tc.job != nil {
				tc.job(job)
			}
			errs := Check(job, tc.p)
			if diff := cmp.Diff(tc.want, fieldsOf(errs)); diff != "" {
				t.Errorf("refused fields (-want +got):\n%s", diff)
			}
			for _, e := range errs {
				if !strings.Contains(e.Detail, "--allow") {
					t.Errorf("%s: %q names no setting", e.Field, e.Detail)
				}
			}
		})
	}
}

// A template may not carry labels or annotations of the reserved domains,
// each refused by its key; a subdomain of its own (kwok.trainstep.dev, the
// test cluster's) and keys of other domains are the template's.
func TestCheckRefusesReservedKeys(t *testing.T) {
	job := jobWithWorker(corev1.PodSpec{Containers: []corev1.Container{{Name: "jax", Image: "example.com/jax:1"}}})
	job.Spec.ReplicaSpecs[v1alpha1.ReplicaTypeWorker].Template.ObjectMeta = metav1.ObjectMeta{
		Labels: map[string]string{
			"trainstep.dev/trainer-status":    "other-job",
			"workflows.argoproj.io/workflow":  "other-wf",
			"scheduling.x-k8s.io/pod-group":   "other-job",
			"kueue.x-k8s.io/queue-name":       "team-b",
			"app":                             "mnist",
			"kwok.trainstep.dev/exit-after":   "1s",
			"example.com/trainstep.dev/thing": "x",
		},
		Annotations: map[string]string{
			"workflows.argoproj.io/node-id":                      "x",
			"scheduling.k8s.io/group-name":                       "other-job",
			"volcano.sh/preemptable":                             "true",
			"pod-group.scheduling.sigs.k8s.io":                   "no slash, no domain",
			"kwok.trainstep.dev/exit-code":                       "0",
			"prometheus.io/scrape":                               "true",
			"container.apparmor.security.beta.kubernetes.io/jax": "runtime/default",
		},
	}
	const m = "spec.replicaSpecs.Worker.template.metadata."
	want := []string{
		m + "labels[kueue.x-k8s.io/queue-name]", m + "labels[scheduling.x-k8s.io/pod-group]",
		m + "labels[trainstep.dev/trainer-status]", m + "labels[workflows.argoproj.io/workflow]",
		m + "annotations[scheduling.k8s.io/group-name]", m + "annotations[volcano.sh/preemptable]",
		m + "annotations[workflows.argoproj.io/node-id]",
	}
	errs := Check(job, Policy{AllowPrivileged: true})
	if diff := cmp.Diff(want, fieldsOf(errs)); diff != "" {
		t.Errorf("refused keys (-want +got):\n%s", diff)
	}
	for _, e := range errs {
		if !strings.Contains(e.Detail, "is reserved") {
			t.Errorf("%s: %q", e.Field, e.Detail)
		}
	}
}
