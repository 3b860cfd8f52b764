package executor

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/cenkalti/backoff/v4"
	authorizationv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	authenticationv1client "k8s.io/client-go/kubernetes/typed/authentication/v1"
	authorizationv1client "k8s.io/client-go/kubernetes/typed/authorization/v1"
	coordinationv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/util/flowcontrol"
	metricsv1beta1 "k8s.io/metrics/pkg/apis/metrics/v1beta1"
	metricsclient "k8s.io/metrics/pkg/client/clientset/versioned/typed/metrics/v1beta1"

	"github.com/trainstep/trainstep/pkg/apierr"
	"github.com/trainstep/trainstep/pkg/apistats"
	"github.com/trainstep/trainstep/pkg/gang"
	"github.com/trainstep/trainstep/pkg/reconcile"
	"github.com/trainstep/trainstep/pkg/render"
	"github.com/trainstep/trainstep/pkg/result"
)

// connection is a client for the cluster and the namespace the job runs in.
// It holds only the API groups trainstep uses: the full clientset links the
// client of every group, which costs the step megabytes of resident memory.
type connection struct {
	core          corev1client.CoreV1Interface
	coordination  coordinationv1client.CoordinationV1Interface
	authorization authorizationv1client.AuthorizationV1Interface
	// authentication asks which pod the step's credentials are bound to.
	authentication authenticationv1client.AuthenticationV1Interface
	// metadata reads objects' metadata alone: whether an object of a name
	// the job uses is the job's, without reading a Secret's data.
	metadata  metadata.Interface
	discovery discovery.ServerResourcesInterface
	dynamic   dynamic.Interface
	// podMetrics reads metrics.k8s.io (elasticPolicy.metrics).
	podMetrics reconcile.PodMetricsLister
	namespace  string
	// requests counts the run's API requests when Config.APIStatsFile is set.
	requests *apistats.Counter
	// absentSecrets are the Secrets of names the job uses that the
	// preflight found absent: readOwnSecret does not ask again, moments
	// later, before the run holds the Lease (a Secret created in between
	// meets the run's own create).
	absentSecrets map[string]bool
	// rules are the identity's rules the preflight's SelfSubjectRulesReview
	// returned (nil before it).
	rules *authorizationv1.SubjectRulesReviewStatus
}

// connect builds the client as kubectl does: --kubeconfig, else the files
// of $KUBECONFIG or ~/.kube/config (resolved by the caller), else the
// in-cluster config. The namespace follows DESIGN's order: -n or
// metadata.namespace (already in jobNamespace), the step pod's own, then
// the kubeconfig's.
func connect(cfg *Config, jobNamespace string) (*connection, error) {
	loader := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(
		&clientcmd.ClientConfigLoadingRules{ExplicitPath: cfg.Kubeconfig, Precedence: cfg.KubeconfigPaths},
		&clientcmd.ConfigOverrides{CurrentContext: cfg.KubeContext})
	restConfig, err := loader.ClientConfig()
	switch {
	case clientcmd.IsEmptyConfig(err):
		return nil, result.Invalid(result.ReasonNoCluster, errors.New(
			"no cluster to run on: no --kubeconfig, no $KUBECONFIG, no ~/.kube/config, and not inside a cluster (--local runs the job on this machine)"))
	case err != nil:
		return nil, result.Invalid(result.ReasonInvalidKubeconfig, fmt.Errorf("loading the kubeconfig: %w", err))
	}
	kubeNamespace, _, _ := loader.Namespace()
	restConfig.QPS, restConfig.Burst = cfg.QPS, cfg.Burst
	if cfg.QPS <= 0 {
		// No client-side limit: client-go reads 0 as its default of 5 per
		// second, a negative value as none. The API server's priority and
		// fairness queues the requests, and client-go retries its 429s
		// after the Retry-After they carry.
		restConfig.QPS = -1
	}
	restConfig.UserAgent = "trainstep"
	var requests *apistats.Counter
	if cfg.APIStatsFile != "" {
		requests = apistats.New()
		restConfig.Wrap(requests.Wrap)
	}
	if cfg.Timeline != nil {
		restConfig.Wrap(cfg.Timeline.Wrap)
		if restConfig.QPS > 0 {
			restConfig.RateLimiter = cfg.Timeline.RateLimiter(flowcontrol.NewTokenBucketRateLimiter(restConfig.QPS, restConfig.Burst))
		}
	}
	conn, err := newConnection(restConfig)
	if err != nil {
		return nil, result.Invalid(result.ReasonInvalidSpec, fmt.Errorf("building the Kubernetes client: %w", err))
	}
	ns := firstNonEmpty(jobNamespace, cfg.PodNamespace, kubeNamespace, metav1.NamespaceDefault)
	conn.namespace, conn.requests = ns, requests
	return conn, nil
}

