package procfs

import (
	"bufio"
	"bytes"
	"os"
	"strconv"
	"strings"
)

// PeakResident is this process's resident memory high-water mark (VmHWM),
// in bytes; 0 without /proc.
func PeakResident() int64 {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	return StatusKiB(data, "VmHWM") * 1024
}

// StatusKiB reads a "Name:   123 kB" line of /proc/<pid>/status; 0 when the
// line is missing or malformed.
func StatusKiB(status []byte, name string) int64 {
	scanner := bufio.NewScanner(bytes.NewReader(status))
	for scanner.Scan() {
		key, value, ok := strings.Cut(scanner.Text(), ":")
		if !ok || key != name {
			continue
		}
		n, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(value), " kB"), 10, 64)
		if err != nil {
			return 0
		}
		return n
	}
	return 0
}
