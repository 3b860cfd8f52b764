package main

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"

	"github.com/trainstep/trainstep/pkg/apis/trainstep/v1alpha1"
	"github.com/trainstep/trainstep/pkg/result"
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
JAXJob, XGBoostJob or MPIJob converted with Kubeflow's defaults, or a TrainJob,
after the overrides (--set, --image, --env, --arg, --gang), defaulted and
validated. The output runs the same job as the input: 'trainstep render' of
either prints the same objects.`,
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
	all, err := f.spec.loadAll(cmd, args)
	if err != nil {
		return err
	}
	if err := joinLoadErrors(all); err != nil {
		return err
	}
	var out bytes.Buffer
	for i, l := range all {
		doc, err := encodeTrainJob(l.job, f.output)
		if err != nil {
			return fmt.Errorf("printing %s: %w", l.path, err)
		}
		if i > 0 && f.output == "yaml" {
			out.WriteString("---\n")
		}
		out.Write(doc)
	}
	_, err = cmd.OutOrStdout().Write(out.Bytes())
	return err
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
