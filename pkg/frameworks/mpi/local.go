package mpi

import (
	"fmt"
	"os"
	"path/filepath"

	corev1 "k8s.io/api/core/v1"

	"github.com/trainstep/trainstep/pkg/apis/trainstep/v1alpha1"
	"github.com/trainstep/trainstep/pkg/frameworks/framework"
)

// OpenMPI refuses to run as root unless told twice; a CI container runs
// tests as root.
const (
	envOMPIAllowRunAsRoot        = "OMPI_ALLOW_RUN_AS_ROOT"
	envOMPIAllowRunAsRootConfirm = "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM"
)

// localConfigDir is the directory, under the local run's own, standing in
// for the launcher's /etc/mpi mount.
const localConfigDir = "mpi"

// LocalValue implements framework.Local: MPI's variables hold no replica
// port, and its paths are the mounts LocalSetup maps.
func (Framework) LocalValue(string, string, framework.ReplicaRef, func(string) (string, bool), framework.Peers) (string, bool, string) {
	return "", false, ""
}

// LocalSetup implements framework.Local. On one machine the workers are no
// processes but slots of the launcher's hostfile (conventions: Slot), so
// the hostfile offers every slot on localhost, in the MPI
// implementation's format, and the discovery script names localhost. As
// root (a CI container), OpenMPI's mpirun is allowed to run as root.
func (Framework) LocalSetup(job *v1alpha1.TrainJob, dir string) (framework.LocalSetup, error) {
	config := filepath.Join(dir, localConfigDir)
	slots := localSlots(job)
	hostfile := fmt.Sprintf("localhost slots=%d\n", slots)
	if impl := mpiImplementation(job); impl == v1alpha1.MPIImplementationIntel || impl == v1alpha1.MPIImplementationMPICH {
		hostfile = fmt.Sprintf("localhost:%d\n", slots)
	}
	if err := os.MkdirAll(config, 0o755); err != nil {
		return framework.LocalSetup{}, fmt.Errorf("writing the MPI hostfile: %w", err)
	}
	if err := os.WriteFile(filepath.Join(config, MPIHostfileKey), []byte(hostfile), 0o444); err != nil {
		return framework.LocalSetup{}, fmt.Errorf("writing the MPI hostfile: %w", err)
	}
	script := "#!/bin/sh\necho localhost\n"
	if err := os.WriteFile(filepath.Join(config, MPIDiscoverHostsKey), []byte(script), 0o555); err != nil {
		return framework.LocalSetup{}, fmt.Errorf("writing the MPI host discovery script: %w", err)
	}
	setup := framework.LocalSetup{Mounts: map[string]string{MPIConfigMountPath: config}}
	if os.Geteuid() == 0 {
		setup.Env = []corev1.EnvVar{framework.EnvVar(envOMPIAllowRunAsRoot, "1"), framework.EnvVar(envOMPIAllowRunAsRootConfirm, "1")}
	}
	return setup, nil
}

// localSlots is how many ranks the hostfile offers: every worker's slots,
// and the launcher's when it runs as a worker too.
func localSlots(job *v1alpha1.TrainJob) int {
	hosts := framework.Count(job, v1alpha1.ReplicaTypeWorker)
	if runLauncherAsWorker(job) {
		hosts++
	}
	return hosts * slotsPerWorker(job)
}
