package argo_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	nodev1 "k8s.io/api/node/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/trainstep/trainstep/internal/testutil"
	"github.com/trainstep/trainstep/pkg/apis/trainstep/v1alpha1"
	"github.com/trainstep/trainstep/pkg/render"
	"github.com/trainstep/trainstep/pkg/replicapolicy"
	"github.com/trainstep/trainstep/pkg/spec"
	"github.com/trainstep/trainstep/test/cluster"
)

// applyAdmissionPolicy creates deploy/admission's ValidatingAdmissionPolicies and bindings
// as shipped, but named after ns and bound to ns only, so that tests running beside this
// one in the shared cluster are not held to it.
func applyAdmissionPolicy(t *testing.T, c *cluster.Cluster, ns string) {
	t.Helper()
	policies, err := testutil.ReadAdmissionPolicies(repoRoot(t), ns)
	if err != nil {
		t.Fatal(err)
	}
	applyPolicies(t, c, policies)
}

// applyPolicies creates policies, and deletes them when the test ends.
func applyPolicies(t *testing.T, c *cluster.Cluster, policies *testutil.AdmissionPolicies) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		policies.Delete(ctx, c.Client)
	})
	if err := policies.Apply(ctx, c.Client); err != nil {
		t.Fatal(err)
	}
}

// admissionCase is a pod the step tries to create, and what the API server says.
type admissionCase struct {
	name string
	edit func(*corev1.Pod)
	want string // "" passes; else a part of the refusal
}

// replicaPod is a pod of job j as trainstep renders one: labelled, no token.
func replicaPod(ns, name string, edit func(*corev1.Pod)) *corev1.Pod {
	noToken := false
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{
			"trainstep.dev/job-name": "j", "trainstep.dev/replica-type": "worker", "trainstep.dev/replica-index": "0",
			"workflows.argoproj.io/workflow": "wf"}, Annotations: map[string]string{"trainstep.dev/framework": "pytorch"}},
		Spec: corev1.PodSpec{AutomountServiceAccountToken: &noToken, Containers: []corev1.Container{{Name: "main", Image: "example.com/train:1"}}},
	}
	if edit != nil {
		edit(p)
	}
	return p
}

func volumeOf(src corev1.VolumeSource) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: "v", VolumeSource: src})
	}
}

func secretVolume(name string) func(*corev1.Pod) {
	return volumeOf(corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: name}})
}

func container(edit func(*corev1.Container)) func(*corev1.Pod) {
	return func(p *corev1.Pod) { edit(&p.Spec.Containers[0]) }
}

func securityContext(sc corev1.SecurityContext) func(*corev1.Pod) {
	return container(func(c *corev1.Container) { c.SecurityContext = &sc })
}

