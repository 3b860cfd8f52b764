package executor_test

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/trainstep/trainstep/executor"
	"github.com/trainstep/trainstep/pkg/apis/trainstep/v1alpha1"
	"github.com/trainstep/trainstep/pkg/result"
	"github.com/trainstep/trainstep/test/cluster"
)

// applyDeploy creates deploy/'s ServiceAccount, Role and RoleBinding in ns,
// and those of deploy/secrets/ (what MPI jobs and the progress endpoint
// need) when secrets is set.
func applyDeploy(t *testing.T, c *cluster.Cluster, ns string, secrets bool) {
	t.Helper()
	applyDeployWith(t, c, ns, nil)
	if secrets {
		applySecretsRole(t, c, ns)
	}
}

// deployFile decodes a file of deploy/ (path relative to it) into obj.
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

// applyDeployWith is applyDeploy without deploy/secrets/, with the Role
// changed by edit first.
func applyDeployWith(t *testing.T, c *cluster.Cluster, ns string, edit func(*rbacv1.Role)) {
	t.Helper()
	var sa corev1.ServiceAccount
	deployFile(t, "serviceaccount.yaml", &sa)
	if _, err := c.Client.CoreV1().ServiceAccounts(ns).Create(context.Background(), &sa, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	applyRole(t, c, ns, "role.yaml", "rolebinding.yaml", edit)
}

// applySecretsRole creates deploy/secrets/'s Role and RoleBinding in ns.
func applySecretsRole(t *testing.T, c *cluster.Cluster, ns string) {
	t.Helper()
	applyRole(t, c, ns, "secrets/role.yaml", "secrets/rolebinding.yaml", nil)
}

func applyRole(t *testing.T, c *cluster.Cluster, ns, roleFile, bindingFile string, edit func(*rbacv1.Role)) {
	t.Helper()
	var role rbacv1.Role
	var binding rbacv1.RoleBinding
	deployFile(t, roleFile, &role)
	deployFile(t, bindingFile, &binding)
	if edit != nil {
		edit(&role)
	}
	ctx := context.Background()
	if _, err := c.Client.RbacV1().Roles(ns).Create(ctx, &role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	binding.Subjects[0].Namespace = ns
	if _, err := c.Client.RbacV1().RoleBindings(ns).Create(ctx, &binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func TestTheDeployedRoleIsEnoughAndOnlyInItsNamespace(t *testing.T) {
	t.Parallel()
	c := cluster.Get(t)
	ns, other := c.Namespace(t), c.Namespace(t)
	applyDeploy(t, c, ns, true) // MPI keeps its SSH key in a Secret
	kubeconfig := c.KubeconfigForToken(t, c.ServiceAccountToken(t, ns, "trainstep"), ns)
	owner := ownerPod(t, c, ns, "step")
	job := newJob("rbac", v1alpha1.FrameworkMPI).replicas(launcher, 1, exitsAfter("3s", 0)).replicas(worker, 2, nil)

	ok := runJob(t, c, ns, job.yaml(t), func(cfg *executor.Config) {
		cfg.Kubeconfig = kubeconfig
		cfg.OwnerPod, cfg.OwnerUID = owner.Name, string(owner.UID)
	})
	if ok.res.Phase != result.PhaseSucceeded {
		t.Fatalf("as the deployed ServiceAccount: phase %s (%s)", ok.res.Phase, ok.res.Message)
	}

	denied := runJob(t, c, ns, job.yaml(t), func(cfg *executor.Config) {
		cfg.Kubeconfig = kubeconfig
		cfg.SpecOptions.Namespace = other
		cfg.PodNamespace = other
	})
	if denied.res.Phase != result.PhaseInvalid || !strings.Contains(denied.res.Message, "cannot create pods") {
		t.Fatalf("in another namespace: phase %s message %q, want Invalid naming the missing permission", denied.res.Phase, denied.res.Message)
	}
	if pods := listPods(t, c, other, "rbac"); len(pods) != 0 {
		t.Errorf("the denied run created %d pods", len(pods))
	}
}

func TestATokenWithoutRightsIsInvalidAndCreatesNothing(t *testing.T) {
	t.Parallel()
	c := cluster.Get(t)
	ns := c.Namespace(t)
	kubeconfig := c.KubeconfigForToken(t, c.ServiceAccountToken(t, ns, "nobody"), ns)
	job := newJob("norights", v1alpha1.FrameworkTensorFlow).replicas(worker, 1, nil)

	p := startBinary(t, "run", "-f", writeFile(t, job.yaml(t)), "--kubeconfig", kubeconfig)
	if code := p.wait(t, time.Minute); code != result.ExitInvalid {
		t.Errorf("exit code %d, want %d; stderr:\n%s", code, result.ExitInvalid, p.stderr)
	}
	if !strings.Contains(p.stderr.String(), "missing permission") {
		t.Errorf("stderr does not name the missing permission:\n%s", p.stderr)
	}
	if pods := listPods(t, c, ns, "norights"); len(pods) != 0 {
		t.Errorf("created %d pods without rights", len(pods))
	}
}

// TestARoleWithoutConfigMapsIsInvalidForATensorFlowJob: a TensorFlow job
// writes its cluster ConfigMap, so a Role without configmaps ends the run
// Invalid (exit 11) naming the verb before anything is created, rather than
// Transient once the ConfigMap informer never syncs.
func TestARoleWithoutConfigMapsIsInvalidForATensorFlowJob(t *testing.T) {
	t.Parallel()
	c := cluster.Get(t)
	ns := c.Namespace(t)
	removed := false
	applyDeployWith(t, c, ns, func(role *rbacv1.Role) {
		for n, rule := range role.Rules {
			if i := slices.Index(rule.Resources, "configmaps"); i >= 0 {
				rule.Resources = slices.Delete(rule.Resources, i, i+1)
				removed = true
			}
			role.Rules[n] = rule
		}
	})
	if !removed {
		t.Fatal("deploy/role.yaml grants no configmaps: nothing to take away")
	}
	kubeconfig := c.KubeconfigForToken(t, c.ServiceAccountToken(t, ns, "trainstep"), ns)
	owner := ownerPod(t, c, ns, "step")
	job := newJob("nocm", v1alpha1.FrameworkTensorFlow).replicas(worker, 2, exitsAfter("3s", 0))

	start := time.Now()
	out := runJob(t, c, ns, job.yaml(t), func(cfg *executor.Config) {
		cfg.Kubeconfig = kubeconfig
		cfg.OwnerPod, cfg.OwnerUID = owner.Name, string(owner.UID)
		cfg.APITimeout = time.Minute
	})
	if out.res.Phase.ExitCode() != result.ExitInvalid || !strings.Contains(out.res.Message, "cannot create configmaps") {
		t.Fatalf("phase %s reason %s message %q, want Invalid (exit 11) naming create configmaps", out.res.Phase, out.res.Reason, out.res.Message)
	}
	if took := time.Since(start); took > 30*time.Second {
		t.Errorf("took %s: the refusal waited on something", took)
	}
	checkNothingOfTheJob(t, c, ns, "nocm")
}

// TestTheDefaultRoleRunsJobsWithoutSecretsAndRefusesMPI: deploy/ without
// deploy/secrets/ grants no Secrets. A TensorFlow job whose step would serve
// the progress endpoint still runs, without the endpoint and saying why; an
// MPI job, whose SSH key must be in a Secret, ends Invalid (exit 11) naming
// the verbs and deploy/secrets/ before anything is created; with
// deploy/secrets/ applied the same MPI job runs.
func TestTheDefaultRoleRunsJobsWithoutSecretsAndRefusesMPI(t *testing.T) {
	t.Parallel()
	c := cluster.Get(t)
	ns := c.Namespace(t)
	applyDeploy(t, c, ns, false)
	kubeconfig := c.KubeconfigForToken(t, c.ServiceAccountToken(t, ns, "trainstep"), ns)
	owner := ownerPod(t, c, ns, "step")
	warningsCore, warnings := observer.New(zap.WarnLevel)
	asStep := func(cfg *executor.Config) {
		cfg.Kubeconfig = kubeconfig
		cfg.OwnerPod, cfg.OwnerUID = owner.Name, string(owner.UID)
		cfg.TrainerStatus, cfg.TrainerStatusAddress = true, "127.0.0.1:0"
		cfg.Logger = zap.New(zapcore.NewTee(cfg.Logger.Core(), warningsCore))
	}

	tf := runJob(t, c, ns, newJob("tf", v1alpha1.FrameworkTensorFlow).replicas(worker, 2, exitsAfter("3s", 0)).yaml(t), asStep)
	if tf.res.Phase != result.PhaseSucceeded {
		t.Fatalf("TensorFlow without Secrets: phase %s (%s), want Succeeded", tf.res.Phase, tf.res.Message)
	}
	endpointWarnings := warnings.FilterMessageSnippet("no progress endpoint").FilterMessageSnippet("deploy/secrets/role.yaml").FilterMessageSnippet("create secrets")
	if endpointWarnings.Len() != 1 {
		t.Errorf("no warning that the progress endpoint is off for want of Secrets (naming the verb and deploy/secrets/); warnings: %v", warnings.All())
	}
	if _, err := c.Client.CoreV1().Secrets(ns).Get(context.Background(), v1alpha1.TrainerStatusName("tf"), metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the progress endpoint's Secret: %v, want none made", err)
	}

	mpi := newJob("mpi", v1alpha1.FrameworkMPI).replicas(launcher, 1, exitsAfter("3s", 0)).replicas(worker, 2, nil)
	start := time.Now()
	denied := runJob(t, c, ns, mpi.yaml(t), asStep)
	if denied.res.Phase.ExitCode() != result.ExitInvalid {
		t.Fatalf("MPI without Secrets: phase %s (%s), want Invalid (exit 11)", denied.res.Phase, denied.res.Message)
	}
	for _, want := range []string{"cannot create secrets", "cannot get secrets", "deploy/secrets/role.yaml"} {
		if !strings.Contains(denied.res.Message, want) {
			t.Errorf("message %q does not name %q", denied.res.Message, want)
		}
	}
	if strings.Contains(denied.res.Message, "pods") || strings.Contains(denied.res.Message, "configmaps") {
		t.Errorf("message %q names a permission deploy/role.yaml grants", denied.res.Message)
	}
	if took := time.Since(start); took > 30*time.Second {
		t.Errorf("took %s: the refusal waited on something", took)
	}
	checkNothingOfTheJob(t, c, ns, "mpi")

	applySecretsRole(t, c, ns)
	ok := runJob(t, c, ns, mpi.yaml(t), asStep)
	if ok.res.Phase != result.PhaseSucceeded {
		t.Fatalf("MPI with deploy/secrets/: phase %s (%s), want Succeeded", ok.res.Phase, ok.res.Message)
	}
}

// checkNothingOfTheJob: no pod, Service, ConfigMap, Secret or Lease of job
// exists in ns.
func checkNothingOfTheJob(t *testing.T, c *cluster.Cluster, ns, job string) {
	t.Helper()
	ctx := context.Background()
	selector := metav1.ListOptions{LabelSelector: v1alpha1.LabelJobName + "=" + job}
	if pods := listPods(t, c, ns, job); len(pods) != 0 {
		t.Errorf("created %d pods", len(pods))
	}
	if svcs := listServices(t, c, ns, job); len(svcs) != 0 {
		t.Errorf("created %d services", len(svcs))
	}
	if cms, err := c.Client.CoreV1().ConfigMaps(ns).List(ctx, selector); err != nil || len(cms.Items) != 0 {
		t.Errorf("configmaps of the job: %v, %v", cms, err)
	}
	if secrets, err := c.Client.CoreV1().Secrets(ns).List(ctx, selector); err != nil || len(secrets.Items) != 0 {
		t.Errorf("secrets of the job: %v, %v", secrets, err)
	}
	if leases, err := c.Client.CoordinationV1().Leases(ns).List(ctx, selector); err != nil || len(leases.Items) != 0 {
		t.Errorf("the job's Leases: %v, %v; want none", leases, err)
	}
}
