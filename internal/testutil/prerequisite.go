package testutil

import (
	"fmt"
	"os"
	"testing"
)

// PrerequisiteMissing is for a test that needs something of the machine
// (a tool, a device) it does not have: it skips the test, except under
// CI=true, where every test must run and a missing prerequisite fails it.
func PrerequisiteMissing(t testing.TB, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...)
	if os.Getenv("CI") == "true" {
		t.Fatalf("%s (CI=true runs every test: install it there)", msg)
	}
	t.Skip(msg)
}
