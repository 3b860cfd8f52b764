package replicapolicy

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/trainstep/trainstep/pkg/apis/trainstep/v1alpha1"
	"github.com/trainstep/trainstep/pkg/frameworks"
	"github.com/trainstep/trainstep/pkg/render"
)

// tfJob is a defaulted TensorFlow job of one PS and workers workers whose
// pods are template.
func tfJob(t testing.TB, workers int32, template corev1.PodTemplateSpec) *v1alpha1.TrainJob {
	t.Helper()
	one := int32(1)
	job := &v1alpha1.TrainJob{
		ObjectMeta: metav1.ObjectMeta{Name: "mnist", Namespace: "team-a"},
		Spec: v1alpha1.TrainJobSpec{
			Framework: v1alpha1.FrameworkTensorFlow,
			ReplicaSpecs: map[v1alpha1.ReplicaType]*v1alpha1.ReplicaSpec{
				v1alpha1.ReplicaTypePS:     {Replicas: &one, Template: *template.DeepCopy()},
				v1alpha1.ReplicaTypeWorker: {Replicas: &workers, Template: *template.DeepCopy()},
			},
		},
	}
	frameworks.SetDefaults(job)
	if errs := frameworks.Validate(job); len(errs) > 0 {
		t.Fatalf("the test's job is invalid: %v", errs)
	}
	return job
}

func tfTemplate(edit func(*corev1.PodTemplateSpec)) corev1.PodTemplateSpec {
	tmpl := corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "tensorflow", Image: "example.com/mnist:1"}}}}
	if edit != nil {
		edit(&tmpl)
	}
	return tmpl
}

func checkRendered(t testing.TB, job *v1alpha1.TrainJob, p Policy) field.ErrorList {
	t.Helper()
	r, err := render.NewRenderer(job, render.Identity{Namespace: job.Namespace, JobName: job.Name})
	if err != nil {
		t.Fatal(err)
	}
	shared, err := r.SharedObjects(render.Inputs{})
	if err != nil {
		t.Fatal(err)
	}
	return CheckRendered(r, shared, p)
}

// A job whose rendered objects pass the bound is refused naming its size,
// its replicas and the setting; one under it passes; the default bound
// holds a plain job of the most workers a job may have.
func TestCheckRenderedBoundsTheJobsSize(t *testing.T) {
	fat := tfTemplate(func(tmpl *corev1.PodTemplateSpec) {
		tmpl.Spec.Containers[0].Args = []string{strings.Repeat("x", 1<<20)} // 1 MiB per pod
	})
	cases := []struct {
		name    string
		workers int32
		tmpl    corev1.PodTemplateSpec
		limit   int64
		want    []string // in the error; none: passes
	}{
		{"16 fat workers over 16 MiB", 16, fat, 16 << 20, []string{
			"spec.replicaSpecs: Forbidden: the job's 17 replicas render to about 17.0 MiB", "1 PS pods of 1.0 MiB", "16 Worker pods of 1.0 MiB",
			"over the limit of 16.0 MiB set by --max-rendered-size (maxRenderedSize in the trainstep-policy ConfigMap)"}},
		{"16 fat workers under 32 MiB", 16, fat, 32 << 20, nil},
		{"4095 fat workers stop early, the size estimated", 4095, fat, 0, []string{"4096 replicas render to about 4.0 GiB", "over the limit of 64.0 MiB"}},
		{"4095 plain workers under the default", 4095, tfTemplate(nil), 0, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			errs := checkRendered(t, tfJob(t, tc.workers, tc.tmpl), Policy{MaxRenderedBytes: tc.limit})
			if len(tc.want) == 0 {
				if len(errs) != 0 {
					t.Fatalf("refused: %v", errs)
				}
				return
			}
			if len(errs) != 1 {
				t.Fatalf("errors %v, want one", errs)
			}
			for _, w := range tc.want {
				if !strings.Contains(errs[0].Error(), w) {
					t.Errorf("error %q lacks %q", errs[0].Error(), w)
				}
			}
		})
	}
}

