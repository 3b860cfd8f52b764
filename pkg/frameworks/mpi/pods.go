package mpi

import (
	"errors"
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/trainstep/trainstep/pkg/apis/trainstep/v1alpha1"
	"github.com/trainstep/trainstep/pkg/frameworks/framework"
)

// Names and paths of MPI Operator v2 (pkg/controller/mpi_job_controller.go),
// kept so that MPIJob images built for it find what they expect.
const (
	// MPIHostfileKey and MPIDiscoverHostsKey are the ConfigMap's keys.
	MPIHostfileKey      = "hostfile"
	MPIDiscoverHostsKey = "discover_hosts.sh"
	// MPIConfigMountPath is where the launcher mounts the ConfigMap.
	MPIConfigMountPath = "/etc/mpi"
	// MPISSHPublicKeyKey is the Secret key of the public key; the private
	// key is corev1.SSHAuthPrivateKey ("ssh-privatekey").
	MPISSHPublicKeyKey = "ssh-publickey"

	mpiConfigVolume     = "mpi-job-config"
	mpiSSHAuthVolume    = "ssh-auth"
	mpiClusterDNSSuffix = "svc.cluster.local"
)

// MPI environment (MPI Operator v2).
const (
	EnvMPIJobRole                = "K_MPI_JOB_ROLE"
	EnvOMPIKeepFQDNHostnames     = "OMPI_MCA_orte_keep_fqdn_hostnames"
	EnvOMPIDefaultHostfile       = "OMPI_MCA_orte_default_hostfile"
	EnvOMPIRSHArgs               = "OMPI_MCA_plm_rsh_args"
	EnvOMPIDefaultSlots          = "OMPI_MCA_orte_set_default_slots"
	EnvIntelHydraHostFile        = "I_MPI_HYDRA_HOST_FILE"
	EnvIntelHydraBootstrapArgs   = "I_MPI_HYDRA_BOOTSTRAP_EXEC_EXTRA_ARGS"
	EnvIntelPerHost              = "I_MPI_PERHOST"
	EnvHydraHostFile             = "HYDRA_HOST_FILE"
	EnvHydraLaunchExtraArgs      = "HYDRA_LAUNCH_EXTRA_ARGS"
	EnvNvidiaVisibleDevices      = "NVIDIA_VISIBLE_DEVICES"
	EnvNvidiaDriverCapabilities  = "NVIDIA_DRIVER_CAPABILITIES"
	mpiSSHConnectionAttemptsArgs = "-o ConnectionAttempts=10"
)

// ConfigMapSuffix and SSHSecretSuffix name an MPI job's hostfile
// ConfigMap and SSH auth Secret (MPI Operator v2's names).
const (
	ConfigMapSuffix = "-config"
	SSHSecretSuffix = "-ssh"
)

// ConfigMapName is the name of an MPI job's hostfile ConfigMap.
func ConfigMapName(jobName string) string { return jobName + ConfigMapSuffix }

// SSHSecretName is the name of an MPI job's SSH auth Secret.
func SSHSecretName(jobName string) string { return jobName + SSHSecretSuffix }

// Prepare implements framework.Framework. It computes nothing ahead: an
// MPI pod names only itself and the job; the peer list is the hostfile
// ConfigMap, built once by ConfigMaps.
func (Framework) Prepare(job *v1alpha1.TrainJob, at framework.Placement) (framework.PodConfigurer, error) {
	return mpiPods{job: job, at: at}, nil
}

// mpiPods configures the launcher and worker pods of one job.
type mpiPods struct {
	job *v1alpha1.TrainJob
	at  framework.Placement
}

func (p mpiPods) ConfigurePod(replica framework.ReplicaRef, spec *corev1.PodSpec) error {
	job, at := p.job, p.at
	main := conventions.MainContainer(spec)
	if main == nil {
		return fmt.Errorf("configuring MPI %s: the pod template has no main container", replica)
	}
	// The pod's hostname and subdomain, which pkg/render sets under the
	// per-job layout, make "<pod>.<job>.<ns>.svc" resolve: the hostfile's names.
	if spec.HostNetwork {
		spec.DNSPolicy = corev1.DNSClusterFirstWithHostNet
	}
	switch replica.Type {
	case v1alpha1.ReplicaTypeLauncher:
		configureLauncher(job, at, spec, main)
	case v1alpha1.ReplicaTypeWorker:
		configureWorker(job, at, spec, main)
	default:
		return fmt.Errorf("configuring MPI %s: MPI replicas are Launcher and Worker", replica)
	}
	return nil
}

