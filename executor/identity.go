package executor

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"regexp"
	"strings"

	"go.uber.org/zap"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/trainstep/trainstep/pkg/result"
)

// The owner identity is what proves an object is this job's: its hash is
// the trainstep.dev/identity label of every object the job has, and a run
// uses, adopts and deletes only objects that carry its own. Inside Argo it
// is the workflow (by UID) and the step's retry group (its node name
// without the "(N)" of an attempt): every retry of that step presents it,
// no other step can. The workflow is proven, not told: the step's
// ServiceAccount token is bound to its pod, the API server says which pod
// that is, and that pod's controller must be the workflow named. A run by
// hand has an identity of its own, given with --identity or drawn at
// random.

// Keys of a bound ServiceAccount token's extra, as the API server reports
// them: the pod the token was issued to.
const (
	extraPodName = "authentication.kubernetes.io/pod-name"
	extraPodUID  = "authentication.kubernetes.io/pod-uid"
)

// Hash domains, so that no --identity value can ever hash to a workflow
// step's identity.
const (
	identityDomainWorkflow = "trainstep.dev/identity/workflow"
	identityDomainRun      = "trainstep.dev/identity/run"
)

// identityLength is the length of the label's value: 160 bits of SHA-256,
// in hex.
const identityLength = 40

// retrySuffix is what Argo appends to a retried node's name: node.name of
// an attempt is its retry group's with "(N)".
var retrySuffix = regexp.MustCompile(`\([0-9]+\)$`)

// ownerIdentity is the identity a run proved.
type ownerIdentity struct {
	// key is the hash every object carries (v1alpha1.LabelIdentity).
	key string
	// describe says where it comes from, for the log.
	describe string
	// workflow is the name of the workflow that proved it ("" by hand).
	workflow string
	// reattach is the --identity a later run by hand passes to take the job
	// over ("" inside Argo, where every retry presents the same one).
	reattach string
}

// identityHash hashes the parts of an identity within a domain.
func identityHash(domain string, parts ...string) string {
	h := sha256.New()
	h.Write([]byte(domain))
	for _, p := range parts {
		h.Write([]byte{0})
		h.Write([]byte(p))
	}
	return hex.EncodeToString(h.Sum(nil))[:identityLength]
}

// WorkflowIdentity is the trainstep.dev/identity label of the objects of
// the job that the step of node (Argo's node.name) in the workflow of
// workflowUID runs: the same for every retry attempt of that step.
func WorkflowIdentity(workflowUID, node string) string {
	return identityHash(identityDomainWorkflow, workflowUID, retryGroup(node))
}

// RunIdentity is the trainstep.dev/identity label of the objects of a job
// run by hand with --identity=identity.
func RunIdentity(identity string) string { return identityHash(identityDomainRun, identity) }

// retryGroup is the node name every attempt of a retried Argo step shares:
// node.name without the "(N)" of the attempt.
func retryGroup(node string) string { return retrySuffix.ReplaceAllString(node, "") }

// proveIdentity works out the run's owner identity from its Config: the
// workflow and node the template passes (proven against the step's own
// pod), else --identity, else a fresh one.
func proveIdentity(ctx context.Context, cfg *Config, conn *connection) (ownerIdentity, error) {
	switch {
	case cfg.WorkflowUID != "" || cfg.WorkflowNode != "":
		if cfg.WorkflowUID == "" || cfg.WorkflowNode == "" {
			return ownerIdentity{}, result.Invalidf("--workflow-uid and --workflow-node go together (got uid %q, node %q)", cfg.WorkflowUID, cfg.WorkflowNode)
		}
		if cfg.Identity != "" {
			return ownerIdentity{}, result.Invalidf("--identity is for runs outside Argo: a workflow step's identity is its workflow and node (--workflow-uid, --workflow-node)")
		}
		workflow, err := proveWorkflow(ctx, cfg, conn)
		if err != nil {
			return ownerIdentity{}, err
		}
		group := retryGroup(cfg.WorkflowNode)
		return ownerIdentity{
			key:      WorkflowIdentity(cfg.WorkflowUID, cfg.WorkflowNode),
			describe: fmt.Sprintf("workflow %s (uid %s), step %s", workflow, cfg.WorkflowUID, group),
			workflow: workflow,
		}, nil
	case cfg.Identity != "":
		return ownerIdentity{key: RunIdentity(cfg.Identity), describe: "--identity", reattach: cfg.Identity}, nil
	}
	random := make([]byte, 16)
	if _, err := rand.Read(random); err != nil {
		return ownerIdentity{}, fmt.Errorf("drawing the run's identity: %w", err)
	}
	own := hex.EncodeToString(random)
	return ownerIdentity{key: RunIdentity(own), describe: "this run's own", reattach: own}, nil
}

