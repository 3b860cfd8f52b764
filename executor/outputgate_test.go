package executor

import "testing"

func TestOutputGateWritesTheFinalResultOnce(t *testing.T) {
	g := NewOutputGate()
	var writes []string
	g.early(func() { writes = append(writes, "terminated files") })
	if !g.final(func() { writes = append(writes, "final") }) {
		t.Fatal("the first final write must go out")
	}
	if g.final(func() { writes = append(writes, "second final") }) {
		t.Error("a second final write (a second signal's report) must not go out")
	}
	g.early(func() { writes = append(writes, "late terminated files") })
	if want := []string{"terminated files", "final"}; len(writes) != 2 || writes[0] != want[0] || writes[1] != want[1] {
		t.Errorf("writes %q, want %q", writes, want)
	}
}

func TestASettledOutcomeIsNotOverwrittenBySignalFiles(t *testing.T) {
	g := NewOutputGate()
	g.settle()
	wrote := false
	g.early(func() { wrote = true })
	if wrote {
		t.Error("a signal after the job's outcome is known must not write Terminated files")
	}
}
