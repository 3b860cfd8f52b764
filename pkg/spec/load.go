// Package spec turns the bytes of a job file into a defaulted, validated
// TrainJob: it reads YAML or JSON, applies --set overrides to the document,
// decodes strictly, converts Kubeflow manifests, applies the --image,
// --env and --arg overrides, then defaults and validates, holding the
// replicas' pod templates to the installation's replica policy.
//
// Every error it returns is an Invalid result error (exit 11) that names
// the offending field or flag. It must not read files or flags itself, nor
// talk to a cluster: callers pass the bytes and an Options value.
package spec

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"regexp"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	kjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"

	"github.com/trainstep/trainstep/pkg/apis/trainstep/v1alpha1"
	"github.com/trainstep/trainstep/pkg/frameworks"
	"github.com/trainstep/trainstep/pkg/kubeflow"
	"github.com/trainstep/trainstep/pkg/replicapolicy"
	"github.com/trainstep/trainstep/pkg/result"
)

// Options are the command-line inputs that shape a job besides its file.
type Options struct {
	// Name and Namespace replace metadata.name and metadata.namespace when set.
	Name, Namespace string
	// Lenient turns unknown fields into warnings instead of errors.
	Lenient bool
	// Sets are PATH=VALUE overrides applied to the document before it is
	// decoded, so PATH is the manifest's own (spec.replicaSpecs.Worker.replicas
	// in a TrainJob, spec.tfReplicaSpecs.Worker.replicas in a TFJob). Segments
	// are separated by dots (write \. for a dot inside a key) and list items
	// are addressed as name[0]. VALUE is parsed as YAML: 8 is a number,
	// "8" (quoted) a string, [a, b] a list; an empty VALUE is the empty string.
	Sets []string
	// Images are [TYPE=]IMAGE: the main container's image of every replica
	// type, or of TYPE only.
	Images []string
	// Envs are [TYPE:]KEY=VALUE: an env var set (replaced if present) on the
	// main container of every replica type, or of TYPE only.
	Envs []string
	// Args are [TYPE:]VALUE: an argument appended to the main container's
	// args of every replica type, or of TYPE only.
	Args []string
	// Gang, when set, is the job's spec.runPolicy.schedulingPolicy.gang,
	// whatever the manifest says: the one way to choose a gang scheduler
	// for a Kubeflow manifest without editing it.
	Gang string
	// Policy is what the installation allows the replicas' pod templates;
	// its zero value is the strictest.
	Policy replicapolicy.Policy
	// In Sets, Images, Envs and Args a value of several lines is one
	// override per line; empty lines are skipped, and each line is trimmed.
}

// MaxManifestBytes bounds a job manifest. The largest job trainstep runs
// (MaxReplicas replicas, every type with its own template) is far smaller;
// past this, parsing alone would take hundreds of MiB of a step whose
// memory limit is 1 GiB, and the step would die without its outputs.
const MaxManifestBytes = 4 << 20

// TooLarge is the error for a manifest of size bytes, over
// MaxManifestBytes; a size below 0 is one not known (stdin read up to the
// limit).
func TooLarge(size int64) error {
	if size < 0 {
		return fmt.Errorf("the manifest is larger than the limit of %d bytes (4 MiB)", MaxManifestBytes)
	}
	return fmt.Errorf("the manifest is %d bytes (%.1f MiB), over the limit of %d bytes (4 MiB)", size, float64(size)/(1<<20), MaxManifestBytes)
}

// ValidationError lists every field error of an invalid job, one per line.
type ValidationError struct {
	Errors field.ErrorList
}

func (e *ValidationError) Error() string {
	lines := make([]string, len(e.Errors))
	for i, err := range e.Errors {
		lines[i] = err.Error()
	}
	return strings.Join(lines, "\n")
}

// Load reads one job manifest and returns it defaulted and validated, with
// warnings about fields that were accepted but change nothing. Any error is
// a *result.Error with phase Invalid and reason InvalidSpec.
func Load(data []byte, opts Options) (*v1alpha1.TrainJob, []string, error) {
	job, warnings, err := load(data, opts)
	if err != nil {
		return nil, warnings, result.Invalid(result.ReasonInvalidSpec, err)
	}
	return job, warnings, nil
}

