package e2e_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/trainstep/trainstep/internal/testutil"
	"github.com/trainstep/trainstep/pkg/render"
	"github.com/trainstep/trainstep/pkg/replicapolicy"
	"github.com/trainstep/trainstep/pkg/spec"
	"github.com/trainstep/trainstep/test/cluster"
)

// applyAdmissionPolicy applies the shipped ValidatingAdmissionPolicy and its binding as a
// cluster admin would (`kubectl apply -f`), for every namespace: every step of the package's
// tests writes through it, with its namespace's trainstep-policy ConfigMap as parameter.
func applyAdmissionPolicy(ctx context.Context, c *cluster.Cluster, root string) error {
	policies, err := testutil.ReadAdmissionPolicies(root, "")
	if err != nil {
		return err
	}
	return policies.Apply(ctx, c.Client)
}

// allowInPolicy adds value to the list setting key of the namespace's trainstep-policy
// ConfigMap, as the namespace's admin would, for the steps and the admission policy alike.
func (e *e2e) allowInPolicy(t *testing.T, key, value string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	configMaps := e.c.Client.CoreV1().ConfigMaps(e.namespace)
	cm, err := configMaps.Get(ctx, replicapolicy.ConfigMapName, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("reading the namespace's settings: %v", err)
	}
	list := replicapolicy.SplitList(cm.Data[key])
	for _, v := range list {
		if v == value {
			return
		}
	}
	if cm.Data == nil {
		cm.Data = map[string]string{}
	}
	cm.Data[key] = strings.Join(append(list, value), ",")
	if _, err := configMaps.Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("allowing %s %s: %v", key, value, err)
	}
}

// applyExamplesPolicy replaces the namespace's settings with workflows/policy.yaml's, as
// workflows/README.md tells a namespace that runs the examples.
func (e *e2e) applyExamplesPolicy(t *testing.T) {
	t.Helper()
	var cm corev1.ConfigMap
	readYAML(t, filepath.Join(repoRoot(t), "workflows", "policy.yaml"), &cm)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := e.c.Client.CoreV1().ConfigMaps(e.namespace).Update(ctx, &cm, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("applying workflows/policy.yaml: %v", err)
	}
}

// admissionJob is a replica as trainstep renders one in a namespace enforcing PodSecurity
// restricted; the cases add to it.
const admissionJob = `apiVersion: trainstep.dev/v1alpha1
kind: TrainJob
metadata: {name: victimless}
spec:
  framework: pytorch
  replicaSpecs:
    Master:
      template:
        spec:
          securityContext: {runAsNonRoot: true, runAsUser: 65532, seccompProfile: {type: RuntimeDefault}}
          containers: [{name: pytorch, image: example.com/train:1, securityContext: {allowPrivilegeEscalation: false, capabilities: {drop: [ALL]}}}]
`

// reservedKey is the label a case adds to the rendered pod: no setting allows it in a template.
const reservedKey = "trainstep.dev/trainer-status"