// podAdmissionCases are the replica policy's refusals, as the step would send them.
func podAdmissionCases(runtimeClass string) []admissionCase {
	yes, no, unmasked := true, false, corev1.UnmaskedProcMount
	return []admissionCase{
		{"a replica as trainstep renders it", nil, ""},
		{"its job's SSH key, status token and ConfigMaps", func(p *corev1.Pod) {
			secretVolume("j-ssh")(p)
			p.Spec.Volumes = append(p.Spec.Volumes,
				corev1.Volume{Name: "s", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "j-status"}}},
				corev1.Volume{Name: "c", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "j-tf-cluster"}}}})
		}, ""},
		{"the host's network", func(p *corev1.Pod) { p.Spec.HostNetwork = true }, "host's network"},
		{"the host's PID namespace", func(p *corev1.Pod) { p.Spec.HostPID = true }, "host's network, PID or IPC"},
		{"a hostPath volume", volumeOf(corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/"}}), "refused: hostPath"},
		{"an nfs volume", volumeOf(corev1.VolumeSource{NFS: &corev1.NFSVolumeSource{Server: "nfs", Path: "/"}}), "refused: nfs"},
		{"a privileged init container", func(p *corev1.Pod) {
			p.Spec.InitContainers = []corev1.Container{{Name: "init", Image: "example.com/init:1", SecurityContext: &corev1.SecurityContext{Privileged: &yes}}}
		}, "may not be privileged"},
		{"allowPrivilegeEscalation", securityContext(corev1.SecurityContext{AllowPrivilegeEscalation: &yes}), "allowPrivilegeEscalation"},
		{"a capability", securityContext(corev1.SecurityContext{Capabilities: &corev1.Capabilities{Add: []corev1.Capability{"SYS_ADMIN"}}}), "no capability but NET_BIND_SERVICE"},
		{"a host port", container(func(c *corev1.Container) { c.Ports = []corev1.ContainerPort{{ContainerPort: 22, HostPort: 22}} }), "host port"},
		{"nodeName", func(p *corev1.Pod) { p.Spec.NodeName = "kwok-node-0" }, "scheduler's choice"},
		{"the step's ServiceAccount", func(p *corev1.Pod) { p.Spec.ServiceAccountName = serviceAccountName }, "not trainstep"},
		{"another job's SSH key", secretVolume("other-ssh"), "refused: other-ssh"},
		{"a projected Secret", volumeOf(corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
			{Secret: &corev1.SecretProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "other-status"}}}}}}), "refused: other-status"},
		{"the namespace's credentials by envFrom", container(func(c *corev1.Container) {
			c.EnvFrom = []corev1.EnvFromSource{{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "artifact-store"}}}}
		}), "refused: artifact-store"},
		{"a Secret env var", container(func(c *corev1.Container) {
			c.Env = []corev1.EnvVar{{Name: "T", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
				LocalObjectReference: corev1.LocalObjectReference{Name: "hf-token"}, Key: "token"}}}}
		}), "refused: hf-token"},
		// The API server adds the ServiceAccount's pull secrets before the policy sees the pod:
		// a template's are the step's to refuse.
		{"an image pull secret", func(p *corev1.Pod) { p.Spec.ImagePullSecrets = []corev1.LocalObjectReference{{Name: "registry"}} }, ""},
		{"another team's claim", volumeOf(corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "team-b-data"}}), "refused: team-b-data"},
		{"a snapshot of another team's data", volumeOf(corev1.VolumeSource{Ephemeral: &corev1.EphemeralVolumeSource{VolumeClaimTemplate: &corev1.PersistentVolumeClaimTemplate{
			Spec: corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				Resources:  corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resourceOf("1Gi")}},
				DataSource: &corev1.TypedLocalObjectReference{Kind: "PersistentVolumeClaim", Name: "team-b-data"}}}}}), "refused: team-b-data"},
		{"another ConfigMap", volumeOf(corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "other-config"}}}), "refused: other-config"},
		{"a CSI driver", volumeOf(corev1.VolumeSource{CSI: &corev1.CSIVolumeSource{Driver: "secrets-store.csi.k8s.io"}}), "drivers of allowedCSIDrivers"},
		{"system-node-critical", func(p *corev1.Pod) { p.Spec.PriorityClassName = "system-node-critical" }, "not system-node-critical"},
		{"a runtime class", func(p *corev1.Pod) { p.Spec.RuntimeClassName = &runtimeClass }, "not " + runtimeClass},
		{"a scheduler", func(p *corev1.Pod) { p.Spec.SchedulerName = "my-scheduler" }, "not my-scheduler"},
		{"a control-plane toleration", func(p *corev1.Pod) {
			p.Spec.Tolerations = []corev1.Toleration{{Key: "node-role.kubernetes.io/control-plane", Operator: corev1.TolerationOpExists}}
		}, "control plane's taints"},
		{"another job's progress Service's label", func(p *corev1.Pod) { p.Labels["trainstep.dev/trainer-status"] = "other" }, "only the trainstep.dev"},
		{"Argo's annotation", func(p *corev1.Pod) { p.Annotations["workflows.argoproj.io/node-id"] = "x" }, "only the trainstep.dev"},
		{"another job's gang", func(p *corev1.Pod) { p.Labels["scheduling.x-k8s.io/pod-group"] = "other" }, "a gang's group of its own job"},
		{"SELinux spc_t", securityContext(corev1.SecurityContext{SELinuxOptions: &corev1.SELinuxOptions{Type: "spc_t"}}), "PodSecurity baseline"},
		{"seccomp Unconfined", func(p *corev1.Pod) {
			p.Spec.SecurityContext = &corev1.PodSecurityContext{SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeUnconfined}}
		}, "PodSecurity baseline"},
		{"an unconfined AppArmor annotation", func(p *corev1.Pod) {
			p.Annotations["container.apparmor.security.beta.kubernetes.io/main"] = "unconfined"
		}, "AppArmor"}, // the API server copies the annotation into the container's field
		{"procMount Unmasked", func(p *corev1.Pod) { // an unmasked /proc needs a user namespace of its own
			p.Spec.HostUsers = &no
			securityContext(corev1.SecurityContext{ProcMount: &unmasked})(p)
		}, "procMount"},
		{"an unsafe sysctl", func(p *corev1.Pod) {
			p.Spec.SecurityContext = &corev1.PodSecurityContext{Sysctls: []corev1.Sysctl{{Name: "kernel.msgmax", Value: "65536"}}}
		}, "safe sysctls"},
	}
}

