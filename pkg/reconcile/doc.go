// Package reconcile is the controller of one trainstep job on Kubernetes.
//
// It watches only the job's own children (label-filtered informers), keeps
// them as pkg/render describes them, and asks pkg/policy what to do when a
// replica ends or goes missing: recreate it, fail the job or declare success.
// It never decides policy itself, and it never touches objects without the
// job's label.
package reconcile
