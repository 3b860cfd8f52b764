//go:build !unix

package local

import (
	"errors"
	"io"
	"time"
)

// errNoProcessGroups explains why the local backend does not run here.
var errNoProcessGroups = errors.New("the local backend needs process groups, which this operating system does not have")

type process struct {
	pid, pgid  int
	supervisor int
	exited     chan struct{}
	exitCode   int32
}

func startProcess(_, _ []string, out io.WriteCloser, _ []string) (*process, error) {
	if out != nil {
		out.Close()
	}
	return nil, errNoProcessGroups
}

func (p *process) stop(time.Duration) {}

// KillProcessGroups has nothing to kill where no process can be started.
func KillProcessGroups() {}