func load(data []byte, opts Options) (*v1alpha1.TrainJob, []string, error) {
	if len(data) > MaxManifestBytes {
		return nil, nil, TooLarge(int64(len(data)))
	}
	opts = withoutEmptyOverrides(opts)
	doc, err := singleDocument(data)
	if err != nil {
		return nil, nil, err
	}
	dupWarnings, err := checkDuplicateKeys(data, opts.Lenient)
	if err != nil {
		return nil, nil, err
	}
	for _, set := range opts.Sets {
		if err := applySet(doc, set); err != nil {
			return nil, nil, err
		}
	}
	job, warnings, err := decode(doc, opts.Lenient)
	warnings = append(dupWarnings, warnings...)
	if err != nil {
		return nil, warnings, err
	}
	terms := manifestTerms(doc)
	if opts.Name != "" {
		job.Name = opts.Name
	}
	if opts.Namespace != "" {
		job.Namespace = opts.Namespace
	}
	if cp := job.Spec.RunPolicy.CleanPodPolicy; cp != nil && *cp == v1alpha1.CleanPodPolicyNone {
		warnings = append(warnings, keptReplicasWarning(job.Name))
	}
	if opts.Gang != "" {
		if job.Spec.RunPolicy.SchedulingPolicy == nil {
			job.Spec.RunPolicy.SchedulingPolicy = &v1alpha1.SchedulingPolicy{}
		}
		job.Spec.RunPolicy.SchedulingPolicy.Gang = v1alpha1.GangKind(opts.Gang)
	}
	if sp := job.Spec.RunPolicy.SchedulingPolicy; terms.replicaSpecs != trainJobReplicaSpecs && sp != nil && sp.Gang == "" &&
		job.Labels[v1alpha1.LabelKueueQueueName] == "" {
		warnings = append(warnings, "spec.runPolicy.schedulingPolicy: Kubeflow turns gang scheduling on operator-wide; "+
			"trainstep keeps it off (gang: none) until you choose one with --gang, spec.runPolicy.schedulingPolicy.gang "+
			"(builtin, kubernetes, scheduler-plugins, volcano, kueue) or Kueue's label kueue.x-k8s.io/queue-name on the job")
	}
	frameworks.SetDefaults(job)
	if err := applyOverrides(job, opts); err != nil {
		return nil, warnings, err
	}
	errs := frameworks.Validate(job)
	errs = append(errs, replicapolicy.Check(job, opts.Policy)...)
	if len(errs) > 0 {
		return nil, warnings, &ValidationError{Errors: terms.rewrite(errs)}
	}
	return job, append(warnings, replicapolicy.Notes(job, opts.Policy)...), nil
}

// UnboundedRestartsWarning is what a run says at its start when a
// defaulted job sets no bound on its restarts ("" when it does): a replica
// that keeps failing is restarted without end, as with the Training
// Operator (an MPI job's default, 6, is MPI Operator's launcher Job's).
func UnboundedRestartsWarning(job *v1alpha1.TrainJob) string {
	if job.Spec.RunPolicy.BackoffLimit != nil {
		return ""
	}
	return "spec.runPolicy.backoffLimit is unset: a replica that keeps failing is restarted without end, as with the Training Operator; " +
		"set it to bound the restarts (the progress line names crash-looping replicas)"
}

// keptReplicasWarning says what cleanPodPolicy None costs in a step: no
// job object is left whose deletion would remove the replicas.
func keptReplicasWarning(name string) string {
	return "spec.runPolicy.cleanPodPolicy: None keeps the replicas still running when the step ends, with the CPUs, " +
		"GPUs and memory they hold, until their owner (the step pod, which Argo keeps unless podGC removes it) is deleted; " +
		"remove them with: kubectl delete pods,services -l trainstep.dev/job-name=" + name
}

// terms maps the TrainJob's field paths to those of the manifest the user
// wrote: a TFJob's replicas are under spec.tfReplicaSpecs, not
// spec.replicaSpecs.
type terms struct {
	replicaSpecs string // the manifest's field for spec.replicaSpecs
}

const trainJobReplicaSpecs = "spec.replicaSpecs"

func manifestTerms(doc map[string]any) terms {
	apiVersion, _ := doc["apiVersion"].(string)
	kind, _ := doc["kind"].(string)
	if k, ok := frameworks.KubeflowKind(apiVersion, kind); ok {
		return terms{replicaSpecs: "spec." + k.ReplicaSpecsField}
	}
	return terms{replicaSpecs: trainJobReplicaSpecs}
}

