package replicapolicy

import (
	"encoding/json"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/trainstep/trainstep/pkg/apis/trainstep/v1alpha1"
	"github.com/trainstep/trainstep/pkg/render"
)

// CheckRendered renders every pod and Service of the job, one at a time,
// and returns what the policy refuses of them: a pod below the PodSecurity
// level (each field once, with its path in the replica's template), and a
// job whose objects (shared, as given, and every pod and Service) would
// take more than MaxRenderedBytes as the API server stores them (protobuf,
// about half their JSON). It stops rendering once the size is past the
// bound and estimates the rest.
func CheckRendered(r *render.Renderer, shared *render.Objects, p Policy) field.ErrorList {
	limit := p.MaxRenderedBytes
	if limit <= 0 {
		limit = DefaultMaxRenderedBytes
	}
	var errs field.ErrorList
	said := map[string]bool{}
	var sharedBytes int64
	if shared != nil {
		for _, obj := range shared.List() {
			sharedBytes += storedSize(obj)
		}
	}
	tallies := map[v1alpha1.ReplicaType]*tally{}
	var order []v1alpha1.ReplicaType
	total := sharedBytes
	replicas := r.Replicas()
	counts := map[v1alpha1.ReplicaType]int{}
	for _, ref := range replicas {
		counts[ref.Type]++
	}
	for i, ref := range replicas {
		template := field.NewPath("spec", "replicaSpecs", string(ref.Type), "template")
		pod, err := r.Pod(ref.Type, ref.Index, 0)
		if err != nil {
			return append(errs, field.InternalError(template, err))
		}
		for _, e := range checkPodSecurity(&pod.ObjectMeta, &pod.Spec, template, p) {
			if !said[e.Error()] {
				said[e.Error()] = true
				errs = append(errs, e)
			}
		}
		svc, err := r.Service(ref.Type, ref.Index)
		if err != nil {
			return append(errs, field.InternalError(template, err))
		}
		t := tallies[ref.Type]
		if t == nil {
			t = &tally{}
			tallies[ref.Type] = t
			order = append(order, ref.Type)
		}
		t.pods++
		podBytes := storedSize(pod)
		t.bytes += podBytes
		total += podBytes
		if svc != nil {
			sharedBytes += storedSize(svc)
			total += storedSize(svc)
		}
		if total > limit {
			estimated := total + (total-sharedBytes)/int64(i+1)*int64(len(replicas)-i-1)
			return append(errs, tooLarge(estimated, limit, len(replicas), order, tallies, counts, sharedBytes))
		}
	}
	return errs
}

// tally is the rendered pods of one replica type so far.
type tally struct {
	pods  int
	bytes int64
}

func tooLarge(estimated, limit int64, replicas int, order []v1alpha1.ReplicaType, tallies map[v1alpha1.ReplicaType]*tally, counts map[v1alpha1.ReplicaType]int, sharedBytes int64) *field.Error {
	var parts []string
	for _, rt := range order {
		t := tallies[rt]
		parts = append(parts, fmt.Sprintf("%d %s pods of %s", counts[rt], rt, size(t.bytes/int64(t.pods))))
	}
	return field.Forbidden(field.NewPath("spec", "replicaSpecs"), fmt.Sprintf(
		"the job's %d replicas render to about %s as stored (%s; Services, ConfigMaps and Secrets %s so far), over the limit of %s set by %s: "+
			"every object is stored in etcd, whose space the namespace shares with the whole cluster",
		replicas, size(estimated), strings.Join(parts, ", "), size(sharedBytes), size(limit), SettingMaxRenderedSize.how()))
}

// size prints bytes as a binary quantity a reader can compare (16.5 MiB).
func size(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return resource.NewQuantity(n, resource.BinarySI).String() + " bytes"
}

// storedSize is how many bytes obj takes as the API server stores it in
// etcd: its protobuf encoding for the built-in kinds, JSON for the others
// (a PodGroup); 0 if it cannot be encoded (the create would fail on its own).
func storedSize(obj runtime.Object) int64 {
	if p, ok := obj.(interface{ Size() int }); ok {
		return int64(p.Size())
	}
	data, err := json.Marshal(obj)
	if err != nil {
		return 0
	}
	return int64(len(data))
}
