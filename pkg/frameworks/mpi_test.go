package frameworks_test

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	"github.com/trainstep/trainstep/pkg/apis/trainstep/v1alpha1"
	"github.com/trainstep/trainstep/pkg/frameworks"
)

// Expected values in this file are transcribed from kubeflow/mpi-operator
// v0.8 (MPI Operator v2) pkg/controller/mpi_job_controller_test.go
// (TestNewConfigMap, TestUpdateDiscoverHostsInConfigMap,
// TestNewLauncherAndWorker) and the constants of mpi_job_controller.go.
// One deliberate difference: trainstep names the launcher pod
// "<job>-launcher-0" like every replica, where MPI Operator's launcher host
// is "<job>-launcher".

func mpiJob(name, namespace string, workers int32, edits ...func(*v1alpha1.TrainJob)) *v1alpha1.TrainJob {
	return newJob(v1alpha1.FrameworkMPI, name, namespace, replicas{launcher: 1, worker: workers}, edits...)
}

func withImplementation(impl v1alpha1.MPIImplementation, slots int32) func(*v1alpha1.TrainJob) {
	return func(j *v1alpha1.TrainJob) {
		j.Spec.MPIImplementation = impl
		j.Spec.SlotsPerWorker = &slots
	}
}

func launcherAsWorker(j *v1alpha1.TrainJob) { j.Spec.RunLauncherAsWorker = ptr(true) }

func TestMPIHostfile(t *testing.T) {
	cases := []struct {
		name string
		job  *v1alpha1.TrainJob
		want string
	}{
		{
			name: "OpenMPI without slots, disable launcher as worker",
			job:  mpiJob("openmpi-without-slots", "tenant-a", 2),
			want: "openmpi-without-slots-worker-0.openmpi-without-slots.tenant-a.svc slots=1\nopenmpi-without-slots-worker-1.openmpi-without-slots.tenant-a.svc slots=1\n",
		},
		{
			// MPI Operator's launcher line reads "openmpi-without-slots-launcher.…".
			name: "OpenMPI without slots, enable launcher as worker",
			job:  mpiJob("openmpi-without-slots", "tenant-a", 2, launcherAsWorker),
			want: "openmpi-without-slots-launcher-0.openmpi-without-slots.tenant-a.svc slots=1\nopenmpi-without-slots-worker-0.openmpi-without-slots.tenant-a.svc slots=1\nopenmpi-without-slots-worker-1.openmpi-without-slots.tenant-a.svc slots=1\n",
		},
		{
			name: "OpenMPI with slots",
			job:  mpiJob("openmpi-with-slots", "tenant-a", 1, withImplementation(v1alpha1.MPIImplementationOpenMPI, 10)),
			want: "openmpi-with-slots-worker-0.openmpi-with-slots.tenant-a.svc slots=10\n",
		},
		{
			name: "IntelMPI with slots",
			job:  mpiJob("intelmpi-with-slots", "project-x", 1, withImplementation(v1alpha1.MPIImplementationIntel, 10)),
			want: "intelmpi-with-slots-worker-0.intelmpi-with-slots.project-x.svc:10\n",
		},
		{
			name: "MPICH with slots",
			job:  mpiJob("mpich-with-slots", "project-x", 1, withImplementation(v1alpha1.MPIImplementationMPICH, 10)),
			want: "mpich-with-slots-worker-0.mpich-with-slots.project-x.svc:10\n",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cms := mpiConfigMaps(t, tc.job)
			if got := cms[0].Name; got != tc.job.Name+"-config" {
				t.Errorf("ConfigMap name = %q, want %q", got, tc.job.Name+"-config")
			}
			if diff := cmp.Diff(tc.want, cms[0].Data["hostfile"]); diff != "" {
				t.Errorf("hostfile (-want +got):\n%s", diff)
			}
		})
	}
}

