package cluster

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

const (
	// containerLogLinks is where the kubelet links every container's log (a fixed path).
	containerLogLinks = "/var/log/containers"
	// cniResultsDir is where libcni, inside containerd, caches each attachment's result.
	cniResultsDir = "/var/lib/cni/results"
)

// tearDown stops the real node and removes everything it left on the machine: the kubelet
// (through stop), the pods' containers, containerd, the mounts under the node's directory,
// the kubelet's log links, libcni's cached results and the network namespace with its veth
// pair; it puts back the sysctls the kubelet changed. It goes on past errors and returns
// them all. stop ends one component by name and returns once it has exited.
func (s nodeState) tearDown(stop func(name string)) error {
	// What follows kills and unmounts by the node's directory: never by a wrong one.
	if !filepath.IsAbs(s.Dir) || filepath.Clean(s.Dir) != s.Dir || filepath.Base(s.Dir) != "node"+s.Suffix ||
		!strings.HasPrefix(s.Network.Namespace, "trainstep-") {
		return fmt.Errorf("refusing to tear down a real node recorded as directory %q, namespace %q", s.Dir, s.Network.Namespace)
	}
	var errs []error
	stop(s.component("workflow-controller"))
	stop(s.component("coredns"))
	stop(s.component("kube-proxy"))
	stop(s.component("kubelet"))
	errs = append(errs, s.restoreSysctls())
	errs = append(errs, s.removeContainers())
	stop(s.component("containerd"))
	// Shims outlive containerd; any left (say containerd did not answer) go with their
	// containers, as does anything else still running from the node's directory.
	errs = append(errs, s.killNodeProcesses())
	errs = append(errs, s.unmountAll())
	errs = append(errs, s.removeLinks())
	errs = append(errs, s.Network.delete())
	if err := errors.Join(errs...); err != nil {
		return err
	}
	if err := os.Remove(s.recordPath()); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("removing the real node's record: %w", err)
	}
	return nil
}