// rewrite renames the paths of errs in place and returns them.
func (t terms) rewrite(errs field.ErrorList) field.ErrorList {
	if t.replicaSpecs == trainJobReplicaSpecs || t.replicaSpecs == "" {
		return errs
	}
	for _, e := range errs {
		if rest, ok := strings.CutPrefix(e.Field, trainJobReplicaSpecs); ok && (rest == "" || rest[0] == '.' || rest[0] == '[') {
			e.Field = t.replicaSpecs + rest
		}
	}
	return errs
}

// PolicyError is the Invalid error of a job that loaded from data but
// whose rendered objects the replica policy refuses
// (replicapolicy.CheckRendered), its paths in the manifest's terms; nil
// when errs is empty.
func PolicyError(data []byte, errs field.ErrorList) error {
	if len(errs) == 0 {
		return nil
	}
	return result.Invalid(result.ReasonInvalidSpec, InManifestTerms(data, &ValidationError{Errors: errs}))
}

// InManifestTerms rewrites the field paths of a job's validation error —
// from spec.Load or from a backend that checks the job further — to the
// paths of the manifest in data. Other errors are returned as they are.
func InManifestTerms(data []byte, err error) error {
	var verr *ValidationError
	if err == nil || !errors.As(err, &verr) {
		return err
	}
	doc, docErr := singleDocument(data)
	if docErr != nil {
		return err
	}
	manifestTerms(doc).rewrite(verr.Errors)
	return err
}

// withoutEmptyOverrides splits every --set, --image, --env and --arg value
// into its lines and drops the empty ones: a WorkflowTemplate passes each
// override flag once on every run, holding one override per line of its
// parameter, or nothing when the caller leaves that parameter unset.
func withoutEmptyOverrides(opts Options) Options {
	split := func(values []string) []string {
		var kept []string
		for _, v := range values {
			for _, line := range strings.Split(v, "\n") {
				if line = strings.TrimSpace(line); line != "" {
					kept = append(kept, line)
				}
			}
		}
		return kept
	}
	opts.Sets, opts.Images, opts.Envs, opts.Args = split(opts.Sets), split(opts.Images), split(opts.Envs), split(opts.Args)
	return opts
}

// singleDocument parses the input (YAML or JSON) into a JSON object tree.
// A stream with more than one non-empty document is an error: one file is
// one job.
func singleDocument(data []byte) (map[string]any, error) {
	reader := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	var found []map[string]any
	for {
		chunk, err := reader.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("reading the manifest: %w", err)
		}
		jsonDoc, err := yaml.YAMLToJSON(chunk)
		if err != nil {
			return nil, fmt.Errorf("parsing the manifest: %w", err)
		}
		var tree any
		if err := kjson.UnmarshalCaseSensitivePreserveInts(jsonDoc, &tree); err != nil {
			return nil, fmt.Errorf("parsing the manifest: %w", err)
		}
		if tree == nil {
			continue // empty document or comments only
		}
		obj, ok := tree.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("the manifest must be a YAML or JSON object, not %s", describe(tree))
		}
		found = append(found, obj)
	}
	switch len(found) {
	case 0:
		return nil, fmt.Errorf("the manifest is empty")
	case 1:
		return found[0], nil
	}
	return nil, fmt.Errorf("the file holds %d documents; one job file holds exactly one manifest", len(found))
}

func supportedKinds() string {
	kinds := append([]string{v1alpha1.APIVersion + " " + v1alpha1.Kind}, frameworks.KubeflowKinds()...)
	return strings.Join(kinds, ", ")
}

// decode picks the type from apiVersion and kind, decodes the document
// strictly into it and converts it to a TrainJob.
func decode(doc map[string]any, lenient bool) (*v1alpha1.TrainJob, []string, error) {
	apiVersion, _ := doc["apiVersion"].(string)
	kind, _ := doc["kind"].(string)
	if apiVersion == "" || kind == "" {
		return nil, nil, fmt.Errorf("apiVersion and kind are required; supported: %s", supportedKinds())
	}
	data, err := json.Marshal(doc)
	if err != nil {
		return nil, nil, fmt.Errorf("encoding the manifest: %w", err)
	}
	if apiVersion == v1alpha1.APIVersion && kind == v1alpha1.Kind {
		job := &v1alpha1.TrainJob{}
		if errs := checkTypes(doc, reflect.TypeOf(job).Elem(), nil); len(errs) > 0 {
			return nil, nil, &ValidationError{Errors: errs}
		}
		warnings, err := decodeStrict(data, job, kind, trainJobReplicaSpecs, lenient)
		return job, warnings, err
	}
	obj, warnings, err := DecodeKubeflow(doc, lenient)
	if err != nil {
		return nil, warnings, err
	}
	job, convertWarnings, err := obj.ToTrainJob()
	return job, append(warnings, convertWarnings...), err
}