// renderedReplica is admissionJob's replica as trainstep would render it into ns, with set
// applied, had the settings allowed what set adds; a set that the replica policy allows
// with the strict settings fails the test, which would prove nothing of the admission policy.
func renderedReplica(t *testing.T, ns, set string) *corev1.Pod {
	t.Helper()
	open := replicapolicy.Policy{AllowPrivileged: true, Secrets: []string{"*"}, PVCs: []string{"*"}, PriorityClasses: []string{"system-node-critical"}}
	opts := spec.Options{Policy: open}
	if set != "" && !strings.Contains(set, reservedKey) {
		opts.Sets = []string{set}
	}
	job, _, err := spec.Load([]byte(admissionJob), opts)
	if err != nil {
		t.Fatal(err)
	}
	if set != "" {
		if _, _, err := spec.Load([]byte(admissionJob), spec.Options{Sets: []string{set}}); err == nil {
			t.Fatalf("%s: the replica policy allows it; the case must be one it refuses", set)
		}
	}
	pod, err := render.Pod(job, render.Identity{Namespace: ns, JobName: job.Name}, "Master", 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(set, reservedKey) {
		pod.Labels[reservedKey] = "other-job"
	}
	return pod
}

// The shipped admission policy, bound for every namespace, refuses what the replica policy
// refuses when a step that no longer runs trainstep tries it: pods created as the trainstep
// ServiceAccount that mount another job's SSH key, read the namespace's credentials or use
// the host are refused by the API server, naming why; a pod as trainstep renders it passes,
// and so does one whose Secret the namespace's settings allow. The step may not widen its
// settings, nor touch what is no job's.
func TestRealNodeAdmissionPolicyRefusesWhatTheReplicaPolicyRefuses(t *testing.T) {
	t.Parallel()
	e := setUp(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	step := kubernetes.NewForConfigOrDie(e.c.ConfigForToken(e.c.ServiceAccountToken(t, e.namespace, "trainstep")))

	create := func(pod *corev1.Pod) error {
		_, err := step.CoreV1().Pods(e.namespace).Create(ctx, pod, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return err
	}
	const tmpl = "spec.replicaSpecs.Master.template.spec"
	// The policy is compiled after it is created and the binding's parameter looked up
	// from the API server's cache: wait until it refuses.
	testutil.Eventually(t, time.Minute, "the admission policy refusing another job's SSH key", func(ctx context.Context) (bool, error) {
		err := create(renderedReplica(t, e.namespace, tmpl+".volumes=[{name: ssh, secret: {secretName: other-job-ssh}}]"))
		return err != nil && strings.Contains(err.Error(), "refused: other-job-ssh"), nil
	})
	refused := map[string]string{
		tmpl + ".containers[0].envFrom=[{secretRef: {name: artifact-store}}]":                  "refused: artifact-store",
		tmpl + ".volumes=[{name: data, persistentVolumeClaim: {claimName: team-b-data}}]":      "refused: team-b-data",
		tmpl + ".tolerations=[{key: node-role.kubernetes.io/control-plane, operator: Exists}]": "control plane's taints",
		tmpl + ".priorityClassName=system-node-critical":                                       "not system-node-critical",
		"spec.replicaSpecs.Master.template.metadata.labels={" + reservedKey + ": other-job}":   "only the trainstep.dev",
	}
	for set, want := range refused {
		if err := create(renderedReplica(t, e.namespace, set)); err == nil || !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want refused with %q", set, err, want)
		}
	}
	if err := create(renderedReplica(t, e.namespace, "")); err != nil {
		t.Errorf("a replica as trainstep renders it: %v", err)
	}
	e.allowInPolicy(t, "allowedSecrets", "hf-token")
	withToken := renderedReplica(t, e.namespace, tmpl+".containers[0].env=[{name: HF_TOKEN, valueFrom: {secretKeyRef: {name: hf-token, key: token}}}]")
	testutil.Eventually(t, time.Minute, "the admission policy reading the allowed Secret", func(ctx context.Context) (bool, error) {
		return create(withToken) == nil, nil
	})

	// Its settings and what is no job's are out of the step's reach.
	widen := []byte(`{"data":{"allowedSecrets":"*"}}`)
	_, err := step.CoreV1().ConfigMaps(e.namespace).Patch(ctx, replicapolicy.ConfigMapName, types.MergePatchType, widen, metav1.PatchOptions{})
	if err == nil || !strings.Contains(err.Error(), "its steps may not write it") {
		t.Errorf("the step widening its own settings: %v, want refused", err)
	}
	teams := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "team-settings", Namespace: e.namespace}}
	if _, err := e.c.Client.CoreV1().ConfigMaps(e.namespace).Create(ctx, teams, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	err = step.CoreV1().ConfigMaps(e.namespace).Delete(ctx, teams.Name, metav1.DeleteOptions{})
	if err == nil || !strings.Contains(err.Error(), "only its jobs' own objects") {
		t.Errorf("the step deleting a ConfigMap that is no job's: %v, want refused", err)
	}
}
