package local

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/trainstep/trainstep/pkg/apis/trainstep/v1alpha1"
	"github.com/trainstep/trainstep/pkg/frameworks"
	"github.com/trainstep/trainstep/pkg/policy"
)

// OpenMPI refuses to run as root unless told twice; a CI container runs
// tests as root.
const (
	envOMPIAllowRunAsRoot        = "OMPI_ALLOW_RUN_AS_ROOT"
	envOMPIAllowRunAsRootConfirm = "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM"
)

// isSlot reports whether a replica is an MPI worker, which locally is a
// slot of the launcher's hostfile rather than a process.
func isSlot(job *v1alpha1.TrainJob, id policy.ReplicaID) bool {
	return job.Spec.Framework == v1alpha1.FrameworkMPI && id.Type == v1alpha1.ReplicaTypeWorker
}

// mpiSlots is how many ranks the hostfile offers: every worker's slots,
// and the launcher's when it runs as a worker too.
func mpiSlots(job *v1alpha1.TrainJob) int {
	hosts := frameworks.Replicas(job, v1alpha1.ReplicaTypeWorker)
	if job.Spec.RunLauncherAsWorker != nil && *job.Spec.RunLauncherAsWorker {
		hosts++
	}
	perWorker := int(v1alpha1.DefaultSlotsPerWorker)
	if job.Spec.SlotsPerWorker != nil {
		perWorker = int(*job.Spec.SlotsPerWorker)
	}
	return hosts * perWorker
}

// writeMPIConfig writes what the launcher finds under /etc/mpi on a
// cluster into dir: a hostfile offering every slot on localhost, in the
// MPI implementation's format, and a host discovery script.
func writeMPIConfig(job *v1alpha1.TrainJob, dir string) error {
	slots := mpiSlots(job)
	hostfile := fmt.Sprintf("localhost slots=%d\n", slots)
	if impl := job.Spec.MPIImplementation; impl == v1alpha1.MPIImplementationIntel || impl == v1alpha1.MPIImplementationMPICH {
		hostfile = fmt.Sprintf("localhost:%d\n", slots)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("writing the MPI hostfile: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, frameworks.MPIHostfileKey), []byte(hostfile), 0o444); err != nil {
		return fmt.Errorf("writing the MPI hostfile: %w", err)
	}
	script := "#!/bin/sh\necho localhost\n"
	if err := os.WriteFile(filepath.Join(dir, frameworks.MPIDiscoverHostsKey), []byte(script), 0o555); err != nil {
		return fmt.Errorf("writing the MPI host discovery script: %w", err)
	}
	return nil
}

// mpiRootEnv lets OpenMPI's mpirun run as root, as trainstep does in CI
// containers.
func mpiRootEnv(job *v1alpha1.TrainJob) []envVar {
	if job.Spec.Framework != v1alpha1.FrameworkMPI || os.Geteuid() != 0 {
		return nil
	}
	return []envVar{{name: envOMPIAllowRunAsRoot, value: "1"}, {name: envOMPIAllowRunAsRootConfirm, value: "1"}}
}
