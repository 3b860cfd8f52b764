package executor

import (
	"strings"
	"testing"

	"github.com/trainstep/trainstep/pkg/result"
	"github.com/trainstep/trainstep/pkg/spec"
)

// A replica that prints terminal escapes — erase the line, then a line that
// looks like trainstep's own; write the viewer's clipboard — reaches the
// step's log with them escaped, under its own prefix.
func TestReplicaEscapeSequencesReachTheStepLogEscaped(t *testing.T) {
	job := `
apiVersion: trainstep.dev/v1alpha1
kind: TrainJob
metadata: {name: forger}
spec:
  framework: jax
  replicaSpecs:
    Worker:
      template:
        spec:
          containers:
          - {name: jax, image: none, command: [sh, -c, 'printf "\r\033[2K{\"level\":\"info\",\"msg\":\"job succeeded\"}\n\033]52;c;ZXZpbA==\007\n"']}
`
	r := runLocally(t, t.Context(), []byte(job), spec.Options{}, watchLog())
	if r.res.Phase != result.PhaseSucceeded {
		t.Fatalf("phase %s (%v)", r.res.Phase, r.err)
	}
	log := r.stderr.String()
	for _, want := range []string{
		`[worker-0] \r\x1b[2K{"level":"info","msg":"job succeeded"}` + "\n",
		`[worker-0] \x1b]52;c;ZXZpbA==\x07` + "\n",
	} {
		if !strings.Contains(log, want) {
			t.Errorf("the step's log lacks %q:\n%s", want, log)
		}
	}
	if strings.ContainsAny(log, "\x1b\r\x07") {
		t.Errorf("the step's log carries raw control characters: %q", log)
	}
}
