package bench

import (
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/trainstep/trainstep/internal/procfs"
)

// memorySampleInterval is how often a running trainstep's resident set is read.
const memorySampleInterval = 20 * time.Millisecond

// residentPeaks are the largest parts of a process's resident set seen, and
// its high-water mark.
type residentPeaks struct{ hwm, anon, file int64 }

// sampleResident reads /proc/<pid>/status every interval until done is
// closed and returns the largest VmHWM, RssAnon and RssFile seen (zero where
// /proc is not available).
func sampleResident(pid int, every time.Duration, done <-chan struct{}) residentPeaks {
	var peaks residentPeaks
	path := fmt.Sprintf("/proc/%d/status", pid)
	ticker := time.NewTicker(every)
	defer ticker.Stop()
	for {
		if data, err := os.ReadFile(path); err == nil {
			peaks.hwm = max(peaks.hwm, procfs.StatusKiB(data, "VmHWM")*1024)
			peaks.anon = max(peaks.anon, procfs.StatusKiB(data, "RssAnon")*1024)
			peaks.file = max(peaks.file, procfs.StatusKiB(data, "RssFile")*1024)
		}
		select {
		case <-done:
			return peaks
		case <-ticker.C:
		}
	}
}

// GCTrace summarises the Go runtime's GODEBUG=gctrace=1 lines of one run.
type GCTrace struct {
	Collections int
	// PeakHeapMB is the largest heap at the start of a collection, PeakLiveMB
	// the largest heap marked live by one, PeakGoalMB the largest heap goal.
	PeakHeapMB, PeakLiveMB, PeakGoalMB int
}

// gcLine matches "gc 7 @1.234s 3%: … , 41->45->22 MB, 44 MB goal, …".
var gcLine = regexp.MustCompile(`(?m)^gc \d+ @.*?, (\d+)->(\d+)->(\d+) MB, (\d+) MB goal`)

// ParseGCTrace reads gctrace lines out of a process's stderr.
func ParseGCTrace(stderr string) GCTrace {
	var trace GCTrace
	for _, m := range gcLine.FindAllStringSubmatch(stderr, -1) {
		start, _ := strconv.Atoi(m[1])
		live, _ := strconv.Atoi(m[3])
		goal, _ := strconv.Atoi(m[4])
		trace.Collections++
		trace.PeakHeapMB = max(trace.PeakHeapMB, start)
		trace.PeakLiveMB = max(trace.PeakLiveMB, live)
		trace.PeakGoalMB = max(trace.PeakGoalMB, goal)
	}
	return trace
}

// userHZ is the unit of /proc/<pid>/stat's CPU times: 100 per second on
// Linux whatever the kernel's own tick rate.
const userHZ = 100

// processCPU reads the user plus system time a running process has used so
// far from /proc/<pid>/stat.
func processCPU(pid int) (time.Duration, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, fmt.Errorf("reading the CPU time of process %d: %w", pid, err)
	}
	return parseStatCPU(string(data))
}

// parseStatCPU reads utime and stime, the 14th and 15th fields of a
// /proc/<pid>/stat line; the 2nd, the command, may hold spaces and parentheses.
func parseStatCPU(stat string) (time.Duration, error) {
	end := strings.LastIndexByte(stat, ')')
	if end < 0 {
		return 0, fmt.Errorf("malformed /proc stat line %q", stat)
	}
	fields := strings.Fields(stat[end+1:]) // from the 3rd field on
	if len(fields) < 13 {
		return 0, fmt.Errorf("malformed /proc stat line %q", stat)
	}
	var ticks int64
	for _, f := range fields[11:13] {
		n, err := strconv.ParseInt(f, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("malformed /proc stat line %q: %w", stat, err)
		}
		ticks += n
	}
	return time.Duration(ticks) * time.Second / userHZ, nil
}

// LoadAverage is the machine's load over 1, 5 and 15 minutes, as uptime
// shows it: every measurement on shared cores is reported with it.
func LoadAverage() string {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	fields := strings.Fields(string(data))
	if len(fields) < 3 {
		return "unknown"
	}
	return strings.Join(fields[:3], " ")
}
