package v1alpha1

// Label and annotation keys trainstep puts on every object it creates.
// Argo templates, `argo logs -l`, re-attach and outside checks select on
// these exact names.
const (
	// LabelJobName holds the job name on every object.
	LabelJobName = "trainstep.dev/job-name"
	// LabelIdentity holds, on every object, the hash of the owner identity
	// the run that created it proved: the workflow and the retried step
	// (node) that run the job, or the identity a run by hand was given. A
	// run uses, adopts and deletes only objects of its own identity; the
	// job name, which a submitter chooses, proves nothing.
	LabelIdentity = "trainstep.dev/identity"
	// LabelReplicaType holds the lower-case replica type (worker, ps, …).
	LabelReplicaType = "trainstep.dev/replica-type"
	// LabelReplicaIndex holds the replica's index within its type.
	LabelReplicaIndex = "trainstep.dev/replica-index"
	// LabelAttempt counts recreations of one replica, starting at 0.
	LabelAttempt = "trainstep.dev/attempt"
	// LabelJobAttempt counts whole-job restarts of a job that restarts as
	// a whole (failurePolicy restart: Job), starting at 0.
	LabelJobAttempt = "trainstep.dev/job-attempt"
	// LabelWorkflow is Argo's workflow label, set when the workflow is known.
	LabelWorkflow = "workflows.argoproj.io/workflow"
	// LabelTrainerStatus holds the job's identity (LabelIdentity's value)
	// on the step's own pod, the one serving the job's progress endpoint:
	// the <job>-status Service selects it, and a retried step moves it to
	// its own pod.
	LabelTrainerStatus = "trainstep.dev/trainer-status"

	// LabelKueueQueueName and LabelKueuePriorityClass, on a job's own
	// metadata, put it in that Kueue LocalQueue with that
	// WorkloadPriorityClass, as Kueue's integrations read them off a job:
	// defaulting makes them spec.runPolicy.schedulingPolicy's gang kueue,
	// queue and workloadPriorityClass. They are Kueue's keys, never set on
	// objects by anyone but trainstep's own gang handling.
	LabelKueueQueueName     = "kueue.x-k8s.io/queue-name"
	LabelKueuePriorityClass = "kueue.x-k8s.io/priority-class"

	// AnnotationFramework records the framework on every pod, for humans.
	AnnotationFramework = "trainstep.dev/framework"
	// AnnotationRestarts records, on each replica pod, the replica's
	// restarts before that instance (recreations and the in-place restarts
	// of the instances they replaced). A later run of the step that
	// re-attaches reads it back, so backoffLimit holds across Argo retries.
	AnnotationRestarts = "trainstep.dev/restarts"
	// AnnotationJobRestarts records, on each replica pod, the job's counted
	// whole-job restarts before that pod's job attempt, for re-attach.
	AnnotationJobRestarts = "trainstep.dev/job-restarts"
	// AnnotationRestartLedger records, on the job's first Service, each
	// counted recreation before its delete is sent (the instance replaced
	// and the replica's restarts after it) and each counted whole-job
	// restart: a step that dies between a delete and the replacement's
	// create leaves the count there for the run that re-attaches.
	AnnotationRestartLedger = "trainstep.dev/restart-ledger"
	// AnnotationRestartReason records, on each pod of a whole-job attempt
	// after the first, why the attempt before it ended: "disruption" or
	// "failure" (the replicas read it as TRAINSTEP_RESTART_REASON).
	AnnotationRestartReason = "trainstep.dev/restart-reason"
	// AnnotationWorkerTarget records, on the job's first Service, the
	// worker count elasticPolicy.metrics last set, before any pod is
	// created or deleted for it: a run that re-attaches goes on from it, as
	// an HPA goes on from its target's replicas.
	AnnotationWorkerTarget = "trainstep.dev/worker-target"
)
