package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/trainstep/trainstep/pkg/apis/trainstep/v1alpha1"
	"github.com/trainstep/trainstep/pkg/result"
	"github.com/trainstep/trainstep/pkg/spec"
)

// specFlags are the flags that name job files and shape the job in each,
// shared by run, render, validate and convert. Files come from -f (repeatable,
// or comma-separated, as kubectl's) and from the positional arguments.
type specFlags struct {
	files  []string
	opts   spec.Options
	policy policyFlags
}

func (f *specFlags) register(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.StringSliceVarP(&f.files, "file", "f", nil, "job manifest: a TrainJob or a Kubeflow TFJob, PyTorchJob, JAXJob, XGBoostJob, PaddleJob or MPIJob (- reads stdin); also as an argument")
	fl.StringVarP(&f.opts.Namespace, "namespace", "n", "", "namespace of the job's objects (default: metadata.namespace)")
	fl.StringVar(&f.opts.Name, "name", "", "job name, prefix of every object's name (default: metadata.name)")
	fl.BoolVar(&f.opts.Lenient, "lenient", false, "warn about unknown fields instead of rejecting the manifest")
	fl.StringArrayVar(&f.opts.Sets, "set", nil, "PATH=VALUE: set a field of the manifest before it is read, e.g. spec.replicaSpecs.Worker.replicas=4 (repeatable; a value of several lines is one per line)")
	fl.StringArrayVar(&f.opts.Images, "image", nil, "[TYPE=]IMAGE: image of the main container of every replica type, or of TYPE (repeatable; a value of several lines is one per line)")
	fl.StringArrayVar(&f.opts.Envs, "env", nil, "[TYPE:]KEY=VALUE: env var of the main container of every replica type, or of TYPE (repeatable; a value of several lines is one per line)")
	fl.StringVar(&f.opts.Gang, "gang", "", "gang scheduling of the job: none, builtin, kubernetes, scheduler-plugins, volcano or kueue (replaces spec.runPolicy.schedulingPolicy.gang; Kubeflow manifests too)")
	fl.StringArrayVar(&f.opts.Args, "arg", nil, "[TYPE:]VALUE: argument appended to the main container's args of every replica type, or of TYPE (repeatable; a value of several lines is one per line)")
	f.policy.register(fl)
}

// paths are the job files named by -f and by the arguments, in that order.
func (f *specFlags) paths(args []string) ([]string, error) {
	var paths []string
	for _, p := range append(append([]string{}, f.files...), args...) {
		if p != "" {
			paths = append(paths, p)
		}
	}
	if len(paths) == 0 {
		return nil, result.Invalid(result.ReasonInvalidArguments, errors.New("no job file: give one with -f FILE or as an argument (- reads stdin)"))
	}
	return paths, nil
}

// readOne returns the bytes of the one job file a run takes.
func (f *specFlags) readOne(stdin io.Reader, args []string) ([]byte, error) {
	paths, err := f.paths(args)
	if err != nil {
		return nil, err
	}
	if len(paths) > 1 {
		return nil, result.Invalid(result.ReasonInvalidArguments, fmt.Errorf("one run takes one job file, got %d: %s", len(paths), strings.Join(paths, ", ")))
	}
	return readFile(stdin, paths[0])
}

// readFile returns a job file's bytes: the file, or stdin for "-". A file
// over spec.MaxManifestBytes is refused without being read whole: the step's
// memory is bounded, and parsing takes about ten times the file's size.
func readFile(stdin io.Reader, path string) ([]byte, error) {
	in := stdin
	if path != "-" {
		file, err := os.Open(path)
		if err != nil {
			return nil, result.Invalid(result.ReasonInvalidArguments, fmt.Errorf("reading the job file: %w", err))
		}
		defer file.Close()
		if info, err := file.Stat(); err == nil && info.Mode().IsRegular() && info.Size() > spec.MaxManifestBytes {
			return nil, result.Invalid(result.ReasonInvalidSpec, fmt.Errorf("job file %s: %w", path, spec.TooLarge(info.Size())))
		}
		in = file
	}
	data, err := io.ReadAll(io.LimitReader(in, spec.MaxManifestBytes+1))
	if err != nil {
		return nil, result.Invalid(result.ReasonInvalidArguments, fmt.Errorf("reading the job file: %w", err))
	}
	if len(data) > spec.MaxManifestBytes {
		return nil, result.Invalid(result.ReasonInvalidSpec, fmt.Errorf("job file %s: %w", path, spec.TooLarge(-1)))
	}
	return data, nil
}

// options returns the spec options the flags and the policy file set, and
// the policy file's warnings.
func (f *specFlags) options() (spec.Options, []string, error) {
	opts := f.opts
	var warnings []string
	var err error
	opts.Policy, warnings, err = f.policy.resolve()
	return opts, warnings, err
}

// loaded is one job file loaded, or the error that stopped it.
type loaded struct {
	path string
	data []byte
	opts spec.Options
	job  *v1alpha1.TrainJob
	err  error
}

// loadAll reads and loads every job file, printing spec warnings to stderr
// (prefixed with the file's name when there are several).
func (f *specFlags) loadAll(cmd *cobra.Command, args []string) ([]loaded, error) {
	paths, err := f.paths(args)
	if err != nil {
		return nil, err
	}
	opts, policyWarnings, err := f.options()
	for _, w := range policyWarnings {
		fmt.Fprintln(cmd.ErrOrStderr(), "Warning:", w)
	}
	if err != nil {
		return nil, err
	}
	out := make([]loaded, 0, len(paths))
	for _, path := range paths {
		l := loaded{path: path, opts: opts}
		l.data, err = readFile(cmd.InOrStdin(), path)
		if err == nil {
			var warnings []string
			l.job, warnings, err = spec.Load(l.data, opts)
			for _, w := range warnings {
				fmt.Fprintln(cmd.ErrOrStderr(), "Warning:", filePrefix(paths, path)+w)
			}
		}
		l.err = err
		out = append(out, l)
	}
	return out, nil
}

// filePrefix is "PATH: " when several files are at hand, so each line
// says which file it is about; "" for a single file.
func filePrefix(paths []string, path string) string {
	if len(paths) < 2 {
		return ""
	}
	return path + ": "
}

// joinLoadErrors is every file's error, each line prefixed with its file
// when there are several; nil when every file loaded.
func joinLoadErrors(all []loaded) error {
	paths := make([]string, len(all))
	for i, l := range all {
		paths[i] = l.path
	}
	var lines []string
	var first error
	for _, l := range all {
		if l.err == nil {
			continue
		}
		if first == nil {
			first = l.err
		}
		for _, line := range strings.Split(l.err.Error(), "\n") {
			lines = append(lines, filePrefix(paths, l.path)+line)
		}
	}
	if first == nil {
		return nil
	}
	return &result.Error{Phase: result.PhaseOf(first), Reason: reasonOf(first), Err: errors.New(strings.Join(lines, "\n"))}
}

func reasonOf(err error) string {
	var re *result.Error
	if errors.As(err, &re) {
		return re.Reason
	}
	return ""
}