func configureLauncher(job *v1alpha1.TrainJob, at framework.Placement, spec *corev1.PodSpec, main *corev1.Container) {
	main.Env = append(main.Env, framework.EnvVar(EnvMPIJobRole, "launcher"))
	main.Env = append(main.Env, mpiImplementationEnv(job)...)
	if !runLauncherAsWorker(job) {
		// Keep a launcher that runs no ranks off the GPUs.
		main.Env = append(main.Env, corev1.EnvVar{Name: EnvNvidiaVisibleDevices}, corev1.EnvVar{Name: EnvNvidiaDriverCapabilities})
	}
	mountSSHAuth(job, at, spec, main)
	spec.Volumes = append(spec.Volumes, corev1.Volume{
		Name: mpiConfigVolume,
		VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
			LocalObjectReference: corev1.LocalObjectReference{Name: ConfigMapName(at.JobName)},
			Items: []corev1.KeyToPath{
				{Key: MPIHostfileKey, Path: MPIHostfileKey, Mode: int32Ptr(0o444)},
				{Key: MPIDiscoverHostsKey, Path: MPIDiscoverHostsKey, Mode: int32Ptr(0o555)},
			},
		}},
	})
	main.VolumeMounts = append(main.VolumeMounts, corev1.VolumeMount{Name: mpiConfigVolume, MountPath: MPIConfigMountPath})
}

// mpiImplementationEnv points the MPI flavour at the hostfile and makes its
// SSH retry while workers start.
func mpiImplementationEnv(job *v1alpha1.TrainJob) []corev1.EnvVar {
	hostfile := MPIConfigMountPath + "/" + MPIHostfileKey
	slots := framework.Itoa(slotsPerWorker(job))
	switch mpiImplementation(job) {
	case v1alpha1.MPIImplementationIntel:
		return []corev1.EnvVar{
			framework.EnvVar(EnvIntelHydraHostFile, hostfile),
			framework.EnvVar(EnvIntelHydraBootstrapArgs, mpiSSHConnectionAttemptsArgs),
			framework.EnvVar(EnvIntelPerHost, slots),
		}
	case v1alpha1.MPIImplementationMPICH:
		return []corev1.EnvVar{
			framework.EnvVar(EnvHydraHostFile, hostfile),
			framework.EnvVar(EnvHydraLaunchExtraArgs, mpiSSHConnectionAttemptsArgs),
		}
	}
	return []corev1.EnvVar{
		framework.EnvVar(EnvOMPIKeepFQDNHostnames, "true"),
		framework.EnvVar(EnvOMPIDefaultHostfile, hostfile),
		framework.EnvVar(EnvOMPIRSHArgs, mpiSSHConnectionAttemptsArgs),
		framework.EnvVar(EnvOMPIDefaultSlots, slots),
	}
}

func configureWorker(job *v1alpha1.TrainJob, at framework.Placement, spec *corev1.PodSpec, main *corev1.Container) {
	// Intel MPI and MPICH reach the launcher by its bare hostname. MPI
	// Operator v2 writes this search domain with the default cluster domain.
	search := fmt.Sprintf("%s.%s.%s", at.JobName, at.Namespace, mpiClusterDNSSuffix)
	if spec.DNSConfig == nil {
		spec.DNSConfig = &corev1.PodDNSConfig{}
	}
	spec.DNSConfig.Searches = append(spec.DNSConfig.Searches, search)
	if len(main.Command) == 0 && len(main.Args) == 0 {
		main.Command = []string{"/usr/sbin/sshd", "-De"}
	}
	main.Env = append(main.Env, framework.EnvVar(EnvMPIJobRole, "worker"))
	mountSSHAuth(job, at, spec, main)
}

