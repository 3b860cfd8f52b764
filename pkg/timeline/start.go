package timeline

import (
	"bytes"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// userHZ is the unit of /proc's process times: USER_HZ, 100 on every
// architecture Linux runs Go on.
const userHZ = 100

// ProcessStart is when the kernel started this process, read from /proc
// (to 10 ms): the runtime's and the packages' initialisation happen before
// main, and a launch's time counts from the exec. Without /proc it returns
// fallback.
func ProcessStart(fallback time.Time) time.Time {
	stat, err := os.ReadFile("/proc/self/stat")
	if err != nil {
		return fallback
	}
	// The command name, in parentheses, may hold spaces: fields count from after it.
	end := bytes.LastIndexByte(stat, ')')
	if end < 0 {
		return fallback
	}
	fields := strings.Fields(string(stat[end+1:]))
	// starttime is field 22 of the line, the 20th after the name.
	if len(fields) < 20 {
		return fallback
	}
	ticks, err := strconv.ParseInt(fields[19], 10, 64)
	if err != nil {
		return fallback
	}
	uptime, ok := uptime()
	if !ok {
		return fallback
	}
	age := uptime - time.Duration(ticks)*time.Second/userHZ
	if age < 0 {
		return fallback
	}
	return time.Now().Add(-age)
}

// uptime is the time since boot from /proc/uptime (to 10 ms), on the same
// clock as a process's starttime.
func uptime() (time.Duration, bool) {
	data, err := os.ReadFile("/proc/uptime")
	if err != nil {
		return 0, false
	}
	fields := strings.Fields(string(data))
	if len(fields) == 0 {
		return 0, false
	}
	secs, err := strconv.ParseFloat(fields[0], 64)
	if err != nil {
		return 0, false
	}
	return time.Duration(secs * float64(time.Second)), true
}

// processCPU is the CPU time this process has used, user and system.
func processCPU() time.Duration {
	var usage syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &usage); err != nil {
		return 0
	}
	return time.Duration(usage.Utime.Nano() + usage.Stime.Nano())
}
