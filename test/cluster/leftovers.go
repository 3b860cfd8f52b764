package cluster

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/google/go-cmp/cmp"
)

// MachineState is what a real node changes on this machine while it runs: the host-wide
// settings a kubelet changes at start, and the files in the directories where the kubelet
// and libcni write at fixed paths.
type MachineState struct {
	Sysctls              map[string]string
	LogLinks, CNIResults []string
}

// ReadMachineState reads what a real node changes on this machine, to compare after Stop.
func ReadMachineState() (MachineState, error) {
	s := MachineState{Sysctls: map[string]string{}}
	for _, name := range []string{"vm/overcommit_memory", "vm/panic_on_oom", "kernel/panic", "kernel/panic_on_oops"} {
		data, err := os.ReadFile("/proc/sys/" + name)
		if err != nil {
			return s, err
		}
		s.Sysctls[name] = strings.TrimSpace(string(data))
	}
	var err1, err2 error
	s.LogLinks, err1 = dirEntries("/var/log/containers")
	s.CNIResults, err2 = dirEntries("/var/lib/cni/results")
	return s, errors.Join(err1, err2)
}

// LeftAfterStop says what a stopped cluster left that it must have removed or put back: each
// of its real nodes' (nodes, read before Stop) network namespace, mounts and processes; its
// directory dir; and any change to the machine since before. It is nil when nothing is left.
func LeftAfterStop(dir string, nodes []RealNodeInfo, before MachineState) error {
	var errs []error
	for _, node := range nodes {
		if _, err := os.Stat("/run/netns/" + node.Namespace); !os.IsNotExist(err) {
			errs = append(errs, fmt.Errorf("network namespace %s still exists after Stop (stat: %v)", node.Namespace, err))
		}
		mounts, err := MountsUnder(node.Dir)
		if err != nil || len(mounts) > 0 {
			errs = append(errs, fmt.Errorf("mounts left under %s's directory after Stop: %v (%v)", node.Name, mounts, err))
		}
		procs, err := ProcessesMentioning(node.Dir + "/")
		if err != nil || len(procs) > 0 {
			errs = append(errs, fmt.Errorf("processes of %s left after Stop: %v (%v)", node.Name, procs, err))
		}
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		errs = append(errs, fmt.Errorf("cluster directory %s still exists after Stop (stat: %v)", dir, err))
	}
	after, err := ReadMachineState()
	if err != nil {
		errs = append(errs, err)
	} else if diff := cmp.Diff(before, after); diff != "" {
		errs = append(errs, fmt.Errorf("the machine differs after Stop (-before +after):\n%s", diff))
	}
	return errors.Join(errs...)
}

// dirEntries lists the names in dir (none if it does not exist).
func dirEntries(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil && !os.IsNotExist(err) {
		return nil, err
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names, nil
}

// MountsUnder lists this process's mount points under dir.
func MountsUnder(dir string) ([]string, error) {
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	var mounts []string
	for _, line := range strings.Split(string(data), "\n") {
		if fields := strings.Fields(line); len(fields) > 4 && strings.HasPrefix(fields[4], dir) {
			mounts = append(mounts, fields[4])
		}
	}
	return mounts, nil
}

// ProcessesMentioning lists running processes whose command line mentions s.
func ProcessesMentioning(s string) ([]string, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	var procs []string
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && strings.Contains(string(cmdline), s) {
			procs = append(procs, e.Name()+": "+strings.ReplaceAll(string(cmdline), "\x00", " "))
		}
	}
	return procs, nil
}
