package executor

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/cenkalti/backoff/v4"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/util/workqueue"

	"github.com/trainstep/trainstep/pkg/apis/trainstep/v1alpha1"
	"github.com/trainstep/trainstep/pkg/reconcile"
	"github.com/trainstep/trainstep/pkg/render"
	"github.com/trainstep/trainstep/pkg/result"
)

// maxForeignNamed bounds how many objects the error of a taken job name
// lists; it says how many more there are.
const maxForeignNamed = 8

// namedObject is an object the job will create under a fixed name.
type namedObject struct {
	kind string
	gvr  schema.GroupVersionResource
	name string
}

// checkNoForeignObjects refuses, before anything is created or read, a job
// whose name another owner's objects use: objects labelled with the job's
// name and another identity (or none), and objects of the names the job
// will create that are not its identity's. The job name is a submitter's
// choice; only the identity says whose an object is. Objects of the run's
// own identity are an earlier attempt's, which the controller re-attaches.
// Only metadata is read, so no other owner's Secret reaches this process.
// The Secrets it finds absent are kept in conn.absentSecrets.
func checkNoForeignObjects(ctx context.Context, conn *connection, id render.Identity, named []namedObject, apiTimeout time.Duration) error {
	conn.absentSecrets = map[string]bool{}
	f := &foreignSearch{ctx: ctx, conn: conn, id: id, apiTimeout: apiTimeout, found: map[string]bool{}}
	probes := []func() error{
		f.listByLabel("pod", corev1.SchemeGroupVersion.WithResource("pods")),
		f.listByLabel("service", corev1.SchemeGroupVersion.WithResource("services")),
	}
	for _, o := range named {
		probes = append(probes, f.getByName(o))
	}
	if err := firstInOrder(runAtMost(foreignProbeWidth, probes)); err != nil {
		return err
	}
	if len(f.found) == 0 {
		return nil
	}
	names := slices.Sorted(maps.Keys(f.found))
	more := ""
	if len(names) > maxForeignNamed {
		more = fmt.Sprintf(" and %d more", len(names)-maxForeignNamed)
		names = names[:maxForeignNamed]
	}
	return result.Invalid(result.ReasonNotOwned, fmt.Errorf(
		"job name %s is in use by another owner: %s%s; this run neither uses, reads nor deletes them: give the job another name (--name), or remove them if they are stale",
		id.JobName, strings.Join(names, ", "), more))
}

// foreignSearch is one checkNoForeignObjects: its reads, and the other
// owners' objects they found, described.
type foreignSearch struct {
	ctx        context.Context
	conn       *connection
	id         render.Identity
	apiTimeout time.Duration

	mu    sync.Mutex
	found map[string]bool
}