// newConnection builds the group clients over one HTTP client and one rate
// limiter, as the full clientset would, so --kube-api-qps is one budget.
func newConnection(restConfig *rest.Config) (*connection, error) {
	if restConfig.RateLimiter == nil && restConfig.QPS > 0 {
		restConfig.RateLimiter = flowcontrol.NewTokenBucketRateLimiter(restConfig.QPS, restConfig.Burst)
	}
	// Protobuf, as Kubernetes' own controllers speak: encoding the pods, and
	// decoding them on both sides, costs several times less than JSON. The
	// dynamic client (PodGroups) speaks JSON whatever this says.
	restConfig.ContentType = runtime.ContentTypeProtobuf
	restConfig.AcceptContentTypes = runtime.ContentTypeProtobuf + "," + runtime.ContentTypeJSON
	httpClient, err := rest.HTTPClientFor(restConfig)
	if err != nil {
		return nil, err
	}
	c := &connection{}
	if c.core, err = corev1client.NewForConfigAndClient(restConfig, httpClient); err != nil {
		return nil, err
	}
	if c.coordination, err = coordinationv1client.NewForConfigAndClient(restConfig, httpClient); err != nil {
		return nil, err
	}
	if c.authorization, err = authorizationv1client.NewForConfigAndClient(restConfig, httpClient); err != nil {
		return nil, err
	}
	if c.authentication, err = authenticationv1client.NewForConfigAndClient(restConfig, httpClient); err != nil {
		return nil, err
	}
	if c.metadata, err = metadata.NewForConfigAndClient(restConfig, httpClient); err != nil {
		return nil, err
	}
	if c.discovery, err = discovery.NewDiscoveryClientForConfigAndClient(restConfig, httpClient); err != nil {
		return nil, err
	}
	if c.dynamic, err = dynamic.NewForConfigAndClient(restConfig, httpClient); err != nil {
		return nil, err
	}
	// JSON: metrics-server and other aggregated servers need not speak protobuf.
	metricsConfig := rest.CopyConfig(restConfig)
	metricsConfig.ContentType, metricsConfig.AcceptContentTypes = runtime.ContentTypeJSON, runtime.ContentTypeJSON
	metrics, err := metricsclient.NewForConfigAndClient(metricsConfig, httpClient)
	if err != nil {
		return nil, err
	}
	c.podMetrics = podMetricsLister{metrics}
	return c, nil
}

// podMetricsLister lists pod usage with the metrics clientset.
type podMetricsLister struct {
	client metricsclient.PodMetricsesGetter
}

func (l podMetricsLister) List(ctx context.Context, namespace string, opts metav1.ListOptions) (*metricsv1beta1.PodMetricsList, error) {
	return l.client.PodMetricses(namespace).List(ctx, opts)
}

func firstNonEmpty(values ...string) string {
	for _, v := range values {
		if v != "" {
			return v
		}
	}
	return ""
}

// permission is one verb on one resource the job needs.
type permission struct {
	verb, group, resource, subresource string
}

