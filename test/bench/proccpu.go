package bench

import (
	"cmp"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// clockTicks is the kernel's USER_HZ, the unit of /proc/<pid>/stat's
// times: 100 on every Linux this runs on.
const clockTicks = 100

// ProcessCPU is the CPU time (user and system) each named program's
// processes have used so far, by the name the kernel knows them by (at
// most 15 characters: "kube-controller" for kube-controller-manager).
// Two readings around a launch say which part of the machine worked for
// it: a side can be slower for the work it makes the control plane do.
type ProcessCPU map[string]time.Duration

// ReadProcessCPU reads /proc for every process that runs now, except the
// kernel's threads (a kworker renames itself by the work it does, so its
// times cannot be followed by name). A process that ended between two
// readings is missing from the second.
func ReadProcessCPU() (ProcessCPU, error) {
	stats, err := filepath.Glob("/proc/[0-9]*/stat")
	if err != nil {
		return nil, err
	}
	cpu := ProcessCPU{}
	for _, path := range stats {
		data, err := os.ReadFile(path)
		if err != nil {
			continue // the process ended meanwhile
		}
		name, used, kernel, err := parseProcessStat(string(data))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		if !kernel {
			cpu[name] += used
		}
	}
	return cpu, nil
}

// kernelThread is PF_KTHREAD, the flag of the kernel's own threads.
const kernelThread = 0x00200000

// parseProcessStat reads a /proc/<pid>/stat line: the name in parentheses
// (which may hold spaces and parentheses itself), the flags (9th field),
// utime and stime (14th and 15th).
func parseProcessStat(stat string) (name string, used time.Duration, kernel bool, err error) {
	open, closing := strings.IndexByte(stat, '('), strings.LastIndexByte(stat, ')')
	if open < 0 || closing < open {
		return "", 0, false, fmt.Errorf("no name in %q", stat)
	}
	// fields[0] is the 3rd field (state).
	fields := strings.Fields(stat[closing+1:])
	if len(fields) < 13 {
		return "", 0, false, fmt.Errorf("too few fields in %q", stat)
	}
	flags, err := strconv.ParseUint(fields[6], 10, 64)
	if err != nil {
		return "", 0, false, fmt.Errorf("flags %q: %w", fields[6], err)
	}
	var ticks uint64
	for _, f := range fields[11:13] {
		v, err := strconv.ParseUint(f, 10, 64)
		if err != nil {
			return "", 0, false, fmt.Errorf("CPU time %q: %w", f, err)
		}
		ticks += v
	}
	return stat[open+1 : closing], time.Duration(ticks) * time.Second / clockTicks, flags&kernelThread != 0, nil
}

// CPUSince is what each program has used since before was read.
func CPUSince(before ProcessCPU) (ProcessCPU, error) {
	now, err := ReadProcessCPU()
	if err != nil {
		return nil, err
	}
	return now.Since(before), nil
}

// Since is what each program used between prev and p.
func (p ProcessCPU) Since(prev ProcessCPU) ProcessCPU {
	used := ProcessCPU{}
	for name, d := range p {
		if d -= prev[name]; d > 0 {
			used[name] = d
		}
	}
	return used
}

// String lists the programs by the time they used, most first, down to
// 10 ms.
func (p ProcessCPU) String() string {
	names := make([]string, 0, len(p))
	for name, d := range p {
		if d >= 10*time.Millisecond {
			names = append(names, name)
		}
	}
	slices.SortFunc(names, func(a, b string) int {
		return cmp.Or(cmp.Compare(p[b], p[a]), strings.Compare(a, b))
	})
	parts := make([]string, len(names))
	for i, name := range names {
		parts[i] = fmt.Sprintf("%s %.2fs", name, p[name].Seconds())
	}
	return strings.Join(parts, ", ")
}
