package main

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"

	"github.com/trainstep/trainstep/pkg/apis/trainstep/v1alpha1"
	"github.com/trainstep/trainstep/pkg/result"
	"github.com/trainstep/trainstep/pkg/spec"
)

type convertFlags struct {
	spec   specFlags
	output string
}

func newConvertCommand() *cobra.Command {
	f := &convertFlags{}
	cmd := &cobra.Command{
		Use:   "convert [-f] JOB.yaml... [-o yaml|json]",
		Short: "Print the TrainJob a Kubeflow manifest is run as, with every default spelled out",
		Long: `Print the TrainJob trainstep runs for a job file: a Kubeflow TFJob, PyTorchJob,
JAXJob, XGBoostJob, PaddleJob or MPIJob converted with Kubeflow's defaults, or a
TrainJob, after the overrides (--set, --image, --env, --arg, --gang), defaulted
and validated. The output runs the same job as the input: 'trainstep render' of
either prints the same objects.

A Training Operator MPIJob (kubeflow.org/v1), which trainstep does not run as
it is, is printed as the MPIJob v2beta1 that runs the same job (--set applies
to the v1 manifest), and every change it brings is printed to stderr: the
workers run sshd, the launcher reaches them over SSH.`,
		RunE: func(cmd *cobra.Command, args []string) error { return f.run(cmd, args) },
	}
	f.spec.register(cmd)
	cmd.Flags().StringVarP(&f.output, "output", "o", "yaml", "output format: yaml or json")
	return cmd
}

func (f *convertFlags) run(cmd *cobra.Command, args []string) error {
	if f.output != "yaml" && f.output != "json" {
		return result.Invalid(result.ReasonInvalidArguments, fmt.Errorf("--output: %q is not yaml or json", f.output))
	}
	paths, err := f.spec.paths(args)
	if err != nil {
		return err
	}
	opts, policyWarnings, err := f.spec.options()
	for _, w := range policyWarnings {
		fmt.Fprintln(cmd.ErrOrStderr(), "Warning:", w)
	}
	if err != nil {
		return err
	}
	all := make([]loaded, 0, len(paths))
	var docs [][]byte
	for _, path := range paths {
		doc, err := f.convert(cmd, paths, path, opts)
		all = append(all, loaded{path: path, err: err})
		docs = append(docs, doc)
	}
	if err := joinLoadErrors(all); err != nil {
		return err
	}
	var out bytes.Buffer
	for i, doc := range docs {
		if i > 0 && f.output == "yaml" {
			out.WriteString("---\n")
		}
		out.Write(doc)
	}
	_, err = cmd.OutOrStdout().Write(out.Bytes())
	return err
}

// convert prints one job file as the TrainJob it runs as, or a manifest
// of a kind trainstep does not run as it is (Training Operator's MPIJob v1)
// as the kind that runs the same job, saying on stderr what changes.
func (f *convertFlags) convert(cmd *cobra.Command, paths []string, path string, opts spec.Options) ([]byte, error) {
	data, err := readFile(cmd.InOrStdin(), path)
	if err != nil {
		return nil, err
	}
	manifest, changes, upgraded, err := spec.Upgrade(data, opts)
	if err != nil {
		return nil, err
	}
	if upgraded {
		fmt.Fprintf(cmd.ErrOrStderr(), "Warning: %swritten as %s %s; what changes:\n", filePrefix(paths, path), manifest["apiVersion"], manifest["kind"])
		for _, c := range changes {
			fmt.Fprintln(cmd.ErrOrStderr(), "  -", c)
		}
		return encodeManifest(manifest, f.output)
	}
	job, warnings, err := spec.Load(data, opts)
	for _, w := range warnings {
		fmt.Fprintln(cmd.ErrOrStderr(), "Warning:", filePrefix(paths, path)+w)
	}
	if err != nil {
		return nil, err
	}
	doc, err := encodeTrainJob(job, f.output)
	if err != nil {
		return nil, fmt.Errorf("printing %s: %w", path, err)
	}
	return doc, nil
}

// encodeManifest prints a manifest's tree.
func encodeManifest(manifest map[string]any, format string) ([]byte, error) {
	if format == "json" {
		data, err := json.MarshalIndent(manifest, "", "  ")
		return append(data, '\n'), err
	}
	return yaml.Marshal(manifest)
}

// encodeTrainJob prints a job as a manifest: no namespace unless it had
// one, nothing a cluster would add.
func encodeTrainJob(job *v1alpha1.TrainJob, format string) ([]byte, error) {
	job = job.DeepCopy()
	job.APIVersion, job.Kind = v1alpha1.APIVersion, v1alpha1.Kind
	if format == "json" {
		data, err := json.MarshalIndent(job, "", "  ")
		return append(data, '\n'), err
	}
	return yaml.Marshal(job)
}
