package local

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// commandProblem says why name, which exec.LookPath refused, cannot be
// started here: a file that exists but is not executable is not "not
// found", and a directory is not a command.
func commandProblem(name string) string {
	if strings.Contains(name, "/") {
		info, err := os.Stat(name)
		switch {
		case err != nil:
			return "not found on this machine (the local backend runs commands here; put it on PATH or use a path)"
		case info.IsDir():
			return "is a directory, not a command"
		}
		return notExecutable(name)
	}
	// exec.LookPath skips files on PATH that are not executable.
	for _, dir := range filepath.SplitList(os.Getenv("PATH")) {
		candidate := filepath.Join(dir, name)
		if info, err := os.Stat(candidate); err == nil && !info.IsDir() {
			return fmt.Sprintf("found as %s, which %s", candidate, strings.TrimPrefix(notExecutable(candidate), "exists but "))
		}
	}
	return "not found on this machine (the local backend runs commands here; put it on PATH or use a path)"
}

func notExecutable(path string) string {
	return fmt.Sprintf("exists but is not executable: chmod +x %s, or run it through its interpreter (command: [sh, %s])", path, path)
}