func TestMPIDiscoverHosts(t *testing.T) {
	cases := []struct {
		name string
		job  *v1alpha1.TrainJob
		want string
	}{
		{
			name: "workers",
			job:  mpiJob("test-job", "default", 2),
			want: "#!/bin/sh\necho test-job-worker-0.test-job.default.svc\necho test-job-worker-1.test-job.default.svc\n",
		},
		{
			// MPI Operator's launcher line reads "echo test-job-launcher.…".
			name: "launcher as worker",
			job:  mpiJob("test-job", "default", 2, launcherAsWorker),
			want: "#!/bin/sh\necho test-job-launcher-0.test-job.default.svc\necho test-job-worker-0.test-job.default.svc\necho test-job-worker-1.test-job.default.svc\n",
		},
		{
			// updateDiscoverHostsInConfigMap sorts pods by name, as strings.
			name: "sorted by pod name",
			job:  mpiJob("j", "ns", 11),
			want: "#!/bin/sh\n" + strings.Join([]string{
				"echo j-worker-0.j.ns.svc", "echo j-worker-1.j.ns.svc", "echo j-worker-10.j.ns.svc",
				"echo j-worker-2.j.ns.svc", "echo j-worker-3.j.ns.svc", "echo j-worker-4.j.ns.svc",
				"echo j-worker-5.j.ns.svc", "echo j-worker-6.j.ns.svc", "echo j-worker-7.j.ns.svc",
				"echo j-worker-8.j.ns.svc", "echo j-worker-9.j.ns.svc",
			}, "\n") + "\n",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cms := mpiConfigMaps(t, tc.job)
			if diff := cmp.Diff(tc.want, cms[0].Data["discover_hosts.sh"]); diff != "" {
				t.Errorf("discover_hosts.sh (-want +got):\n%s", diff)
			}
		})
	}
}

func mpiConfigMaps(t *testing.T, job *v1alpha1.TrainJob) []*corev1.ConfigMap {
	t.Helper()
	cms, err := frameworks.ConfigMaps(job, frameworks.Placement{JobName: job.Name, Namespace: job.Namespace})
	if err != nil {
		t.Fatal(err)
	}
	if len(cms) != 1 {
		t.Fatalf("got %d ConfigMaps, want 1", len(cms))
	}
	return cms
}

// sshAuthVolume and configVolume are MPI Operator's sshVolumeItems and
// configVolumeItems with the job "foo".
var (
	sshAuthVolume = corev1.Volume{Name: "ssh-auth", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
		DefaultMode: ptr[int32](0o600),
		SecretName:  "foo-ssh",
		Items: []corev1.KeyToPath{
			{Key: "ssh-privatekey", Path: "id_rsa"},
			{Key: "ssh-publickey", Path: "id_rsa.pub"},
			{Key: "ssh-publickey", Path: "authorized_keys"},
		},
	}}}
	configVolume = corev1.Volume{Name: "mpi-job-config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
		LocalObjectReference: corev1.LocalObjectReference{Name: "foo-config"},
		Items: []corev1.KeyToPath{
			{Key: "hostfile", Path: "hostfile", Mode: ptr[int32](0o444)},
			{Key: "discover_hosts.sh", Path: "discover_hosts.sh", Mode: ptr[int32](0o555)},
		},
	}}}
	// ompiLauncherEnv is launcherEnvVars, ompiEnvVars and the slots variable.
	ompiLauncherEnv = env(
		"K_MPI_JOB_ROLE", "launcher",
		"OMPI_MCA_orte_keep_fqdn_hostnames", "true",
		"OMPI_MCA_orte_default_hostfile", "/etc/mpi/hostfile",
		"OMPI_MCA_plm_rsh_args", "-o ConnectionAttempts=10",
		"OMPI_MCA_orte_set_default_slots", "1",
	)
	nvidiaDisabled = []corev1.EnvVar{{Name: "NVIDIA_VISIBLE_DEVICES"}, {Name: "NVIDIA_DRIVER_CAPABILITIES"}}
)

