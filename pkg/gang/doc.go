// Package gang holds what trainstep needs to start a job all together or not
// at all: the pod labels, annotations, scheduler names and scheduling gate of
// each gang kind, the PodGroup objects of scheduler-plugins (coscheduling) and
// Volcano, the minResources a job asks for, and the built-in gang's
// admission decisions (when to lift the gates, when to give the pods back and
// try again, when to give up).
//
// Everything here is pure: no client calls, no clock reads and no randomness.
// Callers pass the time and the random jitter in, so the same inputs always
// give the same answer. It must not create, patch or delete anything.
package gang
