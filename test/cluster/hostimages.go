package cluster

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// SharedLibraries lists the shared libraries a program of this machine loads (ldd), the
// dynamic loader included: what an image of that program (ImportHostFilesImage) needs
// beside it.
func SharedLibraries(program string) ([]string, error) {
	out, err := exec.Command("ldd", program).Output()
	if err != nil {
		return nil, fmt.Errorf("listing the libraries of %s: %w", program, err)
	}
	var libs []string
	for _, line := range strings.Split(string(out), "\n") {
		fields := strings.Fields(line)
		switch {
		case len(fields) >= 3 && fields[1] == "=>" && strings.HasPrefix(fields[2], "/"):
			libs = append(libs, fields[2])
		case len(fields) >= 1 && strings.HasPrefix(fields[0], "/"):
			libs = append(libs, fields[0]) // the loader: /lib64/ld-linux-x86-64.so.2 (0x…)
		}
	}
	return libs, nil
}

// TorchImageFiles lists, for ImportHostFilesImage, the files of an image that runs this
// machine's python3 with Debian's python3-torch: the interpreter (as python3 and python), its
// standard library, torch and the packages it imports, and the libraries they load. extra
// adds files: a path in the image to a path here (a training script, say).
func TorchImageFiles(extra map[string]string) (map[string]string, error) {
	python, err := filepath.EvalSymlinks("/usr/bin/python3")
	if err != nil {
		return nil, fmt.Errorf("the torch image needs this machine's python3: %w", err)
	}
	stdlib := "/usr/lib/" + filepath.Base(python)
	const dist = "/usr/lib/python3/dist-packages"
	files := map[string]string{"/usr/bin/python3": python, "/usr/bin/python": python, stdlib: stdlib}
	for image, host := range extra {
		files[image] = host
	}
	programs := []string{python}
	for _, pkg := range []string{"torch", "numpy", "astunparse", "certifi", "six.py", "typing_extensions.py", "_distutils_hack"} {
		p := filepath.Join(dist, pkg)
		if _, err := os.Stat(p); err != nil {
			return nil, fmt.Errorf("the torch image needs %s (apt-get install python3-torch): %w", p, err)
		}
		files[p] = p
		_ = filepath.WalkDir(p, func(f string, d os.DirEntry, err error) error {
			if err == nil && !d.IsDir() && strings.HasSuffix(f, ".so") {
				programs = append(programs, f)
			}
			return nil
		})
	}
	for i, p := range programs {
		libs, err := SharedLibraries(p)
		if err != nil && i == 0 {
			return nil, err
		}
		if err != nil {
			continue // a plugin library torch does not load here (ldd cannot resolve it)
		}
		for _, lib := range libs {
			files[lib] = lib
		}
	}
	return files, nil
}

// MPIAllReduceProgramPath is where the images of OpenMPIImageFiles have the all-reduce program.
const MPIAllReduceProgramPath = "/usr/local/bin/allreduce"

// The non-root user of the images of OpenMPIImageFiles, as Kubeflow's MPI Operator examples
// have it: a job runs its pods as MPIUserID with sshAuthMountPath MPIUserSSHDir, and its
// workers' sshd with MPIUserSSHDConfig, on port 2222, which the user's ssh connects to.
const (
	MPIUserID         = 1000
	MPIUserSSHDir     = "/home/mpiuser/.ssh"
	MPIUserSSHDConfig = "/home/mpiuser/.sshd_config"
)

// mpiAllReduceProgram sums every rank's number with an MPI_Allreduce and prints what it got:
// "rank <r> of <n> on <host>: sum of ranks <sum>".
const mpiAllReduceProgram = `#include <mpi.h>
#include <stdio.h>

int main(int argc, char **argv) {
	int rank, size, sum = 0;
	char host[MPI_MAX_PROCESSOR_NAME];
	int hostLen;
	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	MPI_Get_processor_name(host, &hostLen);
	MPI_Allreduce(&rank, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
	printf("rank %d of %d on %s: sum of ranks %d\n", rank, size, host, sum);
	MPI_Finalize();
	return 0;
}
`