func (p permission) String() string {
	r := p.resource
	if p.group != "" {
		r += "." + p.group
	}
	if p.subresource != "" {
		r += "/" + p.subresource
	}
	return p.verb + " " + r
}

// requiredPermissions lists what the run needs in its namespace to create,
// watch and delete the objects it rendered (planned: every kind it will
// create; its pods are rendered one at a time, so every run has them).
// A ConfigMap or Secret the renderer made is a kind the controller watches
// and writes, so the rights follow the rendered objects rather than the
// framework: TensorFlow's cluster ConfigMap needs them as MPI's hostfile
// does. events says the run records events on its owner.
func requiredPermissions(planned *render.Objects, events, podMetrics bool) []permission {
	var perms []permission
	add := func(group, resource string, verbs ...string) {
		for _, v := range verbs {
			perms = append(perms, permission{verb: v, group: group, resource: resource})
		}
	}
	add("", "pods", "create", "get", "list", "watch", "delete", "patch")
	perms = append(perms, permission{verb: "get", resource: "pods", subresource: "log"})
	// Services are watched whether or not the job renders any.
	add("", "services", "create", "list", "watch", "delete", "patch")
	if len(planned.ConfigMaps) > 0 {
		add("", "configmaps", "create", "list", "watch", "delete", "patch")
	}
	if len(planned.Secrets) > 0 {
		// MPI's SSH key, read by name (get: a retry of the step reuses the
		// Secret an earlier attempt made, and re-attaches it with patch),
		// never listed or watched. Only deploy/secrets/ grants them.
		add("", "secrets", "create", "get", "delete", "patch")
	}
	if events {
		add("", "events", "create", "patch")
	}
	// The job's Lease: one writer per job.
	add("coordination.k8s.io", "leases", "create", "get", "update", "patch", "delete")
	if podMetrics {
		// elasticPolicy.metrics: the workers' usage.
		add(metricsAPI.Group, metricsAPI.Resource, "list")
	}
	if planned.PodGroup != nil {
		group := planned.PodGroup.GroupVersionKind().Group
		verbs := []string{"create", "patch", "delete"}
		if group == gang.KubernetesPodGroups.Group {
			// The scheduler's condition on the group, read when it does not fit.
			verbs = append(verbs, "get")
		}
		add(group, "podgroups", verbs...)
	}
	return perms
}

// disruptionBudgetPermissions are what the job's PodDisruptionBudget
// needs: created before the replicas, re-attached by a retried step (get,
// patch), deleted with the job.
func disruptionBudgetPermissions() []permission {
	var perms []permission
	for _, v := range []string{"create", "get", "patch", "delete"} {
		perms = append(perms, permission{verb: v, group: "policy", resource: "poddisruptionbudgets"})
	}
	return perms
}

// networkPolicyPermissions are what the job's NetworkPolicy needs: created
// before the replicas, re-attached by a retried step (get, patch), deleted
// with the job.
func networkPolicyPermissions() []permission {
	var perms []permission
	for _, v := range []string{"create", "get", "patch", "delete"} {
		perms = append(perms, permission{verb: v, group: "networking.k8s.io", resource: "networkpolicies"})
	}
	return perms
}

// preflight checks, before anything is created, that the API server answers
// and that the identity holds every permission in perms; a missing one is
// Invalid, named with the deploy/ file that grants it.
func (c *connection) preflight(ctx context.Context, apiTimeout time.Duration, perms []permission) error {
	denied, err := c.deniedPermissions(ctx, apiTimeout, perms)
	if err != nil {
		return err
	}
	return missingPermissions(c.namespace, denied)
}

