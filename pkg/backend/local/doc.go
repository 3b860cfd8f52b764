// Package local runs a TrainJob as processes on this machine, for laptops,
// CI and the README's demo: every replica's main container command becomes
// one process in its own process group, with the environment the renderer
// gives its pod and the peer addresses in it pointed at 127.0.0.1.
//
// The backend plays both parts a cluster plays. As a node it restarts a
// process in place when its restart policy says so (policy.RestartsInPlace),
// as a controller it recreates and ends the job as policy.Decide says: the
// same pure policy code the Kubernetes reconciler calls, never a copy.
//
// An MPI job runs only its launcher: the workers are slots in a hostfile
// ("localhost slots=N") that the launcher's mpirun starts ranks on.
//
// The package never leaves a process behind: whatever ends the run (the job
// ends, the context is cancelled), every process group it started is
// stopped before Run returns; KillProcessGroups serves an exit that cannot
// wait for that. On Linux, given a supervisor command (Options.Supervisor,
// Supervise), each replica runs under a subreaper that also ends what the
// replica's processes leave outside their group, and all of it when
// trainstep dies, even by SIGKILL. It must not write outputs or talk to a
// cluster; the executor does that with the View and Decision it returns.
package local