// OpenMPIImageFiles lists, for ImportHostFilesImage, the files of an image built from this
// machine's OpenMPI (mpirun, orted, their plugins and help files), ssh and sshd, the
// libraries all of them load, /bin/sh (sshd runs orted through the user's shell) and
// /bin/sleep (for ranks that must still run when a test breaks them), the
// all-reduce program compiled with mpicc (at MPIAllReduceProgramPath), and the few files ssh
// and sshd need: root, the non-root user MPIUserID and sshd's privilege-separation user, host
// keys generated now, and configurations for pods whose names and keys change with every
// job, for root's sshd on port 22 and the non-root user's on 2222. dir receives what is built
// for the image.
func OpenMPIImageFiles(ctx context.Context, dir string) (map[string]string, error) {
	for _, tool := range []string{"mpicc", "/usr/bin/orterun", "/usr/bin/ssh", "ssh-keygen", "/usr/sbin/sshd"} {
		if _, err := exec.LookPath(tool); err != nil {
			return nil, fmt.Errorf("the MPI image needs this machine's %s: apt-get install openmpi-bin libopenmpi-dev openssh-server (make test-deps does): %w", tool, err)
		}
	}
	source, program := filepath.Join(dir, "allreduce.c"), filepath.Join(dir, "allreduce")
	if err := os.WriteFile(source, []byte(mpiAllReduceProgram), 0o644); err != nil {
		return nil, err
	}
	if out, err := exec.CommandContext(ctx, "mpicc", "-o", program, source).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("mpicc: %v\n%s", err, out)
	}
	hostKey := filepath.Join(dir, "ssh_host_ed25519_key")
	if out, err := exec.CommandContext(ctx, "ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "", "-f", hostKey).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("generating the sshd host key: %v\n%s", err, out)
	}
	// The non-root sshd reads a host key of its own, readable by its user (sshd refuses
	// only keys that others can read and that belong to the user it runs as).
	userHostKey := filepath.Join(dir, "mpiuser_host_ed25519_key")
	if out, err := exec.CommandContext(ctx, "ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "", "-f", userHostKey).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("generating the non-root sshd's host key: %v\n%s", err, out)
	}
	if err := os.Chmod(userHostKey, 0o644); err != nil {
		return nil, err
	}
	const sshdCommon = "PasswordAuthentication no\nKbdInteractiveAuthentication no\nUsePAM no\nStrictModes no\n"
	config := map[string]string{
		"passwd": fmt.Sprintf("root:x:0:0:root:/root:/bin/sh\nsshd:x:100:65534::/run/sshd:/usr/sbin/nologin\n"+
			"mpiuser:x:%[1]d:%[1]d::/home/mpiuser:/bin/sh\n", MPIUserID),
		"group": fmt.Sprintf("root:x:0:\nnogroup:x:65534:\nmpiuser:x:%d:\n", MPIUserID),
		// Workers' names and the job's key are new with every job: nothing to check a
		// host key against. The non-root user's sshd listens on 2222, a port it may bind.
		"ssh_config": "Host *\n  StrictHostKeyChecking no\n  UserKnownHostsFile /dev/null\n  LogLevel ERROR\n" +
			"Match localuser mpiuser\n  Port 2222\n",
		// StrictModes no: the Secret volume's files are links into a directory the
		// kubelet owns, which sshd's ownership checks refuse.
		"sshd_config": "HostKey /etc/ssh/ssh_host_ed25519_key\nPermitRootLogin prohibit-password\n" + sshdCommon,
		// No pid file: the user may not write /run.
		"mpiuser_sshd_config": "Port 2222\nHostKey /etc/ssh/mpiuser_host_ed25519_key\nPidFile none\n" + sshdCommon,
	}
	for name, text := range config {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			return nil, err
		}
	}
	privsep := filepath.Join(dir, "sshd-privsep")
	if err := os.Mkdir(privsep, 0o755); err != nil {
		return nil, err
	}

	const (
		openMPILib = "/usr/lib/x86_64-linux-gnu/openmpi/lib"
		pmixDir    = "/usr/lib/x86_64-linux-gnu/pmix2"
	)
	files := map[string]string{
		"/usr/bin/mpirun":                   "/usr/bin/orterun",
		"/usr/bin/orterun":                  "/usr/bin/orterun",
		"/usr/bin/orted":                    "/usr/bin/orted",
		"/usr/bin/ssh":                      "/usr/bin/ssh",
		"/usr/sbin/sshd":                    "/usr/sbin/sshd",
		"/bin/sh":                           "/bin/sh",
		"/bin/sleep":                        "/bin/sleep",
		openMPILib:                          openMPILib,
		pmixDir:                             pmixDir,
		"/usr/share/openmpi":                "/usr/share/openmpi",
		"/etc/openmpi":                      "/etc/openmpi",
		MPIAllReduceProgramPath:             program,
		"/etc/passwd":                       filepath.Join(dir, "passwd"),
		"/etc/group":                        filepath.Join(dir, "group"),
		"/etc/ssh/ssh_config":               filepath.Join(dir, "ssh_config"),
		"/etc/ssh/sshd_config":              filepath.Join(dir, "sshd_config"),
		"/etc/ssh/ssh_host_ed25519_key":     hostKey,
		"/etc/ssh/ssh_host_ed25519_key.pub": hostKey + ".pub",
		"/etc/ssh/mpiuser_host_ed25519_key": userHostKey,
		MPIUserSSHDConfig:                   filepath.Join(dir, "mpiuser_sshd_config"),
		"/run/sshd":                         privsep,
	}
	programs := []string{"/usr/bin/orterun", "/usr/bin/orted", "/usr/bin/ssh", "/usr/sbin/sshd", "/bin/sh", "/bin/sleep", program}
	for _, root := range []string{openMPILib, pmixDir} {
		err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
			if err == nil && !d.IsDir() && strings.Contains(filepath.Base(p), ".so") {
				programs = append(programs, p)
			}
			return err
		})
		if err != nil {
			return nil, err
		}
	}
	for _, p := range programs {
		libs, err := SharedLibraries(p)
		if err != nil {
			return nil, err
		}
		for _, lib := range libs {
			files[lib] = lib
		}
	}
	return files, nil
}