// The admission policy docs/security.md recommends holds the step's ServiceAccount to the
// replica policy in the API server itself, with the namespace's trainstep-policy
// ConfigMap (deploy/policy.yaml) as its lists: each pod the replica policy refuses is
// refused, naming why, a replica as trainstep renders it passes, and what the settings
// allow passes once they allow it.
func TestAdmissionPolicyHoldsTheStepsPodsToTheReplicaPolicy(t *testing.T) {
	t.Parallel()
	c := cluster.Get(t)
	ns := c.Namespace(t)
	applyDeploy(t, c, ns)
	applyAdmissionPolicy(t, c, ns)
	step := kubernetes.NewForConfigOrDie(c.ConfigForToken(c.ServiceAccountToken(t, ns, serviceAccountName)))
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	create := func(p *corev1.Pod) error {
		_, err := step.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return err
	}
	// A RuntimeClass that exists (the API server refuses a pod naming one that does not).
	runtimeClass := ns
	node := c.Client.NodeV1().RuntimeClasses()
	if _, err := node.Create(ctx, &nodev1.RuntimeClass{ObjectMeta: metav1.ObjectMeta{Name: runtimeClass}, Handler: "runc"}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = node.Delete(context.Background(), runtimeClass, metav1.DeleteOptions{}) })
	// The policy is compiled after it is created: wait until it refuses.
	testutil.Eventually(t, time.Minute, "the policy refusing a hostNetwork pod", func(ctx context.Context) (bool, error) {
		err := create(replicaPod(ns, "j-probe", func(p *corev1.Pod) { p.Spec.HostNetwork = true }))
		return err != nil && strings.Contains(err.Error(), "host's network"), nil
	})
	for i, tc := range podAdmissionCases(runtimeClass) {
		t.Run(tc.name, func(t *testing.T) {
			err := create(replicaPod(ns, fmt.Sprintf("j-case-%d", i), tc.edit))
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("refused: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("got %v, want refused with %q", err, tc.want)
			}
		})
	}

	// The namespace's settings allow what they list, and privilege.
	settings := map[string]string{"allowedSecrets": "hf-token, registry,\nother-*, artifact-store", "allowedPVCs": "team-b-*", "allowedConfigMaps": "other-config",
		"allowedCSIDrivers": "secrets-store.csi.k8s.io", "allowedVolumeTypes": "nfs", "allowedPriorityClasses": "system-node-critical",
		"allowedRuntimeClasses": runtimeClass, "allowedSchedulers": "my-scheduler", "allowedServiceAccounts": serviceAccountName, "allowPrivileged": "true"}
	patch, err := json.Marshal(map[string]any{"data": settings})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Client.CoreV1().ConfigMaps(ns).Patch(ctx, "trainstep-policy", types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	stillRefused := map[string]bool{"another job's progress Service's label": true, "Argo's annotation": true, "another job's gang": true,
		"SELinux spc_t": true, "seccomp Unconfined": true, "an unconfined AppArmor annotation": true, "procMount Unmasked": true, "an unsafe sysctl": true}
	testutil.Eventually(t, time.Minute, "the policy reading the new settings", func(ctx context.Context) (bool, error) {
		return create(replicaPod(ns, "j-probe", func(p *corev1.Pod) { p.Spec.HostNetwork = true })) == nil, nil
	})
	for i, tc := range podAdmissionCases(runtimeClass) {
		t.Run("allowed/"+tc.name, func(t *testing.T) {
			err := create(replicaPod(ns, fmt.Sprintf("j-case-%d", i), tc.edit))
			if stillRefused[tc.name] != (err != nil) {
				t.Errorf("refused: %v; want refused: %v", err, stillRefused[tc.name])
			}
		})
	}
}