// deniedPermissions returns those of perms the identity does not hold. One
// SelfSubjectRulesReview answers for all of them; only where the authorizer
// says its rules are incomplete (a webhook) is each remaining permission asked
// with a SelfSubjectAccessReview. An unreachable server is retried until
// apiTimeout (then Transient); 401 is Invalid at once.
func (c *connection) deniedPermissions(ctx context.Context, apiTimeout time.Duration, perms []permission) ([]permission, error) {
	var denied []permission
	check := func() error {
		denied = denied[:0]
		// A server that accepts connections but never answers must not
		// hold the run past apiTimeout: each request has its own bound.
		reqCtx, cancel := context.WithTimeout(ctx, 15*time.Second)
		defer cancel()
		review := &authorizationv1.SelfSubjectRulesReview{Spec: authorizationv1.SelfSubjectRulesReviewSpec{Namespace: c.namespace}}
		rules, err := c.authorization.SelfSubjectRulesReviews().Create(reqCtx, review, metav1.CreateOptions{})
		if err != nil {
			return classify(err)
		}
		c.rules = &rules.Status
		for _, p := range perms {
			if allowedByRules(rules.Status.ResourceRules, p) {
				continue
			}
			if !rules.Status.Incomplete {
				denied = append(denied, p)
				continue
			}
			allowed, err := c.accessReview(reqCtx, p)
			if err != nil {
				return classify(err)
			}
			if !allowed {
				denied = append(denied, p)
			}
		}
		return nil
	}
	if err := retryTransient(ctx, apiTimeout, check); err != nil {
		return nil, err
	}
	return denied, nil
}

// Where deploy/ grants each permission: the default Role grants no Secrets,
// so a namespace that installs only it keeps its Secrets from the step;
// deploy/secrets/ adds them for the jobs that keep a Secret (MPI's SSH key,
// the progress endpoint's certificate and token).
const (
	defaultRoleFile = "deploy/role.yaml"
	secretsRoleFile = "deploy/secrets/role.yaml"
)

// grantedBy names the deploy/ file whose Role grants p.
func grantedBy(p permission) string {
	if p.group == "" && p.resource == "secrets" {
		return secretsRoleFile
	}
	return defaultRoleFile
}

// missingPermissions is the Invalid error naming every denied permission,
// grouped by the deploy/ file that grants it; nil when none is denied.
func missingPermissions(namespace string, denied []permission) error {
	if len(denied) == 0 {
		return nil
	}
	var files []string
	byFile := map[string][]string{}
	for _, p := range denied {
		f := grantedBy(p)
		if _, seen := byFile[f]; !seen {
			files = append(files, f)
		}
		byFile[f] = append(byFile[f], "cannot "+p.String())
	}
	groups := make([]string, 0, len(files))
	for _, f := range files {
		groups = append(groups, fmt.Sprintf("%s (granted by %s)", strings.Join(byFile[f], ", "), f))
	}
	return result.Invalid(result.ReasonForbidden, fmt.Errorf("missing permission in namespace %q: %s",
		namespace, strings.Join(groups, "; ")))
}

// checkPermissions is the run's preflight: every permission in required
// must be held, else the run is Invalid naming them; of optional (what a
// feature worth no failed run needs), the denied ones are returned.
func (c *connection) checkPermissions(ctx context.Context, apiTimeout time.Duration, required, optional []permission) ([]permission, error) {
	denied, err := c.deniedPermissions(ctx, apiTimeout, append(slices.Clone(required), optional...))
	if err != nil {
		return nil, err
	}
	if err := missingPermissions(c.namespace, permissionsIn(denied, required)); err != nil {
		return nil, err
	}
	return permissionsIn(denied, optional), nil
}

// permissionsIn returns the permissions of some that are also in all.
func permissionsIn(some, all []permission) []permission {
	var out []permission
	for _, p := range some {
		if slices.Contains(all, p) {
			out = append(out, p)
		}
	}
	return out
}

