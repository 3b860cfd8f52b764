package testutil

import (
	"strings"
	"testing"
)

func TestPrerequisiteMissingFailsOnlyUnderCI(t *testing.T) {
	t.Setenv("CI", "true")
	if f := run(t, func(tb testing.TB) { PrerequisiteMissing(tb, "needs %s", "setsid(1)") }); !strings.Contains(f.failed, "needs setsid(1)") || f.skipped != "" {
		t.Errorf("under CI=true: failed %q, skipped %q; want a failure naming what is missing", f.failed, f.skipped)
	}
	t.Setenv("CI", "")
	if f := run(t, func(tb testing.TB) { PrerequisiteMissing(tb, "needs %s", "setsid(1)") }); !strings.Contains(f.skipped, "needs setsid(1)") || f.failed != "" {
		t.Errorf("outside CI: failed %q, skipped %q; want a skip naming what is missing", f.failed, f.skipped)
	}
}