// The admission policy keeps the step's writes, changes and deletes to its jobs' own
// objects: the step labels its own pod for the progress Service (by a token bound to that
// pod) and takes the label off an earlier step's, and nothing else of a pod that is no
// job's; it never changes an image nor a job's labels, writes Services, NetworkPolicies and
// Leases only of its jobs, and never touches its settings.
func TestAdmissionPolicyHoldsTheStepsWritesToItsJobs(t *testing.T) {
	t.Parallel()
	c := cluster.Get(t)
	ns := c.Namespace(t)
	applyDeploy(t, c, ns)
	applyAdmissionPolicy(t, c, ns)
	stepToken := c.ServiceAccountToken(t, ns, serviceAccountName)
	step := kubernetes.NewForConfigOrDie(c.ConfigForToken(stepToken))
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	testutil.Eventually(t, time.Minute, "the policy refusing a pod that is no job's", func(ctx context.Context) (bool, error) {
		p := replicaPod(ns, "j-probe", nil)
		delete(p.Labels, "trainstep.dev/job-name")
		_, err := step.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return err != nil && strings.Contains(err.Error(), "only its jobs' own objects"), nil
	})

	admin := c.Client.CoreV1()
	mustCreate := func(p *corev1.Pod) *corev1.Pod {
		t.Helper()
		created, err := admin.Pods(ns).Create(ctx, p, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return created
	}
	replica := mustCreate(replicaPod(ns, "j-worker-0", nil))
	stepPod := mustCreate(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "wf-train-1", Namespace: ns},
		Spec: corev1.PodSpec{ServiceAccountName: serviceAccountName, Containers: []corev1.Container{{Name: "main", Image: "example.com/trainstep:1"}}}})
	earlier := mustCreate(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "wf-train-0", Namespace: ns, Labels: map[string]string{"trainstep.dev/trainer-status": "j"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "main", Image: "example.com/trainstep:1"}}}})
	web := mustCreate(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "main", Image: "example.com/web:1"}}}})

	// A token bound to the step's pod, as the kubelet gives the step.
	bound, err := admin.ServiceAccounts(ns).CreateToken(ctx, serviceAccountName, &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
		BoundObjectRef: &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: stepPod.Name, UID: stepPod.UID}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ownStep := kubernetes.NewForConfigOrDie(c.ConfigForToken(bound.Status.Token))

	pods := stepPods{replica: replica, step: stepPod, earlier: earlier, web: web}
	checkWrites(t, append(podWrites(ctx, ns, step, ownStep, pods), objectWrites(ctx, ns, step)...))
}

// writeCase is one write the step tries, and what the API server says.
type writeCase struct {
	name string
	do   func() error
	want string // "" passes; else a part of the refusal
}

