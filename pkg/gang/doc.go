// Package gang holds what trainstep needs to start a job all together or not
// at all: the pod labels, annotations, scheduler names, scheduling gate and
// scheduling group of each gang kind, the PodGroup objects of Kubernetes
// (scheduling.k8s.io), scheduler-plugins (coscheduling) and Volcano, the
// minResources a job asks for, and the admission decisions of the built-in
// gang (when to lift the gates, when to give the pods back and try again,
// when to give up) and of Kubernetes' gang (how long to wait for it).
//
// Everything here is pure: no client calls, no clock reads and no randomness.
// Callers pass the time and the random jitter in, so the same inputs always
// give the same answer. It must not create, patch or delete anything.
package gang
