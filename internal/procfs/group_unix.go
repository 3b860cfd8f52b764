//go:build unix

package procfs

import "syscall"

// LiveInGroup lists the processes of a process group that are still
// alive. Zombies do not count: they have ended. Without /proc (macOS) it can
// only tell whether the group has any member (signal 0, which delivers
// nothing), and returns its id if so.
func LiveInGroup(pgid int) []int {
	procs, err := List()
	if err != nil {
		if syscall.Kill(-pgid, 0) == nil {
			return []int{pgid}
		}
		return nil
	}
	var live []int
	for _, p := range procs {
		if p.PGID == pgid && !p.Ended() {
			live = append(live, p.PID)
		}
	}
	return live
}