func checkWrites(t *testing.T, writes []writeCase) {
	t.Helper()
	for _, w := range writes {
		err := w.do()
		switch {
		case w.want == "" && err != nil:
			t.Errorf("%s: refused: %v", w.name, err)
		case w.want != "" && (err == nil || !strings.Contains(err.Error(), w.want)):
			t.Errorf("%s: got %v, want refused with %q", w.name, err, w.want)
		}
	}
}

// stepPods are the pods the writes below touch: a job's replica, the step's own pod, an
// earlier attempt's (labelled for the progress Service) and a pod that is no job's.
type stepPods struct{ replica, step, earlier, web *corev1.Pod }

// podWrites are the changes of pods the step may and may not make; ownStep's token is bound
// to the step's pod, step's to none.
func podWrites(ctx context.Context, ns string, step, ownStep kubernetes.Interface, pods stepPods) []writeCase {
	replica, stepPod, earlier, web := pods.replica, pods.step, pods.earlier, pods.web
	merge := func(client kubernetes.Interface, name, body string) error {
		_, err := client.CoreV1().Pods(ns).Patch(ctx, name, types.MergePatchType, []byte(body), metav1.PatchOptions{})
		return err
	}
	label := func(value string) string {
		return `{"metadata":{"labels":{"trainstep.dev/trainer-status":` + value + `}}}`
	}
	return []writeCase{
		{"re-attach a job's pod", func() error {
			return merge(step, replica.Name, `{"metadata":{"annotations":{"trainstep.dev/restarts":"1"}}}`)
		}, ""},
		{"change a pod that is no job's", func() error { return merge(step, web.Name, `{"metadata":{"annotations":{"x":"y"}}}`) }, "only its jobs' own objects"},
		{"label its own pod for the progress Service", func() error { return merge(ownStep, stepPod.Name, label(`"j"`)) }, ""},
		{"label another pod for the progress Service", func() error { return merge(ownStep, web.Name, label(`"j"`)) }, "only its jobs' own objects"},
		{"label its own pod without a token bound to it", func() error { return merge(step, stepPod.Name, label(`"k"`)) }, "only its jobs' own objects"},
		{"take the label off an earlier step's pod", func() error { return merge(step, earlier.Name, label("null")) }, ""},
		{"label its own pod and more", func() error {
			return merge(ownStep, stepPod.Name, `{"metadata":{"labels":{"trainstep.dev/trainer-status":"j","x":"y"}}}`)
		}, "only its jobs' own objects"},
		{"change a replica's image", func() error {
			_, err := step.CoreV1().Pods(ns).Patch(ctx, replica.Name, types.StrategicMergePatchType, []byte(`{"spec":{"containers":[{"name":"main","image":"example.com/evil:1"}]}}`), metav1.PatchOptions{})
			return err
		}, "never changes a running pod's image"},
		{"move a pod to another job", func() error {
			return merge(step, replica.Name, `{"metadata":{"labels":{"trainstep.dev/job-name":"k"}}}`)
		}, "trainstep.dev/job-name or trainstep.dev/identity"},
		{"give a pod an identity", func() error {
			return merge(step, replica.Name, `{"metadata":{"labels":{"trainstep.dev/identity":"x"}}}`)
		}, "trainstep.dev/job-name or trainstep.dev/identity"},
		{"delete a pod that is no job's", func() error { return step.CoreV1().Pods(ns).Delete(ctx, web.Name, metav1.DeleteOptions{}) }, "only its jobs' own objects"},
		{"delete a job's pod", func() error { return step.CoreV1().Pods(ns).Delete(ctx, replica.Name, metav1.DeleteOptions{}) }, ""},
	}
}

