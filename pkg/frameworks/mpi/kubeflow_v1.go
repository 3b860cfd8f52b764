package mpi

import (
	"fmt"
	"sort"

	corev1 "k8s.io/api/core/v1"

	"github.com/trainstep/trainstep/pkg/apis/trainstep/v1alpha1"
	"github.com/trainstep/trainstep/pkg/kubeflow"
)

// MPIJobV1 is the Kubeflow Training Operator's kubeflow.org/v1 MPIJob
// (v1.9, pkg/apis/kubeflow.org/v1/mpi_types.go). Its launcher reached the
// workers with kubectl exec (a kubectl-delivery init container, a
// ServiceAccount and Role per job, OpenMPI's rsh agent kubexec.sh), and its
// workers ran `sleep 365d` when their template named no command. trainstep
// runs MPI as MPI Operator v2 does, over SSH, so a v1 MPIJob does not run
// as it is: `trainstep convert` rewrites it as an MPIJob v2beta1 and says
// what changes.
type MPIJobV1 struct {
	kubeflow.Header `json:",inline"`
	Spec            MPIJobV1Spec `json:"spec"`
}

// MPIJobV1Spec is the v1 MPIJob's spec.
type MPIJobV1Spec struct {
	SlotsPerWorker *int32 `json:"slotsPerWorker,omitempty"`
	// CleanPodPolicy is deprecated in v1 in favour of runPolicy's.
	CleanPodPolicy  *string                          `json:"cleanPodPolicy,omitempty"`
	MPIReplicaSpecs map[string]*kubeflow.ReplicaSpec `json:"mpiReplicaSpecs"`
	// MainContainer names the container kubectl exec ran the ranks in.
	MainContainer string             `json:"mainContainer,omitempty"`
	RunPolicy     kubeflow.RunPolicy `json:"runPolicy,omitempty"`
}

// v1's names: its default restart policy, and Intel MPI's bootstrap
// variable, which its launcher's template set to use Intel MPI.
const (
	v1DefaultRestartPolicy = "Never"
	envIntelHydraBootstrap = "I_MPI_HYDRA_BOOTSTRAP"
)

// ToTrainJob refuses to run a v1 MPIJob, saying how to convert it.
func (j *MPIJobV1) ToTrainJob() (*v1alpha1.TrainJob, []string, error) {
	return nil, nil, fmt.Errorf("%s MPIJob is the Training Operator's MPIJob, whose launcher reaches the workers with kubectl exec; "+
		"trainstep runs MPI as MPI Operator v2 does, over SSH: `trainstep convert -f FILE` writes this job as an MPIJob %s "+
		"and lists what changes (the workers run sshd)", kubeflow.APIVersionV1, kubeflow.APIVersionV2beta1)
}

// Upgrade implements kubeflow.Upgrader: the MPIJob v2beta1 that runs the
// same job, and what changes with it.
func (j *MPIJobV1) Upgrade() (any, []string, error) {
	out := &MPIJob{Header: kubeflow.Header{TypeMeta: j.TypeMeta, ObjectMeta: *j.ObjectMeta.DeepCopy()}}
	out.APIVersion = kubeflow.APIVersionV2beta1
	out.Spec.SlotsPerWorker = kubeflow.Copy(j.Spec.SlotsPerWorker)
	out.Spec.RunPolicy = j.Spec.RunPolicy
	var changes []string
	if j.Spec.CleanPodPolicy != nil && out.Spec.RunPolicy.CleanPodPolicy == nil {
		out.Spec.RunPolicy.CleanPodPolicy = kubeflow.Copy(j.Spec.CleanPodPolicy)
		changes = append(changes, "spec.cleanPodPolicy is spec.runPolicy.cleanPodPolicy")
	}
	out.Spec.MPIReplicaSpecs = map[string]*kubeflow.ReplicaSpec{}
	for _, rt := range sortedTypes(j.Spec.MPIReplicaSpecs) {
		in := j.Spec.MPIReplicaSpecs[rt]
		if in == nil {
			out.Spec.MPIReplicaSpecs[rt] = nil
			continue
		}
		spec := &kubeflow.ReplicaSpec{Replicas: kubeflow.Copy(in.Replicas), RestartPolicy: in.RestartPolicy, Template: *in.Template.DeepCopy()}
		if spec.RestartPolicy == "" {
			// v1's default for both types; v2beta1's launcher's is OnFailure.
			spec.RestartPolicy = v1DefaultRestartPolicy
			if rt == string(v1alpha1.ReplicaTypeLauncher) {
				changes = append(changes, "spec.mpiReplicaSpecs.Launcher.restartPolicy is Never, v1's default, written out: v2beta1's is OnFailure")
			}
		}
		path := "spec.mpiReplicaSpecs." + rt + ".template.spec.containers"
		moved, err := mainContainerFirst(&spec.Template.Spec, j.Spec.MainContainer, path)
		if err != nil {
			return nil, nil, err
		}
		changes = append(changes, moved...)
		out.Spec.MPIReplicaSpecs[rt] = spec
	}
	changes = append(changes, j.upgradeLauncher(out)...)
	changes = append(changes, j.upgradeWorkers(out)...)
	changes = append(changes, "the launcher logs in to the workers over SSH with a key pair made for the job (Secret <job>-ssh, mounted at "+
		"spec.sshAuthMountPath, default /root/.ssh): no kubectl-delivery init container, ServiceAccount, Role or kubectl exec; "+
		"the launcher's image needs an ssh client and the workers' openssh-server")
	return out, changes, nil
}

