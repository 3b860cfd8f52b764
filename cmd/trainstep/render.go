package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"

	"github.com/trainstep/trainstep/executor"
	"github.com/trainstep/trainstep/pkg/render"
	"github.com/trainstep/trainstep/pkg/replicapolicy"
	"github.com/trainstep/trainstep/pkg/result"
	"github.com/trainstep/trainstep/pkg/spec"
)

// defaultRenderNamespace is used when neither -n nor metadata.namespace
// says where the job runs: render has no cluster to ask.
const defaultRenderNamespace = "default"

type renderFlags struct {
	spec                            specFlags
	output                          string
	networkPolicy, disruptionBudget bool
	identity                        string
}

func newRenderCommand() *cobra.Command {
	f := &renderFlags{}
	cmd := &cobra.Command{
		Use:   "render [-f] JOB.yaml... [-o yaml|json]",
		Short: "Print every object the job would create, without a cluster",
		Long: `Print every object the job would create: its NetworkPolicy and PodDisruptionBudget, Secrets, ConfigMaps, headless
Services and replica Pods, in creation order, as a multi-document YAML stream
or a JSON v1 List. Nothing is sent to a cluster.

The namespace is -n, else metadata.namespace, else "default". Secrets are shown
with their keys but not their values: an MPI job's SSH key pair is made by
'trainstep run', once per job, and never printed.
Several job files (-f a.yaml -f b.yaml, or as arguments) print every job's
objects, file after file.`,
		RunE: func(cmd *cobra.Command, args []string) error { return f.run(cmd, args) },
	}
	f.spec.register(cmd)
	cmd.Flags().StringVarP(&f.output, "output", "o", "yaml", "output format: yaml or json")
	cmd.Flags().BoolVar(&f.networkPolicy, "network-policy", true, "show the job's NetworkPolicy, as 'trainstep run' creates it unless given --network-policy=false")
	cmd.Flags().BoolVar(&f.disruptionBudget, "disruption-budget", true, "show the PodDisruptionBudget of a job whose ranks restart as a whole, as 'trainstep run' creates it unless given --disruption-budget=false")
	cmd.Flags().StringVar(&f.identity, "identity", "", "show the objects with the trainstep.dev/identity label of 'trainstep run --identity' given this value (default: without the label, which a run always sets)")
	return cmd
}

func (f *renderFlags) run(cmd *cobra.Command, args []string) error {
	encode, ok := encoders[f.output]
	if !ok {
		return result.Invalid(result.ReasonInvalidArguments, fmt.Errorf("--output: %q is not yaml or json", f.output))
	}
	all, err := f.spec.loadAll(cmd, args)
	if err != nil {
		return err
	}
	if err := joinLoadErrors(all); err != nil {
		return err
	}
	paths := make([]string, len(all))
	for i, l := range all {
		paths[i] = l.path
	}
	streams := make([]objectStream, 0, len(all))
	for _, l := range all {
		if cmd.Flags().Changed("network-policy") {
			l.opts.Policy.NetworkPolicy.Disabled = !f.networkPolicy
		}
		r, shared, err := prepareRender(l, true, f.identity)
		if err == nil && f.disruptionBudget {
			shared.DisruptionBudget = render.DisruptionBudget(l.job, r.Identity())
		}
		if err != nil {
			return prefixError(filePrefix(paths, l.path), err)
		}
		streams = append(streams, prefixErrors(filePrefix(paths, l.path), jobObjects(r, shared)))
	}
	out := bufio.NewWriter(cmd.OutOrStdout())
	if err := encode(out, concat(streams)); err != nil {
		var invalid *result.Error
		if errors.As(err, &invalid) {
			return err
		}
		return fmt.Errorf("printing the objects: %w", err)
	}
	return out.Flush()
}

// secretPlaceholder stands for every value of a rendered Secret.
const secretPlaceholder = "<made by trainstep run, once per job; not shown>"

// hideSecretData shows a Secret's keys with a readable placeholder
// (stringData) instead of their values: render prints what a run would
// create, never a secret.
func hideSecretData(secret *corev1.Secret) {
	if len(secret.Data) == 0 && len(secret.StringData) == 0 {
		return
	}
	shown := make(map[string]string, len(secret.Data)+len(secret.StringData))
	for key := range secret.Data {
		shown[key] = secretPlaceholder
	}
	for key := range secret.StringData {
		shown[key] = secretPlaceholder
	}
	secret.Data, secret.StringData = nil, shown
}