// mountSSHAuth mounts the key pair as id_rsa, id_rsa.pub and
// authorized_keys, 0600: sshd refuses keys others can read, and no other
// user of the pod has business with the private key.
//
// The files belong to root. Under /root/.ssh that is their user; elsewhere
// (a non-root user's sshAuthMountPath) the pod's fsGroup becomes their
// group, readable by it (the kubelet makes them 0640 root:fsGroup), and
// every container of the pod runs with that group. A pod that sets no
// fsGroup gets the main container's group, else its user, as fsGroup; when
// neither is known the files stay 0644, readable by whichever user the image
// runs as, as MPI Operator mounts them.
func mountSSHAuth(job *v1alpha1.TrainJob, at framework.Placement, spec *corev1.PodSpec, main *corev1.Container) {
	mountPath := sshAuthMountPath(job)
	mode := int32Ptr(0o600)
	if mountPath != DefaultSSHAuthMountPath && !ensureFSGroup(spec, main) {
		mode = nil
	}
	spec.Volumes = append(spec.Volumes, corev1.Volume{
		Name: mpiSSHAuthVolume,
		VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
			SecretName:  SSHSecretName(at.JobName),
			DefaultMode: mode,
			Items: []corev1.KeyToPath{
				{Key: corev1.SSHAuthPrivateKey, Path: "id_rsa"},
				{Key: MPISSHPublicKeyKey, Path: "id_rsa.pub"},
				{Key: MPISSHPublicKeyKey, Path: "authorized_keys"},
			},
		}},
	})
	main.VolumeMounts = append(main.VolumeMounts, corev1.VolumeMount{Name: mpiSSHAuthVolume, MountPath: mountPath})
}

// ConfigMapNames implements framework.SharedObjects.
func (Framework) ConfigMapNames(_ *v1alpha1.TrainJob, jobName string) []string {
	return []string{ConfigMapName(jobName)}
}

// ConfigMaps implements framework.SharedObjects: the hostfile ConfigMap
// "<job>-config".
func (Framework) ConfigMaps(job *v1alpha1.TrainJob, at framework.Placement) ([]*corev1.ConfigMap, error) {
	hosts := mpiHosts(job, at)
	slots := slotsPerWorker(job)
	var hostfile strings.Builder
	for _, host := range hosts {
		if mpiImplementation(job) == v1alpha1.MPIImplementationOpenMPI {
			fmt.Fprintf(&hostfile, "%s slots=%d\n", host, slots)
		} else {
			fmt.Fprintf(&hostfile, "%s:%d\n", host, slots)
		}
	}
	return []*corev1.ConfigMap{{
		ObjectMeta: metav1.ObjectMeta{Name: ConfigMapName(at.JobName)},
		Data: map[string]string{
			MPIHostfileKey:      hostfile.String(),
			MPIDiscoverHostsKey: discoverHostsScript(job, at),
		},
	}}, nil
}

// mpiHosts lists the hosts that run ranks: the launcher when it runs as a
// worker, then every worker, as "<pod>.<job>.<ns>.svc".
func mpiHosts(job *v1alpha1.TrainJob, at framework.Placement) []string {
	var hosts []string
	if runLauncherAsWorker(job) {
		hosts = append(hosts, mpiHost(at, v1alpha1.ReplicaTypeLauncher, 0))
	}
	for i := 0; i < framework.Count(job, v1alpha1.ReplicaTypeWorker); i++ {
		hosts = append(hosts, mpiHost(at, v1alpha1.ReplicaTypeWorker, i))
	}
	return hosts
}

func mpiHost(at framework.Placement, rt v1alpha1.ReplicaType, index int) string {
	return fmt.Sprintf("%s.%s.%s.svc", framework.ReplicaName(at.JobName, rt, index), at.JobName, at.Namespace)
}

// discoverHostsScript is Horovod's host discovery script. MPI Operator v2
// lists the running workers sorted by pod name; trainstep starts every
// worker at once, so it lists them all, sorted the same way.
func discoverHostsScript(job *v1alpha1.TrainJob, at framework.Placement) string {
	var script strings.Builder
	script.WriteString("#!/bin/sh\n")
	if runLauncherAsWorker(job) {
		fmt.Fprintf(&script, "echo %s\n", mpiHost(at, v1alpha1.ReplicaTypeLauncher, 0))
	}
	workers := make([]string, framework.Count(job, v1alpha1.ReplicaTypeWorker))
	for i := range workers {
		workers[i] = framework.ReplicaName(at.JobName, v1alpha1.ReplicaTypeWorker, i)
	}
	sort.Strings(workers)
	for _, pod := range workers {
		fmt.Fprintf(&script, "echo %s.%s.%s.svc\n", pod, at.JobName, at.Namespace)
	}
	return script.String()
}