// Each PodSecurity `baseline` violation a template can carry is refused on
// the rendered pod, once per field (not once per replica), with the field's
// path in the template; restricted asks more; --allow-privileged lifts the
// host's checks but not the others.
func TestCheckRenderedHoldsPodsToPodSecurity(t *testing.T) {
	const tp = "spec.replicaSpecs.%s.template."
	worker := func(path string) string { return fmt.Sprintf(tp, "Worker") + path }
	ps := func(path string) string { return fmt.Sprintf(tp, "PS") + path }
	unmasked := corev1.UnmaskedProcMount
	yes := true
	cases := []struct {
		name string
		edit func(*corev1.PodTemplateSpec)
		p    Policy
		want []string
	}{
		{"a plain pod", nil, Policy{}, nil},
		{"SELinux spc_t", func(t *corev1.PodTemplateSpec) {
			t.Spec.SecurityContext = &corev1.PodSecurityContext{SELinuxOptions: &corev1.SELinuxOptions{Type: "spc_t"}}
		}, Policy{}, []string{"spec.securityContext.seLinuxOptions"}},
		{"SELinux spc_t on a container", func(t *corev1.PodTemplateSpec) {
			t.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{SELinuxOptions: &corev1.SELinuxOptions{Type: "spc_t"}}
		}, Policy{}, []string{"spec.containers[0].securityContext.seLinuxOptions"}},
		{"seccomp Unconfined", func(t *corev1.PodTemplateSpec) {
			t.Spec.SecurityContext = &corev1.PodSecurityContext{SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeUnconfined}}
		}, Policy{}, []string{"spec.securityContext.seccompProfile"}},
		{"AppArmor Unconfined, field and annotation", func(t *corev1.PodTemplateSpec) {
			t.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{AppArmorProfile: &corev1.AppArmorProfile{Type: corev1.AppArmorProfileTypeUnconfined}}
			t.Annotations = map[string]string{"container.apparmor.security.beta.kubernetes.io/tensorflow": "unconfined"}
		}, Policy{}, []string{"metadata.annotations[container.apparmor.security.beta.kubernetes.io/tensorflow]", "spec.containers[0].securityContext.appArmorProfile.type"}},
		{"procMount Unmasked", func(t *corev1.PodTemplateSpec) {
			t.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{ProcMount: &unmasked}
		}, Policy{}, []string{"spec.containers[0].securityContext.procMount"}},
		{"an unsafe sysctl beside a safe one", func(t *corev1.PodTemplateSpec) {
			t.Spec.SecurityContext = &corev1.PodSecurityContext{Sysctls: []corev1.Sysctl{{Name: "net.ipv4.tcp_syncookies", Value: "1"}, {Name: "kernel.msgmax", Value: "1"}}}
		}, Policy{}, []string{"spec.securityContext.sysctls[1].name"}},
		{"windows host process", func(t *corev1.PodTemplateSpec) {
			t.Spec.SecurityContext = &corev1.PodSecurityContext{WindowsOptions: &corev1.WindowsSecurityContextOptions{HostProcess: &yes}}
		}, Policy{}, []string{"spec.securityContext.windowsOptions"}},
		{"restricted asks for a non-root user, no escalation, dropped capabilities and a seccomp profile", nil, Policy{PodSecurity: LevelRestricted}, []string{
			"spec.containers[0].securityContext.allowPrivilegeEscalation", "spec.containers[0].securityContext.capabilities",
			"spec.containers[0].securityContext.runAsNonRoot", "spec.containers[0].securityContext.seccompProfile"}},
		{"restricted is satisfied by the pod's own securityContext", func(t *corev1.PodTemplateSpec) {
			no, nonRoot := false, true
			t.Spec.SecurityContext = &corev1.PodSecurityContext{RunAsNonRoot: &nonRoot, SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}}
			t.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{AllowPrivilegeEscalation: &no, Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}}
		}, Policy{PodSecurity: LevelRestricted}, nil},
		{"--allow-privileged lifts privileged and the host's namespaces", func(t *corev1.PodTemplateSpec) {
			t.Spec.HostNetwork = true
			t.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{Privileged: &yes}
		}, Policy{AllowPrivileged: true}, nil},
		{"--allow-privileged does not lift procMount", func(t *corev1.PodTemplateSpec) {
			t.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{Privileged: &yes, ProcMount: &unmasked}
		}, Policy{AllowPrivileged: true}, []string{"spec.containers[0].securityContext.procMount"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			errs := checkRendered(t, tfJob(t, 3, tfTemplate(tc.edit)), tc.p)
			var got []string
			for _, e := range errs {
				got = append(got, e.Field)
				if e.Type != field.ErrorTypeForbidden || !strings.Contains(e.Detail, "PodSecurity") {
					t.Errorf("%s: %s, want Forbidden naming PodSecurity", e.Field, e)
				}
			}
			var want []string
			for _, w := range tc.want { // every replica type, each field once
				want = append(want, ps(w))
			}
			for _, w := range tc.want {
				want = append(want, worker(w))
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("refused fields (-want +got):\n%s", diff)
			}
		})
	}
}

// BenchmarkCheckRendered is what the check adds to a run before it
// creates anything: every pod and Service rendered, encoded and judged.
func BenchmarkCheckRendered(b *testing.B) {
	for _, n := range []int32{512, 4095} {
		job := tfJob(b, n, tfTemplate(nil))
		b.Run(fmt.Sprintf("workers=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if errs := checkRendered(b, job, Policy{}); len(errs) > 0 {
					b.Fatal(errs)
				}
			}
		})
	}
}