// prepareRender prepares one loaded job's renderer, without a cluster, and
// renders its shared objects, with the identity label a run given
// --identity=identity sets ("" leaves it out); with check, it first holds
// every object to the replica policy (replicapolicy.CheckRendered).
func prepareRender(l loaded, check bool, identity string) (*render.Renderer, *render.Objects, error) {
	var err error
	job, policy := l.job, l.opts.Policy
	id := render.Identity{Namespace: job.Namespace, JobName: job.Name}
	if identity != "" {
		id.OwnerID = executor.RunIdentity(identity)
	}
	if id.Namespace == "" {
		id.Namespace = defaultRenderNamespace
	}
	// The key pair is made by the run, once per job: render needs none, and
	// a private key printed into a terminal or a CI log is a leaked one.
	in := render.Inputs{SSHPrivateKey: []byte(secretPlaceholder), SSHPublicKey: []byte(secretPlaceholder)}
	r, err := render.NewRenderer(job, id)
	if err != nil {
		return nil, nil, result.Invalid(result.ReasonInvalidSpec, fmt.Errorf("rendering the job: %w", err))
	}
	shared, err := r.SharedObjects(in)
	if err != nil {
		return nil, nil, result.Invalid(result.ReasonInvalidSpec, fmt.Errorf("rendering the job: %w", err))
	}
	for _, secret := range shared.Secrets {
		hideSecretData(secret)
	}
	if !policy.NetworkPolicy.Disabled {
		shared.NetworkPolicy = render.NetworkPolicyAdmitting(job, id, policy.NetworkPolicy.Ingress)
	}
	if check {
		if err := spec.PolicyError(l.data, replicapolicy.CheckRendered(r, shared, policy)); err != nil {
			return nil, nil, err
		}
	}
	return r, shared, nil
}

// prefixError names the job file in err (an Invalid one keeps its phase);
// prefix is empty when there is one file.
func prefixError(prefix string, err error) error {
	var invalid *result.Error
	if prefix == "" {
		return err
	}
	if errors.As(err, &invalid) {
		return &result.Error{Phase: invalid.Phase, Reason: invalid.Reason, Err: prefixLines(prefix, invalid.Err)}
	}
	return prefixLines(prefix, err)
}

// prefixLines puts prefix before every line of err.
func prefixLines(prefix string, err error) error {
	lines := strings.Split(err.Error(), "\n")
	for i := range lines {
		lines[i] = prefix + lines[i]
	}
	return errors.New(strings.Join(lines, "\n"))
}

// concat streams the objects of every stream, one stream after the other.
func concat(streams []objectStream) objectStream {
	return func(yield func(runtime.Object) error) error {
		for _, s := range streams {
			if err := s(yield); err != nil {
				return err
			}
		}
		return nil
	}
}

// prefixErrors names the job file in a rendering error of s (an Invalid
// one keeps its phase); prefix is empty when there is one file.
func prefixErrors(prefix string, s objectStream) objectStream {
	if prefix == "" {
		return s
	}
	return func(yield func(runtime.Object) error) error {
		var invalid *result.Error
		err := s(yield)
		if errors.As(err, &invalid) {
			return &result.Error{Phase: invalid.Phase, Reason: invalid.Reason, Err: fmt.Errorf("%s%w", prefix, invalid.Err)}
		}
		return err
	}
}

// objectStream calls yield with each object in turn and stops at the first
// error.
type objectStream func(yield func(runtime.Object) error) error