// objectWrites are the writes of other kinds the step may and may not make.
func objectWrites(ctx context.Context, ns string, step kubernetes.Interface) []writeCase {
	return []writeCase{
		{"write its settings", func() error {
			_, err := step.CoreV1().ConfigMaps(ns).Patch(ctx, "trainstep-policy", types.MergePatchType, []byte(`{"data":{"allowedSecrets":"*"}}`), metav1.PatchOptions{})
			return err
		}, "may not write it"},
		{"delete its settings", func() error {
			return step.CoreV1().ConfigMaps(ns).Delete(ctx, "trainstep-policy", metav1.DeleteOptions{DryRun: []string{metav1.DryRunAll}})
		}, "may not write it"},
		{"create its settings labelled as a job's", func() error {
			_, err := step.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "trainstep-policy",
				Labels: map[string]string{"trainstep.dev/job-name": "trainstep"}}}, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
			return err
		}, "may not write it"},
		{"a ConfigMap of no job", func() error {
			_, err := step.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "hf-token"}}, metav1.CreateOptions{})
			return err
		}, "only its jobs' own objects"},
		{"a job's ConfigMap of another name", func() error {
			_, err := step.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "settings",
				Labels: map[string]string{"trainstep.dev/job-name": "j"}}}, metav1.CreateOptions{})
			return err
		}, "are named j or j-"},
		{"the job's Service", func() error { return createService(ctx, step, ns, "j", corev1.ServiceTypeClusterIP, "j") }, ""},
		{"a NodePort Service", func() error { return createService(ctx, step, ns, "j-np", corev1.ServiceTypeNodePort, "j") }, "ClusterIP Service selecting the job's own pods"},
		{"a Service selecting another job", func() error { return createService(ctx, step, ns, "j-other", corev1.ServiceTypeClusterIP, "k") }, "ClusterIP Service selecting the job's own pods"},
		{"the job's NetworkPolicy", func() error { return createNetworkPolicy(ctx, step, ns, "j") }, ""},
		{"a NetworkPolicy selecting another job", func() error { return createNetworkPolicy(ctx, step, ns, "k") }, "selects the job's own pods"},
		{"the job's status Service, selecting the step pod by the job's identity", func() error {
			return createStatusService(ctx, step, ns, identity)
		}, ""},
		{"a status Service selecting another identity's step pod", func() error {
			return createStatusService(ctx, step, ns, "another-workflow-uid")
		}, "ClusterIP Service selecting the job's own pods"},
		{"the job's status NetworkPolicy, selecting the step pod by the job's identity", func() error {
			return createStatusNetworkPolicy(ctx, step, ns, identity)
		}, ""},
		{"a status NetworkPolicy selecting another identity's step pod", func() error {
			return createStatusNetworkPolicy(ctx, step, ns, "another-workflow-uid")
		}, "selects the job's own pods"},
		{"the job's Lease", func() error { return createLease(ctx, step, ns, "trainstep-j-"+identity[:16]) }, ""},
		{"the Lease of the job's name without its identity", func() error { return createLease(ctx, step, ns, "trainstep-j") }, "Leases are named trainstep-<job>-"},
		{"a Lease of another name", func() error { return createLease(ctx, step, ns, "kube-scheduler") }, "Leases are named trainstep-<job>-"},
	}
}

// identity is the owner identity the job of objectWrites carries: a Workflow's UID.
const identity = "6f1c2a9e-3b4d-4e5f-8a7b-9c0d1e2f3a4b"

// jobLabels are the labels of the job j of that identity.
func jobLabels() map[string]string {
	return map[string]string{"trainstep.dev/job-name": "j", "trainstep.dev/identity": identity}
}

func createStatusService(ctx context.Context, client kubernetes.Interface, ns, selects string) error {
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "j-status", Labels: jobLabels()},
		Spec: corev1.ServiceSpec{Selector: map[string]string{"trainstep.dev/trainer-status": selects}, Ports: []corev1.ServicePort{{Port: 8443}}}}
	_, err := client.CoreV1().Services(ns).Create(ctx, svc, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	return err
}

func createStatusNetworkPolicy(ctx context.Context, client kubernetes.Interface, ns, selects string) error {
	np := &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: "j-status", Labels: jobLabels()},
		Spec: networkingv1.NetworkPolicySpec{PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"trainstep.dev/trainer-status": selects}}}}
	_, err := client.NetworkingV1().NetworkPolicies(ns).Create(ctx, np, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	return err
}