// keep notes m when it is not of the job's identity.
func (f *foreignSearch) keep(kind string, m metav1.Object) {
	if m.GetLabels()[v1alpha1.LabelIdentity] == f.id.OwnerID {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.found[fmt.Sprintf("%s %s (%s)", kind, m.GetName(), reconcile.DescribeOwnership(m))] = true
}

// listByLabel reads the metadata of the objects of gvr labelled with the
// job's name.
func (f *foreignSearch) listByLabel(kind string, gvr schema.GroupVersionResource) func() error {
	selector := metav1.ListOptions{LabelSelector: v1alpha1.LabelJobName + "=" + f.id.JobName, ResourceVersion: fromWatchCache}
	return func() error {
		err := retryTransient(f.ctx, f.apiTimeout, func() error {
			list, err := f.conn.metadata.Resource(gvr).Namespace(f.conn.namespace).List(f.ctx, selector)
			if err != nil {
				return classify(err)
			}
			for i := range list.Items {
				f.keep(kind, &list.Items[i])
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("looking for other owners' objects of job %s: %w", f.id.JobName, err)
		}
		return nil
	}
}

// getByName reads the metadata of the object the job will create as o.
func (f *foreignSearch) getByName(o namedObject) func() error {
	return func() error {
		err := retryTransient(f.ctx, f.apiTimeout, func() error {
			version := fromWatchCache
			if o.kind == "secret" {
				// A Secret found absent is not read again (readOwnSecret):
				// only a read from etcd may say so.
				version = ""
			}
			m, err := f.conn.metadata.Resource(o.gvr).Namespace(f.conn.namespace).Get(f.ctx, o.name, metav1.GetOptions{ResourceVersion: version})
			switch {
			case apierrors.IsNotFound(err):
				if o.kind == "secret" {
					f.mu.Lock()
					f.conn.absentSecrets[o.name] = true
					f.mu.Unlock()
				}
				return nil
			case apierrors.IsForbidden(err):
				// A kind the Role cannot read: its create meets it.
				return nil
			case err != nil:
				return classify(err)
			}
			f.keep(o.kind, m)
			return nil
		})
		if err != nil {
			return fmt.Errorf("reading %s %s: %w", o.kind, o.name, err)
		}
		return nil
	}
}

// fromWatchCache is the resource version that has kube-apiserver answer a
// read from its watch cache, not from etcd: the check's reads of other
// owners' objects, ten or so per step, at the moment a sweep's steps all
// start. One created since the cache last heard from etcd (moments) is
// missed here and met by the job's create of its name, which refuses what
// is not the job's all the same; one of another name that carries the
// job's label is never touched, since the job's informers select its
// identity too.
const fromWatchCache = "0"

// foreignProbeWidth is how many of checkNoForeignObjects' reads a step has
// in flight at once. One at a time, they were most of a step's way to its
// first create; all at once (ten or so per step), 64 steps of one sweep
// started together had the API server's flow control turn dozens away with
// 429, each then retried after a second.
const foreignProbeWidth = 3

// runAtMost runs every probe, at most width at a time, and returns their
// errors in the probes' order. Each probe heeds the run's context itself,
// so none is skipped here (a skipped probe would pass for a clean one).
func runAtMost(width int, probes []func() error) []error {
	errs := make([]error, len(probes))
	workqueue.ParallelizeUntil(context.Background(), width, len(probes), func(i int) { errs[i] = probes[i]() })
	return errs
}

// firstInOrder is the first error of errs, so that a failed check names the
// same cause however the probes interleaved.
func firstInOrder(errs []error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// namedObjects are the objects of fixed names the job creates besides its
// pods and Services (which checkNoForeignObjects lists by label): its
// ConfigMaps, Secrets, NetworkPolicies, PodDisruptionBudget and PodGroup, and the endpoint's
// Secrets, Service and NetworkPolicy when the step serves it.
func namedObjects(job *v1alpha1.TrainJob, planned *render.Objects, endpoint, networkPolicy, disruptionBudget bool) []namedObject {
	var out []namedObject
	core := func(kind, resource, name string) {
		out = append(out, namedObject{kind: kind, gvr: corev1.SchemeGroupVersion.WithResource(resource), name: name})
	}
	for _, cm := range planned.ConfigMaps {
		core("configmap", "configmaps", cm.Name)
	}
	for _, s := range planned.Secrets {
		core("secret", "secrets", s.Name)
	}
	networkPolicies := networkingv1.SchemeGroupVersion.WithResource("networkpolicies")
	if networkPolicy {
		out = append(out, namedObject{kind: "networkpolicy", gvr: networkPolicies, name: job.Name})
	}
	if endpoint {
		core("secret", "secrets", v1alpha1.TrainerStatusName(job.Name))
		core("secret", "secrets", v1alpha1.TrainerStatusTLSName(job.Name))
		core("service", "services", v1alpha1.TrainerStatusName(job.Name))
		out = append(out, namedObject{kind: "networkpolicy", gvr: networkPolicies, name: v1alpha1.TrainerStatusName(job.Name)})
	}
	if disruptionBudget {
		out = append(out, namedObject{kind: "poddisruptionbudget", gvr: policyv1.SchemeGroupVersion.WithResource("poddisruptionbudgets"), name: job.Name})
	}
	if pg := planned.PodGroup; pg != nil {
		gvr := pg.GroupVersionKind().GroupVersion().WithResource("podgroups")
		out = append(out, namedObject{kind: "podgroup", gvr: gvr, name: pg.GetName()})
	}
	return out
}

// readOwnSecret reads the Secret name when it carries the job's identity:
// nil when there is none (or the preflight found none); an Invalid error
// naming it when it is another owner's, whose data is never read (its
// metadata is read first).
func readOwnSecret(ctx context.Context, conn *connection, id render.Identity, name string, apiTimeout time.Duration) (*corev1.Secret, error) {
	if conn.absentSecrets[name] {
		return nil, nil
	}
	secrets := corev1.SchemeGroupVersion.WithResource("secrets")
	var own *corev1.Secret
	err := retryTransient(ctx, apiTimeout, func() error {
		m, err := conn.metadata.Resource(secrets).Namespace(conn.namespace).Get(ctx, name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			return nil
		case err != nil:
			return classify(err)
		case m.Labels[v1alpha1.LabelIdentity] != id.OwnerID || m.Labels[v1alpha1.LabelJobName] != id.JobName:
			return backoff.Permanent(notTheJobsSecret(name, m))
		}
		s, err := conn.core.Secrets(conn.namespace).Get(ctx, name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			return nil
		case err != nil:
			return classify(err)
		case s.Labels[v1alpha1.LabelIdentity] != id.OwnerID || s.Labels[v1alpha1.LabelJobName] != id.JobName:
			// Replaced between the two reads: not used, and not kept.
			return backoff.Permanent(notTheJobsSecret(name, s))
		}
		own = s
		return nil
	})
	return own, err
}

func notTheJobsSecret(name string, m metav1.Object) error {
	return result.Invalid(result.ReasonNotOwned, fmt.Errorf(
		"secret %s exists and is not this job's (%s): trainstep neither uses nor deletes it; rename the job (--name) or remove the secret",
		name, reconcile.DescribeOwnership(m)))
}