// jobObjects streams the objects of a job in render.Objects.List order, the
// order of creation, rendering each Service and Pod just before it is
// printed: a large job never has all its pods in memory at once.
func jobObjects(r *render.Renderer, shared *render.Objects) objectStream {
	invalid := func(err error) error {
		return result.Invalid(result.ReasonInvalidSpec, fmt.Errorf("rendering the job: %w", err))
	}
	return func(yield func(runtime.Object) error) error {
		for _, obj := range shared.List() {
			if err := yield(obj); err != nil {
				return err
			}
		}
		replicas := r.Replicas()
		for _, ref := range replicas {
			svc, err := r.Service(ref.Type, ref.Index)
			if err != nil {
				return invalid(err)
			}
			if svc != nil {
				if err := yield(svc); err != nil {
					return err
				}
			}
		}
		for _, ref := range replicas {
			pod, err := r.Pod(ref.Type, ref.Index, 0)
			if err != nil {
				return invalid(err)
			}
			obj, err := r.PodObject(pod)
			if err != nil {
				return invalid(err)
			}
			if err := yield(obj); err != nil {
				return err
			}
		}
		return nil
	}
}

// encoders print objects in each --output format.
var encoders = map[string]func(io.Writer, objectStream) error{
	"yaml": encodeYAMLStream,
	"json": encodeJSONList,
}

// encodeYAMLStream writes one YAML document per object, separated by "---".
func encodeYAMLStream(w io.Writer, objs objectStream) error {
	first := true
	return objs(func(obj runtime.Object) error {
		raw, err := printable(obj)
		if err != nil {
			return err
		}
		doc, err := yaml.JSONToYAML(raw)
		if err != nil {
			return err
		}
		if !first {
			if _, err := io.WriteString(w, "---\n"); err != nil {
				return err
			}
		}
		first = false
		_, err = w.Write(doc)
		return err
	})
}

// encodeJSONList writes the objects as a v1 List indented like kubectl,
// the bytes json.MarshalIndent gives for the whole List, one item at a time.
func encodeJSONList(w io.Writer, objs objectStream) error {
	empty, err := json.MarshalIndent(corev1.List{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "List"}, Items: []runtime.RawExtension{}}, "", "  ")
	if err != nil {
		return err
	}
	// empty ends in `"items": []` and "\n}": items go between the brackets.
	head, tail, found := bytes.Cut(empty, []byte("[]"))
	if !found {
		return fmt.Errorf("encoding an empty List gave no items: %s", empty)
	}
	if _, err := w.Write(append(head, '[')); err != nil {
		return err
	}
	var item bytes.Buffer
	count := 0
	err = objs(func(obj runtime.Object) error {
		raw, err := printable(obj)
		if err != nil {
			return err
		}
		item.Reset()
		if count > 0 {
			item.WriteByte(',')
		}
		count++
		item.WriteString("\n    ")
		if err := json.Indent(&item, raw, "    ", "  "); err != nil {
			return err
		}
		_, err = w.Write(item.Bytes())
		return err
	})
	if err != nil {
		return err
	}
	if count > 0 {
		if _, err := io.WriteString(w, "\n  "); err != nil {
			return err
		}
	}
	if _, err := w.Write(append([]byte("]"), tail...)); err != nil {
		return err
	}
	_, err = io.WriteString(w, "\n")
	return err
}

// printable is obj as JSON without the fields an object that was never
// created holds only because its Go type has them: a null
// creationTimestamp, a status (empty, or a PodDisruptionBudget's zero
// counts).
func printable(obj runtime.Object) ([]byte, error) {
	raw, err := json.Marshal(obj)
	if err != nil {
		return nil, err
	}
	decoder := json.NewDecoder(bytes.NewReader(raw))
	decoder.UseNumber() // keep every number as written
	var tree map[string]any
	if err := decoder.Decode(&tree); err != nil {
		return nil, err
	}
	dropUnset(tree)
	delete(tree, "status")
	return json.Marshal(tree)
}

// dropUnset removes every null creationTimestamp in tree.
func dropUnset(tree any) {
	switch v := tree.(type) {
	case map[string]any:
		if ts, ok := v["creationTimestamp"]; ok && ts == nil {
			delete(v, "creationTimestamp")
		}
		for _, child := range v {
			dropUnset(child)
		}
	case []any:
		for _, child := range v {
			dropUnset(child)
		}
	}
}

// isEmpty reports whether v is a map holding nothing but empty maps.
func isEmpty(v any) bool {
	m, ok := v.(map[string]any)
	if !ok {
		return false
	}
	for _, child := range m {
		if !isEmpty(child) {
			return false
		}
	}
	return true
}