func createService(ctx context.Context, client kubernetes.Interface, ns, name string, kind corev1.ServiceType, selects string) error {
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"trainstep.dev/job-name": "j"}},
		Spec: corev1.ServiceSpec{Type: kind, Selector: map[string]string{"trainstep.dev/job-name": selects}, Ports: []corev1.ServicePort{{Port: 2222}}}}
	_, err := client.CoreV1().Services(ns).Create(ctx, svc, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	return err
}

func createNetworkPolicy(ctx context.Context, client kubernetes.Interface, ns, selects string) error {
	np := &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: "j", Labels: map[string]string{"trainstep.dev/job-name": "j"}},
		Spec: networkingv1.NetworkPolicySpec{PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"trainstep.dev/job-name": selects}}}}
	_, err := client.NetworkingV1().NetworkPolicies(ns).Create(ctx, np, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	return err
}

func createLease(ctx context.Context, client kubernetes.Interface, ns, name string) error {
	lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: jobLabels()}}
	_, err := client.CoordinationV1().Leases(ns).Create(ctx, lease, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	return err
}

func resourceOf(q string) resource.Quantity { return resource.MustParse(q) }

// Every key of trainstep's and Argo's domains that trainstep puts on a replica's pod,
// whatever its gang, and each gang's group, is one the admission policy names: a key added
// to the renderer and not to the policy would have the API server refuse every such pod.
// (The policy leaves the gangs' other keys to their webhooks, which add some of their own.)
func TestAdmissionPolicyKnowsTheKeysTrainstepSets(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(repoRoot(t), testutil.AdmissionPolicyFile))
	if err != nil {
		t.Fatal(err)
	}
	text := string(data)
	const manifest = `apiVersion: trainstep.dev/v1alpha1
kind: TrainJob
metadata: {name: j}
spec:
  framework: pytorch
  replicaSpecs:
    Master: {template: {spec: {containers: [{name: pytorch, image: example.com/train:1}]}}}
    Worker: {replicas: 2, template: {spec: {containers: [{name: pytorch, image: example.com/train:1}]}}}
`
	seen := 0
	for _, gang := range []string{"none", "builtin", "kubernetes", "scheduler-plugins", "volcano", "kueue"} {
		opts := spec.Options{Gang: gang, Sets: []string{"spec.runPolicy.schedulingPolicy.queue=q"}}
		job, _, err := spec.Load([]byte(manifest), opts)
		if err != nil {
			t.Fatal(err)
		}
		id := render.Identity{Namespace: "ml", JobName: job.Name, OwnerID: identity, Labels: map[string]string{"workflows.argoproj.io/workflow": "wf"}}
		pod, err := render.Pod(job, id, "Worker", 1, 2)
		if err != nil {
			t.Fatal(err)
		}
		// The controller adds these as it creates a pod of a later attempt (pkg/reconcile/sync.go).
		for _, key := range []string{v1alpha1.AnnotationRestarts, v1alpha1.AnnotationJobRestarts, v1alpha1.AnnotationRestartReason} {
			pod.Annotations[key] = "1"
		}
		pod.Labels[v1alpha1.LabelJobAttempt] = "1"
		for what, keys := range map[string]map[string]string{"label": pod.Labels, "annotation": pod.Annotations} {
			for key := range keys {
				domain := replicapolicy.ReservedDomain(key)
				if domain != "trainstep.dev" && domain != "workflows.argoproj.io" && !strings.HasSuffix(key, "group-name") && !strings.HasSuffix(key, "/pod-group") {
					continue
				}
				seen++
				if !strings.Contains(text, "'"+key+"'") {
					t.Errorf("gang %s: the pod's %s %s is not in %s", gang, what, key, testutil.AdmissionPolicyFile)
				}
			}
		}
	}
	if seen < 20 {
		t.Errorf("saw %d keys on the rendered pods, want trainstep's own and the gangs' groups (at least 20)", seen)
	}
}
