package reconcile

// Event reasons recorded on the job's owner (the step pod or the Workflow).
const (
	// EventCreated: the job's objects were created.
	EventCreated = "Created"
	// EventAdopted: objects of an earlier attempt of the same job were re-attached.
	EventAdopted = "Adopted"
	// EventRestarted: a replica was recreated after it failed or was lost.
	EventRestarted = "Restarted"
	// EventSucceeded: the job succeeded.
	EventSucceeded = "Succeeded"
	// EventFailed: the job failed.
	EventFailed = "Failed"
	// EventGangAdmitted: the built-in gang saw enough pods bound together.
	EventGangAdmitted = "GangAdmitted"
	// EventGangRetry: an attempt of the built-in gang timed out, or a
	// ResourceQuota kept part of a gang out; its pods were released.
	EventGangRetry = "GangRetry"
	// EventUnschedulable: the built-in gang's last attempt timed out.
	EventUnschedulable = "Unschedulable"
	// EventTerminated: the step was stopped and the job's objects deleted.
	EventTerminated = "Terminated"
	// EventNotOwned: an object with a name of the job's exists but is not
	// the job's (another identity, or another owner); trainstep does not
	// take it over.
	EventNotOwned = "NotOwned"
	// EventRestoredSpec: an object of the job an earlier attempt left
	// (NetworkPolicy, PodGroup, ConfigMap) was re-attached but did not hold
	// what this run renders; it was written back to the rendered spec.
	EventRestoredSpec = "RestoredSpec"
	// EventJobRestarted: every replica of a job that restarts as a whole
	// was stopped and is created again at the next job attempt.
	EventJobRestarted = "JobRestarted"
	// EventFailedCreate: a ResourceQuota refused some of the job's objects;
	// trainstep waits for room (as the Job controller's FailedCreate).
	EventFailedCreate = "FailedCreate"
	// EventElasticResized: the number of running workers of an elastic
	// job changed; torchrun's agents re-rendezvous at the new world size.
	EventElasticResized = "ElasticResized"
	// EventElasticScaled: elasticPolicy.metrics moved an elastic job's
	// worker target (the HPA's algorithm); workers above it are removed,
	// slots below it get workers.
	EventElasticScaled = "ElasticScaled"
	// EventWorkersReady: every MPI worker is Ready; the launcher held back
	// by launcherCreationPolicy: WaitForWorkersReady is created.
	EventWorkersReady = "WorkersReady"
)
