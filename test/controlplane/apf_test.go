package controlplane_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/trainstep/trainstep/pkg/result"
	"github.com/trainstep/trainstep/test/cluster"
)

// API Priority and Fairness gives the step's ServiceAccount a priority
// level of the least concurrency and rejects what does not fit (429, with a
// Retry-After): the launch of a job of 24 workers and its teardown are
// throttled, and the run still ends Succeeded, each replica created once,
// nothing left.
func TestAPIPriorityAndFairnessThrottlesLaunchAndTeardown(t *testing.T) {
	c := cluster.Get(t)
	ns := c.Namespace(t)
	const job, workers = "throttled", 24
	kubeconfig := deployedStep(t, c, ns)
	schema := throttle(t, c, ns, "trainstep")
	before := rejected(t, c, schema)
	history := recordPods(t, c, ns, job)
	cfg := config(t, c, ns, psJob(t, job, workers, 20*time.Second), kubeconfig)
	wait := start(t, cfg)
	waitRunning(t, c, ns, job, workers+1)
	launch := rejected(t, c, schema) - before
	o := wait()
	checkEnded(t, c, ns, job, cfg, o, result.PhaseSucceeded, result.ReasonSucceeded, "0")
	teardown := rejected(t, c, schema) - before - launch
	t.Logf("requests rejected with 429: %.0f while the job launched, %.0f after (its run and teardown)", launch, teardown)
	if launch == 0 || teardown == 0 {
		t.Errorf("API Priority and Fairness rejected %.0f requests of the launch and %.0f after: the test did not throttle both", launch, teardown)
	}
	if d := history.duplicates(); len(d) > 0 {
		t.Errorf("replicas created twice: %v", d)
	}
	if n := history.count(); n != workers+1 {
		t.Errorf("%d pods created, want %d", n, workers+1)
	}
}

// deployedStep applies deploy/'s ServiceAccount, Role and RoleBinding in ns
// and returns a kubeconfig of that ServiceAccount (API Priority and
// Fairness exempts the cluster's admins).
func deployedStep(t *testing.T, c *cluster.Cluster, ns string) string {
	t.Helper()
	ctx := context.Background()
	var sa corev1.ServiceAccount
	var role rbacv1.Role
	var binding rbacv1.RoleBinding
	deployFile(t, "serviceaccount.yaml", &sa)
	deployFile(t, "role.yaml", &role)
	deployFile(t, "rolebinding.yaml", &binding)
	binding.Subjects[0].Namespace = ns
	if _, err := c.Client.CoreV1().ServiceAccounts(ns).Create(ctx, &sa, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Client.RbacV1().Roles(ns).Create(ctx, &role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Client.RbacV1().RoleBindings(ns).Create(ctx, &binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	return c.KubeconfigForToken(t, c.ServiceAccountToken(t, ns, sa.Name), ns)
}

// deployFile decodes a file of deploy/ into obj.
func deployFile(t *testing.T, path string, obj any) {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	b, err := os.ReadFile(filepath.Join(filepath.Dir(file), "..", "..", "deploy", path))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.UnmarshalStrict(b, obj); err != nil {
		t.Fatalf("deploy/%s: %v", path, err)
	}
}

// throttle puts ServiceAccount sa of ns in a priority level of its own,
// of the least concurrency, whose requests that do not fit are rejected at
// once; it returns the FlowSchema's name, and removes both when the test
// ends.
func throttle(t *testing.T, c *cluster.Cluster, ns, sa string) string {
	t.Helper()
	ctx := context.Background()
	name := "throttle-" + ns
	one, zero := int32(1), int32(0)
	plc := &flowcontrolv1.PriorityLevelConfiguration{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: flowcontrolv1.PriorityLevelConfigurationSpec{Type: flowcontrolv1.PriorityLevelEnablementLimited,
			Limited: &flowcontrolv1.LimitedPriorityLevelConfiguration{NominalConcurrencyShares: &one, LendablePercent: &zero,
				LimitResponse: flowcontrolv1.LimitResponse{Type: flowcontrolv1.LimitResponseTypeReject}}}}
	fs := &flowcontrolv1.FlowSchema{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: flowcontrolv1.FlowSchemaSpec{PriorityLevelConfiguration: flowcontrolv1.PriorityLevelConfigurationReference{Name: name},
			MatchingPrecedence:  100,
			DistinguisherMethod: &flowcontrolv1.FlowDistinguisherMethod{Type: flowcontrolv1.FlowDistinguisherMethodByUserType},
			Rules: []flowcontrolv1.PolicyRulesWithSubjects{{
				Subjects: []flowcontrolv1.Subject{{Kind: flowcontrolv1.SubjectKindServiceAccount,
					ServiceAccount: &flowcontrolv1.ServiceAccountSubject{Name: sa, Namespace: ns}}},
				ResourceRules: []flowcontrolv1.ResourcePolicyRule{{Verbs: []string{"*"}, APIGroups: []string{"*"}, Resources: []string{"*"},
					Namespaces: []string{"*"}, ClusterScope: true}},
				NonResourceRules: []flowcontrolv1.NonResourcePolicyRule{{Verbs: []string{"*"}, NonResourceURLs: []string{"*"}}},
			}}}}
	if _, err := c.Client.FlowcontrolV1().PriorityLevelConfigurations().Create(ctx, plc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Client.FlowcontrolV1().FlowSchemas().Create(ctx, fs, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = c.Client.FlowcontrolV1().FlowSchemas().Delete(context.Background(), name, metav1.DeleteOptions{})
		_ = c.Client.FlowcontrolV1().PriorityLevelConfigurations().Delete(context.Background(), name, metav1.DeleteOptions{})
	})
	// The API server applies new flow schemas a moment after they are written.
	time.Sleep(2 * time.Second)
	return name
}

// rejected is how many requests kube-apiserver rejected for flowSchema
// (apiserver_flowcontrol_rejected_requests_total).
func rejected(t *testing.T, c *cluster.Cluster, flowSchema string) float64 {
	t.Helper()
	body, err := c.Client.Discovery().RESTClient().Get().AbsPath("/metrics").DoRaw(context.Background())
	if err != nil {
		t.Fatalf("reading kube-apiserver's metrics: %v", err)
	}
	var total float64
	for _, line := range strings.Split(string(body), "\n") {
		if !strings.HasPrefix(line, "apiserver_flowcontrol_rejected_requests_total{") || !strings.Contains(line, fmt.Sprintf("flow_schema=%q", flowSchema)) {
			continue
		}
		fields := strings.Fields(line)
		n, err := strconv.ParseFloat(fields[len(fields)-1], 64)
		if err == nil {
			total += n
		}
	}
	return total
}