// upgradeLauncher carries Intel MPI over: v1 told it by the launcher's
// I_MPI_HYDRA_BOOTSTRAP, v2beta1 by spec.mpiImplementation.
func (j *MPIJobV1) upgradeLauncher(out *MPIJob) []string {
	launcher := out.Spec.MPIReplicaSpecs[string(v1alpha1.ReplicaTypeLauncher)]
	if launcher == nil || len(launcher.Template.Spec.Containers) == 0 {
		return nil
	}
	for _, e := range launcher.Template.Spec.Containers[0].Env {
		if e.Name == envIntelHydraBootstrap {
			out.Spec.MPIImplementation = string(v1alpha1.MPIImplementationIntel)
			return []string{"spec.mpiImplementation is Intel: the launcher sets " + envIntelHydraBootstrap +
				"; under v2beta1 Intel MPI bootstraps over SSH, so remove that variable from the launcher's template"}
		}
	}
	return nil
}

// upgradeWorkers says what the workers now run.
func (j *MPIJobV1) upgradeWorkers(out *MPIJob) []string {
	worker := out.Spec.MPIReplicaSpecs[string(v1alpha1.ReplicaTypeWorker)]
	if worker == nil || len(worker.Template.Spec.Containers) == 0 {
		return nil
	}
	main := worker.Template.Spec.Containers[0]
	var changes []string
	if len(main.Command) == 0 && len(main.Args) == 0 {
		changes = append(changes, "the workers run sshd (/usr/sbin/sshd -De, MPI Operator v2's default) where v1 ran sleep 365d: their image needs openssh-server")
	} else {
		changes = append(changes, fmt.Sprintf("the workers keep their command %q, which must run sshd: the launcher reaches them over SSH", append(main.Command, main.Args...)))
	}
	if user := runAsUser(&worker.Template.Spec, &main); user != nil && *user != 0 {
		changes = append(changes, fmt.Sprintf("the workers run as user %d: set spec.sshAuthMountPath to that user's ~/.ssh (the default, /root/.ssh, is root's)", *user))
	}
	return changes
}

// mainContainerFirst moves the container v1's mainContainer names to the
// front: MPI Operator v2 runs the ranks in the first container.
func mainContainerFirst(spec *corev1.PodSpec, name, path string) ([]string, error) {
	if name == "" {
		return nil, nil
	}
	for i, c := range spec.Containers {
		if c.Name != name {
			continue
		}
		if i == 0 {
			return nil, nil
		}
		spec.Containers = append([]corev1.Container{c}, append(spec.Containers[:i:i], spec.Containers[i+1:]...)...)
		return []string{fmt.Sprintf("%s: %q, spec.mainContainer, comes first: v2beta1 runs the ranks in the first container", path, name)}, nil
	}
	return nil, fmt.Errorf("spec.mainContainer: %q names no container of %s", name, path)
}

func runAsUser(spec *corev1.PodSpec, c *corev1.Container) *int64 {
	if c.SecurityContext != nil && c.SecurityContext.RunAsUser != nil {
		return c.SecurityContext.RunAsUser
	}
	if spec.SecurityContext != nil {
		return spec.SecurityContext.RunAsUser
	}
	return nil
}

func sortedTypes(m map[string]*kubeflow.ReplicaSpec) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
