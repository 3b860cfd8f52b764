package main

import (
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/trainstep/trainstep/pkg/apis/trainstep/v1alpha1"
	"github.com/trainstep/trainstep/pkg/result"
	"github.com/trainstep/trainstep/pkg/spec"
)

// specFlags are the flags that name a job file and shape the job in it,
// shared by run, render and validate.
type specFlags struct {
	file string
	opts spec.Options
}

func (f *specFlags) register(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.StringVarP(&f.file, "file", "f", "", "job manifest: a TrainJob or a Kubeflow TFJob, PyTorchJob, JAXJob, XGBoostJob or MPIJob (- reads stdin)")
	_ = cmd.MarkFlagRequired("file")
	fl.StringVarP(&f.opts.Namespace, "namespace", "n", "", "namespace of the job's objects (default: metadata.namespace)")
	fl.StringVar(&f.opts.Name, "name", "", "job name, prefix of every object's name (default: metadata.name)")
	fl.BoolVar(&f.opts.Lenient, "lenient", false, "warn about unknown fields instead of rejecting the manifest")
	fl.StringArrayVar(&f.opts.Sets, "set", nil, "PATH=VALUE: set a field of the manifest before it is read, e.g. spec.replicaSpecs.Worker.replicas=4 (repeatable)")
	fl.StringArrayVar(&f.opts.Images, "image", nil, "[TYPE=]IMAGE: image of the main container of every replica type, or of TYPE (repeatable)")
	fl.StringArrayVar(&f.opts.Envs, "env", nil, "[TYPE:]KEY=VALUE: env var of the main container of every replica type, or of TYPE (repeatable)")
	fl.StringArrayVar(&f.opts.Args, "arg", nil, "[TYPE:]VALUE: argument appended to the main container's args of every replica type, or of TYPE (repeatable)")
}

// read returns the manifest's bytes: the file, or stdin for "-".
func (f *specFlags) read(stdin io.Reader) ([]byte, error) {
	var (
		data []byte
		err  error
	)
	if f.file == "-" {
		data, err = io.ReadAll(stdin)
	} else {
		data, err = os.ReadFile(f.file)
	}
	if err != nil {
		return nil, result.Invalid(result.ReasonInvalidSpec, fmt.Errorf("reading the job file: %w", err))
	}
	return data, nil
}

// options returns the spec options the flags set.
func (f *specFlags) options() spec.Options {
	return f.opts
}

// load reads and loads the job, printing spec warnings to stderr.
func (f *specFlags) load(cmd *cobra.Command) (*v1alpha1.TrainJob, error) {
	data, err := f.read(cmd.InOrStdin())
	if err != nil {
		return nil, err
	}
	job, warnings, err := spec.Load(data, f.options())
	for _, w := range warnings {
		fmt.Fprintln(cmd.ErrOrStderr(), "Warning:", w)
	}
	if err != nil {
		return nil, err
	}
	return job, nil
}