// removeContainers kills every task (pod sandboxes and containers) of the node's containerd
// and deletes it, which also unmounts its root file system. A pod's tasks share one shim, so
// deleting one may take another with it: the rounds repeat until none is listed.
func (s nodeState) removeContainers() error {
	if _, err := os.Stat(s.ContainerdSocket); err != nil {
		return nil // containerd never started
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	n := realNode{nodeState: s}
	for range 3 {
		out, err := n.ctr(ctx, "tasks", "list", "--quiet")
		if err != nil {
			// containerd is gone (its owner was killed): its shims and their containers are
			// killed by killNodeProcesses, their root file systems unmounted by unmountAll.
			return nil
		}
		round := strings.Fields(out)
		if len(round) == 0 {
			break
		}
		for _, id := range round {
			_, _ = n.ctr(ctx, "tasks", "kill", "--signal", "SIGKILL", id)
		}
		for _, id := range round {
			_, _ = n.ctr(ctx, "tasks", "delete", "--force", id)
		}
	}
	out, err := n.ctr(ctx, "tasks", "list", "--quiet")
	if err != nil {
		return fmt.Errorf("listing the node's containers: %w", err)
	}
	if left := strings.Fields(out); len(left) > 0 {
		return fmt.Errorf("removing the node's containers: still running: %s", strings.Join(left, ", "))
	}
	return nil
}

// killNodeProcesses kills every process whose command line names the node's directory —
// containerd-shims (their -address is the node's socket) and any node component still
// running — with its descendants (a shim's are the containers).
func (s nodeState) killNodeProcesses() error {
	procs, err := processes()
	if err != nil {
		return err
	}
	for pid, p := range procs {
		if strings.Contains(p.cmdline, s.Dir+"/") {
			killTree(pid, procs)
		}
	}
	return nil
}

// unmountAll unmounts every mount point under the node's directory, deepest first (volume
// tmpfs, pod network namespaces, sandbox /dev/shm, the kubelet's own bind mount), and
// fails if any is left: removing the directory with a mount in it would reach into it.
func (s nodeState) unmountAll() error {
	for range 3 {
		mounts, err := mountsUnder(s.Dir)
		if err != nil {
			return err
		}
		if len(mounts) == 0 {
			return nil
		}
		for _, m := range mounts {
			_ = syscall.Unmount(m, syscall.MNT_DETACH)
		}
	}
	mounts, err := mountsUnder(s.Dir)
	if err == nil && len(mounts) > 0 {
		err = fmt.Errorf("unmounting the node's mounts: still mounted: %s", strings.Join(mounts, ", "))
	}
	return err
}

// removeLinks removes the kubelet's log links into the node's directory and libcni's cached
// results of the node's pods (those name the pod's network namespace, under the node's
// directory).
func (s nodeState) removeLinks() error {
	var errs []error
	entries, err := os.ReadDir(containerLogLinks)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		errs = append(errs, fmt.Errorf("reading %s: %w", containerLogLinks, err))
	}
	for _, e := range entries {
		link := filepath.Join(containerLogLinks, e.Name())
		if target, err := os.Readlink(link); err == nil && strings.HasPrefix(target, s.Dir+"/") {
			if err := os.Remove(link); err != nil {
				errs = append(errs, err)
			}
		}
	}
	cached, _ := os.ReadDir(cniResultsDir)
	for _, e := range cached {
		path := filepath.Join(cniResultsDir, e.Name())
		data, err := os.ReadFile(path)
		if err == nil && strings.Contains(string(data), `"`+s.Dir+"/") {
			if err := os.Remove(path); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// restoreSysctls writes back the values recorded before the kubelet started.
func (s nodeState) restoreSysctls() error {
	var errs []error
	for name, value := range s.Sysctls {
		if err := os.WriteFile("/proc/sys/"+name, []byte(value), 0o644); err != nil {
			errs = append(errs, fmt.Errorf("restoring sysctl %s: %w", name, err))
		}
	}
	return errors.Join(errs...)
}

// mountsUnder lists this mount namespace's mount points under dir, deepest first.
func mountsUnder(dir string) ([]string, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, fmt.Errorf("reading mounts: %w", err)
	}
	defer f.Close()
	var mounts []string
	scanner := bufio.NewScanner(f)
	for scanner.Scan() {
		fields := strings.Fields(scanner.Text())
		if len(fields) < 5 {
			continue
		}
		point := unescapeMountPath(fields[4])
		if point == dir || strings.HasPrefix(point, dir+"/") {
			mounts = append(mounts, point)
		}
	}
	if err := scanner.Err(); err != nil {
		return nil, fmt.Errorf("reading mounts: %w", err)
	}
	sort.Slice(mounts, func(i, j int) bool { return len(mounts[i]) > len(mounts[j]) })
	return mounts, nil
}

// unescapeMountPath undoes mountinfo's octal escapes (\040 for a space, ...).
func unescapeMountPath(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// process is what killNodeProcesses needs of a running process.
type process struct {
	ppid    int
	cmdline string
}

// processes reads every process's parent and command line from /proc.
func processes() (map[int]process, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, fmt.Errorf("listing processes: %w", err)
	}
	procs := map[int]process{}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue // exited meanwhile
		}
		// The command name in parentheses may hold spaces; the fields after it do not.
		rest := string(stat[strings.LastIndexByte(string(stat), ')')+1:])
		fields := strings.Fields(rest)
		if len(fields) < 2 {
			continue
		}
		ppid, _ := strconv.Atoi(fields[1])
		cmdline, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		procs[pid] = process{ppid: ppid, cmdline: strings.ReplaceAll(string(cmdline), "\x00", " ")}
	}
	return procs, nil
}

// killTree sends SIGKILL to pid and all its descendants, children first.
func killTree(pid int, procs map[int]process) {
	for child, p := range procs {
		if p.ppid == pid {
			killTree(child, procs)
		}
	}
	_ = syscall.Kill(pid, syscall.SIGKILL)
}