// proveWorkflow checks that the step runs in a pod the workflow
// cfg.WorkflowUID controls, and returns the workflow's name. The pod is
// the one the credentials are bound to, as the API server says
// (SelfSubjectReview): a pod's projected ServiceAccount token names its
// pod, which flags, environment and pod metadata cannot change.
func proveWorkflow(ctx context.Context, cfg *Config, conn *connection) (string, error) {
	var review *authenticationv1.SelfSubjectReview
	err := retryTransient(ctx, cfg.APITimeout, func() (err error) {
		review, err = conn.authentication.SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
		return classify(err)
	})
	if err != nil {
		return "", fmt.Errorf("asking the API server which pod the step runs in: %w", err)
	}
	user := review.Status.UserInfo
	podName, podUID := firstExtra(user.Extra, extraPodName), firstExtra(user.Extra, extraPodUID)
	namespace, isServiceAccount := serviceAccountNamespace(user.Username)
	if podName == "" || podUID == "" || !isServiceAccount {
		return "", result.Invalidf("--workflow-uid is proven by the step pod's own ServiceAccount token, and these credentials (%s) are not bound to a pod: inside Argo, run the step with the pod's token; by hand, use --identity", user.Username)
	}
	if cfg.OwnerPod != "" && (cfg.OwnerPod != podName || cfg.OwnerUID != "" && cfg.OwnerUID != podUID) {
		return "", result.Invalidf("--owner-pod %s (uid %s) is not the pod the step runs in, %s (uid %s)", cfg.OwnerPod, cfg.OwnerUID, podName, podUID)
	}
	if namespace != conn.namespace {
		return "", result.Invalidf("the step's pod %s is in namespace %q and the job in %q: a step proves its workflow only in its own namespace", podName, namespace, conn.namespace)
	}
	var pod *corev1.Pod
	err = retryTransient(ctx, cfg.APITimeout, func() (err error) {
		pod, err = conn.core.Pods(namespace).Get(ctx, podName, metav1.GetOptions{})
		return classify(err)
	})
	if err != nil {
		return "", fmt.Errorf("reading the step's own pod %s: %w", podName, err)
	}
	ref := metav1.GetControllerOf(pod)
	switch {
	case string(pod.UID) != podUID:
		return "", result.Invalidf("the step's pod %s was replaced (uid %s, the token's %s)", podName, pod.UID, podUID)
	case ref == nil || ref.Kind != "Workflow" || !strings.HasPrefix(ref.APIVersion, "argoproj.io/"):
		return "", result.Invalidf("the step's pod %s is not controlled by an Argo Workflow, so --workflow-uid cannot be proven; by hand, use --identity", podName)
	case string(ref.UID) != cfg.WorkflowUID:
		return "", result.Invalidf("the step's pod %s belongs to workflow %s (uid %s), not to --workflow-uid %s", podName, ref.Name, ref.UID, cfg.WorkflowUID)
	}
	return ref.Name, nil
}

func firstExtra(extra map[string]authenticationv1.ExtraValue, key string) string {
	if v := extra[key]; len(v) > 0 {
		return v[0]
	}
	return ""
}

// serviceAccountNamespace is the namespace of a ServiceAccount's username,
// system:serviceaccount:<namespace>:<name>.
func serviceAccountNamespace(username string) (string, bool) {
	parts := strings.Split(username, ":")
	if len(parts) != 4 || parts[0] != "system" || parts[1] != "serviceaccount" {
		return "", false
	}
	return parts[2], true
}

// logIdentity says whose the job's objects are; a run by hand also says
// how another run takes the job over.
func logIdentity(cfg *Config, job string, identity ownerIdentity) {
	fields := []zap.Field{zap.String("job", job), zap.String("identity", identity.key), zap.String("from", identity.describe)}
	if identity.reattach != "" {
		cfg.Logger.Info("the job's objects carry this run's identity; a later run re-attaches to them with --identity="+identity.reattach, fields...)
		return
	}
	cfg.Logger.Info("the job's objects carry the identity of this workflow step", fields...)
}