// accessReview asks the API server whether the identity may do p.
func (c *connection) accessReview(ctx context.Context, p permission) (bool, error) {
	review := &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{
		ResourceAttributes: &authorizationv1.ResourceAttributes{
			Namespace: c.namespace, Verb: p.verb, Group: p.group, Resource: p.resource, Subresource: p.subresource,
		},
	}}
	got, err := c.authorization.SelfSubjectAccessReviews().Create(ctx, review, metav1.CreateOptions{})
	if err != nil {
		return false, err
	}
	return got.Status.Allowed, nil
}

// mayWatchNodes reports whether the step may get, list and watch nodes
// (deploy/nodes/, cluster-wide), which lets it see a drain coming; any
// error counts as no.
func (c *connection) mayWatchNodes(ctx context.Context) bool {
	verbs := []string{"get", "list", "watch"}
	// The rules the preflight read hold every rule of a ClusterRoleBinding,
	// which is what grants a cluster-wide resource: when they are complete
	// and lack a verb on nodes, there is nothing to ask. Rules that have
	// them may come from a RoleBinding, which grants none: each is asked.
	if c.rules != nil && !c.rules.Incomplete && slices.ContainsFunc(verbs, func(verb string) bool {
		return !allowedByRules(c.rules.ResourceRules, permission{verb: verb, resource: "nodes"})
	}) {
		return false
	}
	reqCtx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	for _, verb := range verbs {
		review := &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{
			ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: verb, Resource: "nodes"},
		}}
		got, err := c.authorization.SelfSubjectAccessReviews().Create(reqCtx, review, metav1.CreateOptions{})
		if err != nil || !got.Status.Allowed {
			return false
		}
	}
	return true
}

// allowedByRules reports whether a rule grants p on any object of its
// resource, matching RBAC's wildcards.
func allowedByRules(rules []authorizationv1.ResourceRule, p permission) bool {
	resource := p.resource
	if p.subresource != "" {
		resource += "/" + p.subresource
	}
	for _, r := range rules {
		if len(r.ResourceNames) > 0 {
			continue
		}
		if matches(r.Verbs, p.verb) && matches(r.APIGroups, p.group) &&
			(matches(r.Resources, resource) || p.subresource != "" && (slices.Contains(r.Resources, p.resource+"/*") || slices.Contains(r.Resources, "*/"+p.subresource))) {
			return true
		}
	}
	return false
}

func matches(values []string, want string) bool {
	return slices.Contains(values, "*") || slices.Contains(values, want)
}

// classify marks errors that retrying cannot fix as permanent; apierr's
// transient ones (5xx, 429, timeouts, refused connections) are retried.
func classify(err error) error {
	if apierr.IsTransient(err) {
		return err
	}
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		code := int(status.Status().Code)
		switch {
		case code == http.StatusUnauthorized:
			return backoff.Permanent(result.Invalid(result.ReasonUnauthorized, fmt.Errorf("the API server rejected the credentials: %w", err)))
		case code == http.StatusForbidden:
			return backoff.Permanent(result.Invalid(result.ReasonForbidden, err))
		case code >= 400 && code < 500 && code != http.StatusTooManyRequests && code != http.StatusRequestTimeout:
			return backoff.Permanent(result.Invalid(result.ReasonInvalidSpec, err))
		}
	}
	return err
}

// retryTransient runs op with exponential backoff while it fails with
// transient errors, until timeout has passed (the last wait is cut short at
// the deadline, not skipped); then the last error is Transient.
func retryTransient(ctx context.Context, timeout time.Duration, op func() error) error {
	deadline, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	policy := backoff.NewExponentialBackOff(backoff.WithInitialInterval(200*time.Millisecond),
		backoff.WithMaxInterval(10*time.Second), backoff.WithMaxElapsedTime(0))
	var last error
	err := backoff.Retry(func() error {
		last = op()
		return last
	}, backoff.WithContext(policy, deadline))
	if err == nil {
		return nil
	}
	var re *result.Error
	if errors.As(err, &re) {
		return err
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return result.Transient(result.ReasonAPIUnreachable, fmt.Errorf("the API server did not answer for %s: %w", timeout, last))
}