// DecodeKubeflow decodes a Kubeflow manifest's document strictly into the
// kind its apiVersion and kind name, as its framework reads it.
func DecodeKubeflow(doc map[string]any, lenient bool) (kubeflow.Object, []string, error) {
	apiVersion, _ := doc["apiVersion"].(string)
	kind, _ := doc["kind"].(string)
	k, ok := frameworks.KubeflowKind(apiVersion, kind)
	if !ok {
		reason := frameworks.KubeflowUnsupported(apiVersion, kind)
		if reason == "" {
			reason = fmt.Sprintf("apiVersion %q kind %q is not supported", apiVersion, kind)
		}
		return nil, nil, fmt.Errorf("%s; supported: %s", reason, supportedKinds())
	}
	obj := k.New()
	if errs := checkTypes(doc, reflect.TypeOf(obj).Elem(), nil); len(errs) > 0 {
		return nil, nil, &ValidationError{Errors: errs}
	}
	data, err := json.Marshal(doc)
	if err != nil {
		return nil, nil, fmt.Errorf("encoding the manifest: %w", err)
	}
	warnings, err := decodeStrict(data, obj, kind, "spec."+k.ReplicaSpecsField, lenient)
	return obj, warnings, err
}

// strictErrorPattern matches sigs.k8s.io/json's strict errors, which carry
// the full field path: unknown field "spec.x[0].y".
var strictErrorPattern = regexp.MustCompile(`^(unknown|duplicate) field "(.*)"$`)

// decodeStrict decodes data into out, case-sensitively, rejecting unknown
// and duplicate fields (or returning them as warnings when lenient). An
// unknown replica map (a TrainJob's spec.replicaSpecs in a TFJob) is told
// the kind's own, replicaSpecs.
func decodeStrict(data []byte, out any, kind, replicaSpecs string, lenient bool) ([]string, error) {
	strictErrs, err := kjson.UnmarshalStrict(data, out, kjson.DisallowUnknownFields, kjson.DisallowDuplicateFields)
	if err != nil {
		return nil, fmt.Errorf("decoding %s: %w", kind, err)
	}
	problems := make([]string, len(strictErrs))
	for i, e := range strictErrs {
		msg := e.Error()
		if m := strictErrorPattern.FindStringSubmatch(msg); m != nil {
			msg = fmt.Sprintf("%s: %s field", m[2], m[1])
			if m[1] == "unknown" && isReplicaMap(m[2]) {
				msg += fmt.Sprintf("; a %s's replicas are under %s", kind, replicaSpecs)
			}
		}
		problems[i] = msg
	}
	if len(problems) == 0 {
		return nil, nil
	}
	if lenient {
		for i := range problems {
			problems[i] += " (ignored: --lenient)"
		}
		return problems, nil
	}
	return nil, errors.New(strings.Join(problems, "\n"))
}

// isReplicaMap reports whether path is a replica map, spec.replicaSpecs or
// spec.<x>ReplicaSpecs: the one of some other kind, when it is unknown.
func isReplicaMap(path string) bool {
	field, ok := strings.CutPrefix(path, "spec.")
	return ok && !strings.ContainsAny(field, ".[") && (field == "replicaSpecs" || strings.HasSuffix(field, "ReplicaSpecs"))
}

// JobName is the job's name as far as it can be told without loading the
// job: opts.Name, else the manifest's metadata.name, else "". It lets the
// outputs of a job that failed to load still name it.
func JobName(data []byte, opts Options) string {
	if opts.Name != "" {
		return opts.Name
	}
	doc, err := singleDocument(data)
	if err != nil {
		return ""
	}
	meta, _ := doc["metadata"].(map[string]any)
	name, _ := meta["name"].(string)
	return name
}