// errMissingSSHKeys is returned when an MPI job is rendered without keys.
var errMissingSSHKeys = errors.New("an MPI job needs an SSH key pair (private and public key)")

// Secrets implements framework.SharedObjects: the SSH auth Secret
// "<job>-ssh" holding keys.
func (Framework) Secrets(_ *v1alpha1.TrainJob, at framework.Placement, keys framework.SSHKeyPair) ([]*corev1.Secret, error) {
	if len(keys.Private) == 0 || len(keys.Public) == 0 {
		return nil, errMissingSSHKeys
	}
	return []*corev1.Secret{{
		ObjectMeta: metav1.ObjectMeta{Name: SSHSecretName(at.JobName)},
		Type:       corev1.SecretTypeSSHAuth,
		Data: map[string][]byte{
			corev1.SSHAuthPrivateKey: append([]byte(nil), keys.Private...),
			MPISSHPublicKeyKey:       append([]byte(nil), keys.Public...),
		},
	}}, nil
}

// LabelApp holds the job name on an MPI job's Service, hostfile ConfigMap
// and SSH Secret, as MPI Operator v2 labels them (and no pod or PodGroup);
// users select them with `kubectl get -l app=<job>`.
const LabelApp = "app"

// Labels implements framework.SharedObjects.
func (Framework) Labels(jobName string) map[string]string {
	return map[string]string{LabelApp: jobName}
}

// SSHSecret implements framework.SSHKeys.
func (Framework) SSHSecret(jobName string) (name, publicKeyKey string) {
	return SSHSecretName(jobName), MPISSHPublicKeyKey
}

func mpiImplementation(job *v1alpha1.TrainJob) v1alpha1.MPIImplementation {
	if job.Spec.MPIImplementation == "" {
		return v1alpha1.MPIImplementationOpenMPI
	}
	return job.Spec.MPIImplementation
}

func slotsPerWorker(job *v1alpha1.TrainJob) int {
	if job.Spec.SlotsPerWorker == nil {
		return 1
	}
	return int(*job.Spec.SlotsPerWorker)
}

func sshAuthMountPath(job *v1alpha1.TrainJob) string {
	if job.Spec.SSHAuthMountPath == "" {
		return DefaultSSHAuthMountPath
	}
	return job.Spec.SSHAuthMountPath
}

func runLauncherAsWorker(job *v1alpha1.TrainJob) bool {
	return job.Spec.RunLauncherAsWorker != nil && *job.Spec.RunLauncherAsWorker
}

func int32Ptr(v int32) *int32 { return &v }

// ensureFSGroup gives the pod an fsGroup, when it has none, from the main
// container's or the pod's runAsGroup, else runAsUser; it reports whether the
// pod has one. Only volumes whose owner differs are changed
// (OnRootMismatch), so a large volume is not walked on every start.
func ensureFSGroup(spec *corev1.PodSpec, main *corev1.Container) bool {
	if spec.SecurityContext != nil && spec.SecurityContext.FSGroup != nil {
		return true
	}
	var candidates []*int64
	if sc := main.SecurityContext; sc != nil {
		candidates = append(candidates, sc.RunAsGroup)
	}
	if sc := spec.SecurityContext; sc != nil {
		candidates = append(candidates, sc.RunAsGroup)
	}
	if sc := main.SecurityContext; sc != nil {
		candidates = append(candidates, sc.RunAsUser)
	}
	if sc := spec.SecurityContext; sc != nil {
		candidates = append(candidates, sc.RunAsUser)
	}
	for _, id := range candidates {
		if id == nil || *id == 0 {
			continue
		}
		if spec.SecurityContext == nil {
			spec.SecurityContext = &corev1.PodSecurityContext{}
		}
		group, policy := *id, corev1.FSGroupChangeOnRootMismatch
		spec.SecurityContext.FSGroup, spec.SecurityContext.FSGroupChangePolicy = &group, &policy
		return true
	}
	return false
}