func TestMPIPods(t *testing.T) {
	cases := []struct {
		name  string
		job   *v1alpha1.TrainJob
		rt    v1alpha1.ReplicaType
		index int
		want  corev1.PodSpec
	}{
		{
			name: "defaults: launcher",
			job:  mpiJob("foo", "bar", 1),
			rt:   launcher,
			want: corev1.PodSpec{
				Containers: []corev1.Container{{
					Name: "main", Image: "example.com/train:1",
					Env: append(append([]corev1.EnvVar{}, ompiLauncherEnv...), nvidiaDisabled...),
					VolumeMounts: []corev1.VolumeMount{
						{Name: "ssh-auth", MountPath: "/root/.ssh"},
						{Name: "mpi-job-config", MountPath: "/etc/mpi"},
					},
				}},
				Volumes: []corev1.Volume{sshAuthVolume, configVolume},
			},
		},
		{
			name: "defaults: worker",
			job:  mpiJob("foo", "bar", 1),
			rt:   worker,
			want: corev1.PodSpec{
				DNSConfig: &corev1.PodDNSConfig{Searches: []string{"foo.bar.svc.cluster.local"}},
				Containers: []corev1.Container{{
					Name: "main", Image: "example.com/train:1",
					Command:      []string{"/usr/sbin/sshd", "-De"},
					Env:          env("K_MPI_JOB_ROLE", "worker"),
					VolumeMounts: []corev1.VolumeMount{{Name: "ssh-auth", MountPath: "/root/.ssh"}},
				}},
				Volumes: []corev1.Volume{sshAuthVolume},
			},
		},
		{
			name: "launcher-as-worker keeps the GPUs visible",
			job:  mpiJob("foo", "bar", 1, launcherAsWorker),
			rt:   launcher,
			want: corev1.PodSpec{
				Containers: []corev1.Container{{
					Name: "main", Image: "example.com/train:1",
					Env: ompiLauncherEnv,
					VolumeMounts: []corev1.VolumeMount{
						{Name: "ssh-auth", MountPath: "/root/.ssh"},
						{Name: "mpi-job-config", MountPath: "/etc/mpi"},
					},
				}},
				Volumes: []corev1.Volume{sshAuthVolume, configVolume},
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := configured(t, tc.job, tc.rt, tc.index)
			if diff := cmp.Diff(tc.want, *got); diff != "" {
				t.Errorf("pod spec (-want +got):\n%s", diff)
			}
		})
	}
}

func TestMPILauncherEnvPerImplementation(t *testing.T) {
	cases := []struct {
		impl v1alpha1.MPIImplementation
		want []corev1.EnvVar
	}{
		{v1alpha1.MPIImplementationOpenMPI, env(
			"K_MPI_JOB_ROLE", "launcher",
			"OMPI_MCA_orte_keep_fqdn_hostnames", "true",
			"OMPI_MCA_orte_default_hostfile", "/etc/mpi/hostfile",
			"OMPI_MCA_plm_rsh_args", "-o ConnectionAttempts=10",
			"OMPI_MCA_orte_set_default_slots", "4",
		)},
		{v1alpha1.MPIImplementationIntel, env(
			"K_MPI_JOB_ROLE", "launcher",
			"I_MPI_HYDRA_HOST_FILE", "/etc/mpi/hostfile",
			"I_MPI_HYDRA_BOOTSTRAP_EXEC_EXTRA_ARGS", "-o ConnectionAttempts=10",
			"I_MPI_PERHOST", "4",
		)},
		{v1alpha1.MPIImplementationMPICH, env(
			"K_MPI_JOB_ROLE", "launcher",
			"HYDRA_HOST_FILE", "/etc/mpi/hostfile",
			"HYDRA_LAUNCH_EXTRA_ARGS", "-o ConnectionAttempts=10",
		)},
	}
	for _, tc := range cases {
		t.Run(string(tc.impl), func(t *testing.T) {
			job := mpiJob("foo", "bar", 2, withImplementation(tc.impl, 4))
			got := configured(t, job, launcher, 0).Containers[0].Env
			want := append(append([]corev1.EnvVar{}, tc.want...), nvidiaDisabled...)
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("launcher env (-want +got):\n%s", diff)
			}
		})
	}
}

