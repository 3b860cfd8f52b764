package main

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"

	"github.com/trainstep/trainstep/pkg/apis/trainstep/v1alpha1"
	"github.com/trainstep/trainstep/pkg/render"
	"github.com/trainstep/trainstep/pkg/result"
	"github.com/trainstep/trainstep/pkg/sshkey"
)

// defaultRenderNamespace is used when neither -n nor metadata.namespace
// says where the job runs: render has no cluster to ask.
const defaultRenderNamespace = "default"

type renderFlags struct {
	spec   specFlags
	output string
}

func newRenderCommand() *cobra.Command {
	f := &renderFlags{}
	cmd := &cobra.Command{
		Use:   "render [-f] JOB.yaml... [-o yaml|json]",
		Short: "Print every object the job would create, without a cluster",
		Long: `Print every object the job would create: Secrets, ConfigMaps, headless
Services and replica Pods, in creation order, as a multi-document YAML stream
or a JSON v1 List. Nothing is sent to a cluster.

The namespace is -n, else metadata.namespace, else "default". An MPI job's SSH
Secret holds a key pair generated afresh by this command, so that Secret differs
from one render to the next; 'trainstep run' generates its own key once per job.
Several job files (-f a.yaml -f b.yaml, or as arguments) print every job's
objects, file after file.`,
		RunE: func(cmd *cobra.Command, args []string) error { return f.run(cmd, args) },
	}
	f.spec.register(cmd)
	cmd.Flags().StringVarP(&f.output, "output", "o", "yaml", "output format: yaml or json")
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
	var objs []runtime.Object
	for _, l := range all {
		rendered, err := renderJob(l.job)
		if err != nil {
			return fmt.Errorf("%s%w", filePrefix(paths, l.path), err)
		}
		objs = append(objs, rendered...)
	}
	out, err := encode(objs)
	if err != nil {
		return fmt.Errorf("printing the objects: %w", err)
	}
	_, err = cmd.OutOrStdout().Write(out)
	return err
}

// renderJob renders one loaded job without a cluster.
func renderJob(job *v1alpha1.TrainJob) ([]runtime.Object, error) {
	var err error
	id := render.Identity{Namespace: job.Namespace, JobName: job.Name}
	if id.Namespace == "" {
		id.Namespace = defaultRenderNamespace
	}
	var in render.Inputs
	if job.Spec.Framework == v1alpha1.FrameworkMPI {
		if in.SSHPrivateKey, in.SSHPublicKey, err = sshkey.Generate(); err != nil {
			return nil, err
		}
	}
	objs, err := render.Render(job, id, in)
	if err != nil {
		return nil, err
	}
	return objs.List(), nil
}

// encoders print objects in each --output format.
var encoders = map[string]func([]runtime.Object) ([]byte, error){
	"yaml": encodeYAMLStream,
	"json": encodeJSONList,
}

// encodeYAMLStream writes one YAML document per object, separated by "---".
func encodeYAMLStream(objs []runtime.Object) ([]byte, error) {
	var buf bytes.Buffer
	for i, obj := range objs {
		doc, err := yaml.Marshal(obj)
		if err != nil {
			return nil, err
		}
		if i > 0 {
			buf.WriteString("---\n")
		}
		buf.Write(doc)
	}
	return buf.Bytes(), nil
}

// encodeJSONList writes the objects as a v1 List, indented like kubectl.
func encodeJSONList(objs []runtime.Object) ([]byte, error) {
	list := corev1.List{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "List"}}
	for _, obj := range objs {
		raw, err := json.Marshal(obj)
		if err != nil {
			return nil, err
		}
		list.Items = append(list.Items, runtime.RawExtension{Raw: raw})
	}
	data, err := json.MarshalIndent(list, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(data, '\n'), nil
}
