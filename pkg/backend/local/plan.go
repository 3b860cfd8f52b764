package local

import (
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/trainstep/trainstep/pkg/apis/trainstep/v1alpha1"
	"github.com/trainstep/trainstep/pkg/frameworks"
	"github.com/trainstep/trainstep/pkg/logs"
	"github.com/trainstep/trainstep/pkg/policy"
	"github.com/trainstep/trainstep/pkg/render"
	"github.com/trainstep/trainstep/pkg/result"
	"github.com/trainstep/trainstep/pkg/spec"
)

// DefaultNamespace names the namespace the replicas' environment sees
// (metadata.namespace, Service names) when the job does not set one.
const DefaultNamespace = "default"

// DefaultStopGrace is how long a process has between SIGTERM and SIGKILL
// when its pod template sets no terminationGracePeriodSeconds.
const DefaultStopGrace = 10 * time.Second

// plan is how one replica runs on this machine.
type plan struct {
	id policy.ReplicaID
	// slot: a replica with no process of its own (an MPI worker, run by
	// the launcher's mpirun, not by trainstep).
	slot   bool
	argv   []string
	env    []string
	grace  time.Duration
	prefix string // log prefix; "" when its output is not streamed
	// terminationLog is the file the process writes its termination message to.
	terminationLog string
}

// planner turns the rendered pods into plans.
type planner struct {
	job      *v1alpha1.TrainJob
	identity render.Identity
	dir      string
	baseEnv  []string
	env      *environment
	// jobEnv comes before every container's own variables (Options.JobEnv).
	jobEnv []envVar
	// setupEnv is what the framework adds to every process (LocalSetup).
	setupEnv []envVar
	leaders  map[frameworks.ReplicaRef]bool
	logs     logs.Mode
	maxGrace time.Duration
	// lookPath resolves a command as os/exec will when it starts it.
	lookPath func(string) (string, error)
}

// plans renders every replica of the job and plans its process. A replica
// type without a command, or whose command is not on this machine, is an
// Invalid error naming the field; nothing has been started then.
func (p *planner) plans() ([]*plan, []string, error) {
	var plans []*plan
	var warnings []string
	var errs field.ErrorList
	checked := map[v1alpha1.ReplicaType]bool{}
	renderer, err := render.NewRenderer(p.job, p.identity)
	if err != nil {
		return nil, nil, result.Invalid(result.ReasonInvalidSpec, err)
	}
	for _, id := range policy.Desired(p.job) {
		if frameworks.IsSlot(p.job, id.Type) {
			plans = append(plans, &plan{id: id, slot: true})
			continue
		}
		pl, warns, fieldErrs, err := p.plan(renderer, id)
		if err != nil {
			return nil, nil, err
		}
		if !checked[id.Type] {
			// Every replica of a type shares its template: report once.
			checked[id.Type] = true
			errs = append(errs, fieldErrs...)
			warnings = append(warnings, warns...)
		}
		plans = append(plans, pl)
	}
	if len(errs) > 0 {
		return nil, warnings, result.Invalid(result.ReasonInvalidSpec, &spec.ValidationError{Errors: errs})
	}
	return plans, warnings, nil
}

// plan renders replica id's pod and plans its main container as a process.
func (p *planner) plan(renderer *render.Renderer, id policy.ReplicaID) (*plan, []string, field.ErrorList, error) {
	pod, err := renderer.Pod(id.Type, id.Index, 0)
	if err != nil {
		return nil, nil, nil, result.Invalid(result.ReasonInvalidSpec, fmt.Errorf("rendering replica %s: %w", id, err))
	}
	index := frameworks.MainContainerIndex(p.job, &pod.Spec)
	path := field.NewPath("spec", "replicaSpecs").Child(string(id.Type), "template", "spec").Child("containers").Index(index)
	if index < 0 {
		return nil, nil, field.ErrorList{field.Required(path, "a container to run")}, nil
	}
	main := &pod.Spec.Containers[index]
	if len(main.Command) == 0 {
		return &plan{id: id}, nil, field.ErrorList{field.Required(path.Child("command"),
			"the local backend runs the container's command on this machine and cannot use the image's entrypoint")}, nil
	}

	vars, warnings := p.env.containerEnv(frameworks.ReplicaRef{Type: id.Type, Index: id.Index}, pod, main, path, p.jobEnv)
	terminationLog := filepath.Join(p.dir, logs.ReplicaPrefix(string(id.Type), id.Index)+".termination-log")
	vars = append(vars, envVar{name: EnvTerminationMessagePath, value: terminationLog})
	vars = append(vars, p.setupEnv...)
	final := map[string]string{}
	for _, v := range vars {
		final[v.name] = v.value
	}
	argv := make([]string, 0, len(main.Command)+len(main.Args))
	for _, arg := range append(append([]string{}, main.Command...), main.Args...) {
		argv = append(argv, p.env.localPath(expand(arg, lookupIn(final))))
	}
	var errs field.ErrorList
	if _, err := p.lookPath(argv[0]); err != nil {
		errs = append(errs, field.Invalid(path.Child("command").Index(0), argv[0], commandProblem(argv[0])))
	}
	if main.WorkingDir != "" {
		warnings = append(warnings, fmt.Sprintf("%s: %q is ignored; local processes run in the current directory", path.Child("workingDir"), main.WorkingDir))
	}

	pl := &plan{
		id:             id,
		argv:           argv,
		env:            environ(p.baseEnv, vars),
		grace:          p.grace(pod.Spec.TerminationGracePeriodSeconds),
		terminationLog: terminationLog,
	}
	leader := p.leaders[frameworks.ReplicaRef{Type: id.Type, Index: id.Index}]
	if p.logs.Selects(leader) {
		pl.prefix = logs.ReplicaPrefix(string(id.Type), id.Index)
	}
	return pl, warnings, errs, nil
}

// grace is the template's termination grace period, bounded by the
// run's own teardown budget.
func (p *planner) grace(seconds *int64) time.Duration {
	grace := DefaultStopGrace
	if seconds != nil {
		grace = time.Duration(*seconds) * time.Second
	}
	if p.maxGrace > 0 && grace > p.maxGrace {
		grace = p.maxGrace
	}
	return grace
}

// describeCommand renders argv for a log line.
func describeCommand(argv []string) string {
	return strings.Join(argv, " ")
}
