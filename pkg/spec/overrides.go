package spec

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/trainstep/trainstep/pkg/apis/trainstep/v1alpha1"
	"github.com/trainstep/trainstep/pkg/frameworks"
)

// applyOverrides applies --image, --env and --arg, in that order and each
// in the order given, to the main container of the targeted replica types.
// The job must be defaulted, so its replica-type keys are canonical.
func applyOverrides(job *v1alpha1.TrainJob, opts Options) error {
	for _, raw := range opts.Images {
		typ, image, scoped := strings.Cut(raw, "=")
		if !scoped {
			typ, image = "", raw
		}
		if strings.TrimSpace(image) == "" {
			return fmt.Errorf("--image %q: want [TYPE=]IMAGE", raw)
		}
		err := forEachMain(job, "--image", raw, typ, func(c *corev1.Container) { c.Image = image })
		if err != nil {
			return err
		}
	}
	for _, raw := range opts.Envs {
		typ, assignment := splitTypePrefix(raw)
		name, value, ok := strings.Cut(assignment, "=")
		if !ok || name == "" {
			return fmt.Errorf("--env %q: want [TYPE:]KEY=VALUE", raw)
		}
		err := forEachMain(job, "--env", raw, typ, func(c *corev1.Container) { setEnv(c, name, value) })
		if err != nil {
			return err
		}
	}
	for _, raw := range opts.Args {
		typ, arg := splitTypePrefix(raw)
		err := forEachMain(job, "--arg", raw, typ, func(c *corev1.Container) { c.Args = append(c.Args, arg) })
		if err != nil {
			return err
		}
	}
	return nil
}

// splitTypePrefix splits "TYPE:REST" when TYPE names a replica type (in
// any case); otherwise the whole string is REST, so values such as
// "--data=s3://bucket" or "URL=http://x" pass through untouched.
func splitTypePrefix(raw string) (typ, rest string) {
	prefix, rest, found := strings.Cut(raw, ":")
	if !found {
		return "", raw
	}
	if _, known := frameworks.CanonicalReplicaType(prefix); !known {
		return "", raw
	}
	return prefix, rest
}

// forEachMain calls apply on the main container of every replica type, or
// of typ only; a typ the job does not have is an error naming the flag.
func forEachMain(job *v1alpha1.TrainJob, flag, raw, typ string, apply func(*corev1.Container)) error {
	types := frameworks.SortedReplicaTypes(job)
	if typ != "" {
		rt, _ := frameworks.CanonicalReplicaType(typ)
		if _, ok := job.Spec.ReplicaSpecs[rt]; !ok {
			return fmt.Errorf("%s %q: the job has no %s replicas (it has %s)", flag, raw, typ, typeList(types))
		}
		types = []v1alpha1.ReplicaType{rt}
	}
	for _, rt := range types {
		if c := frameworks.MainContainer(job, rt); c != nil {
			apply(c)
		}
	}
	return nil
}

// setEnv sets name to value, replacing an existing entry in place so the
// order of other variables (and references to earlier ones) is kept.
func setEnv(c *corev1.Container, name, value string) {
	for i := range c.Env {
		if c.Env[i].Name == name {
			c.Env[i] = corev1.EnvVar{Name: name, Value: value}
			return
		}
	}
	c.Env = append(c.Env, corev1.EnvVar{Name: name, Value: value})
}

func typeList(types []v1alpha1.ReplicaType) string {
	names := make([]string, len(types))
	for i, t := range types {
		names[i] = string(t)
	}
	return strings.Join(names, ", ")
}
