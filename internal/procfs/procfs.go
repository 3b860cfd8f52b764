// Package procfs reads Linux's process table from /proc: each process's
// state, parent and process group, as the local backend needs them to leave
// no process behind, and a process's memory high-water mark, which a run's
// timeline reports. It only reads; it never signals or changes anything
// (LiveInGroup's signal 0, without /proc, delivers nothing).
package procfs

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// Process is one line of the process table.
type Process struct {
	PID, PPID, PGID int
	// State is the kernel's one-letter state: R, S, D, T, Z (zombie), X (dead), …
	State string
}

// Ended reports whether the process has ended: a zombie, or dead.
func (p Process) Ended() bool { return p.State == "Z" || p.State == "X" }

// List returns every process /proc shows. Processes that end while it reads
// are left out; an error means /proc itself could not be read.
func List() ([]Process, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	var out []Process
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if p, err := Stat(pid); err == nil {
			out = append(out, p)
		}
	}
	return out, nil
}

// Stat reads one process from /proc/<pid>/stat.
func Stat(pid int) (Process, error) {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return Process{}, err
	}
	return parseStat(pid, data)
}

// parseStat reads "pid (comm) state ppid pgrp …"; comm may hold spaces and
// parentheses, so the fields are read after the last ')'.
func parseStat(pid int, stat []byte) (Process, error) {
	end := bytes.LastIndexByte(stat, ')')
	if end < 0 {
		return Process{}, fmt.Errorf("malformed /proc/%d/stat: %q", pid, stat)
	}
	fields := strings.Fields(string(stat[end+1:]))
	if len(fields) < 3 {
		return Process{}, fmt.Errorf("malformed /proc/%d/stat: %q", pid, stat)
	}
	ppid, err1 := strconv.Atoi(fields[1])
	pgid, err2 := strconv.Atoi(fields[2])
	if err1 != nil || err2 != nil {
		return Process{}, fmt.Errorf("malformed /proc/%d/stat: %q", pid, stat)
	}
	return Process{PID: pid, PPID: ppid, PGID: pgid, State: fields[0]}, nil
}