// A non-root sshAuthMountPath gets the key 0600 too, readable through the
// pod's fsGroup (the main container's group or user when the pod sets
// none); without any known user it stays 0644. A worker's own command
// replaces sshd.
func TestMPICustomMountPathAndCommand(t *testing.T) {
	user := int64(1000)
	cases := []struct {
		name      string
		container *corev1.SecurityContext
		pod       *corev1.PodSecurityContext
		wantMode  *int32
		wantGroup *int64
	}{
		{"runAsUser of the container", &corev1.SecurityContext{RunAsUser: &user}, nil, ptr[int32](0o600), ptr[int64](1000)},
		{"runAsGroup wins", &corev1.SecurityContext{RunAsUser: &user, RunAsGroup: ptr[int64](2000)}, nil, ptr[int32](0o600), ptr[int64](2000)},
		{"the pod's runAsUser", nil, &corev1.PodSecurityContext{RunAsUser: &user}, ptr[int32](0o600), ptr[int64](1000)},
		{"the pod's own fsGroup is kept", &corev1.SecurityContext{RunAsUser: &user}, &corev1.PodSecurityContext{FSGroup: ptr[int64](3000)}, ptr[int32](0o600), ptr[int64](3000)},
		{"no user known", nil, nil, nil, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			job := mpiJob("foo", "bar", 1, func(j *v1alpha1.TrainJob) {
				j.Spec.SSHAuthMountPath = "/home/mpiuser/.ssh"
				tmpl := &j.Spec.ReplicaSpecs[worker].Template.Spec
				tmpl.Containers[0].Args = []string{"/start-sshd.sh"}
				tmpl.Containers[0].SecurityContext = tc.container
				tmpl.SecurityContext = tc.pod
			})
			spec := configured(t, job, worker, 0)
			if diff := cmp.Diff(tc.wantMode, spec.Volumes[0].Secret.DefaultMode); diff != "" {
				t.Errorf("secret defaultMode (-want +got):\n%s", diff)
			}
			var group *int64
			if spec.SecurityContext != nil {
				group = spec.SecurityContext.FSGroup
			}
			if diff := cmp.Diff(tc.wantGroup, group); diff != "" {
				t.Errorf("fsGroup (-want +got):\n%s", diff)
			}
			if got := spec.Containers[0].VolumeMounts[0].MountPath; got != "/home/mpiuser/.ssh" {
				t.Errorf("mount path = %q, want /home/mpiuser/.ssh", got)
			}
			if got := spec.Containers[0].Command; got != nil {
				t.Errorf("command = %v, want the template's (none) kept", got)
			}
		})
	}
}

func TestMPISecret(t *testing.T) {
	job := mpiJob("foo", "bar", 1)
	at := frameworks.Placement{JobName: "foo", Namespace: "bar"}
	keys := frameworks.SSHKeyPair{Private: []byte("PRIVATE"), Public: []byte("ssh-ed25519 AAAA")}
	secrets, err := frameworks.Secrets(job, at, keys)
	if err != nil {
		t.Fatalf("Secrets: %v", err)
	}
	want := []*corev1.Secret{{
		Type: corev1.SecretTypeSSHAuth,
		Data: map[string][]byte{"ssh-privatekey": []byte("PRIVATE"), "ssh-publickey": []byte("ssh-ed25519 AAAA")},
	}}
	want[0].Name = "foo-ssh"
	if diff := cmp.Diff(want, secrets); diff != "" {
		t.Errorf("secrets (-want +got):\n%s", diff)
	}
	if _, err := frameworks.Secrets(job, at, frameworks.SSHKeyPair{}); err == nil {
		t.Error("Secrets without keys succeeded, want an error")
	}
}

func TestMPISuccessRule(t *testing.T) {
	job := mpiJob("foo", "bar", 3)
	want := frameworks.SuccessRule{Leader: &frameworks.ReplicaRef{Type: launcher}}
	if diff := cmp.Diff(want, frameworks.SuccessRuleFor(job)); diff != "" {
		t.Errorf("SuccessRuleFor (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]frameworks.ReplicaRef{{Type: launcher}}, frameworks.Leaders(job)); diff != "" {
		t.Errorf("Leaders (-want +got):\n%s", diff)
	}
}
