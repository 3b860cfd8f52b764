package docs_test

import (
	"os"
	"regexp"
	"testing"
)

// The release a user pins is named the same everywhere: the Makefile's
// RELEASE (stamped into `trainstep version` and the image's label), the
// newest CHANGELOG.md heading, both templates' version label, and the tag
// the README tells users to pin.
func TestReleaseIsNamedTheSameEverywhere(t *testing.T) {
	find := func(path, pattern string) string {
		t.Helper()
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		m := regexp.MustCompile(pattern).FindSubmatch(data)
		if m == nil {
			t.Fatalf("%s: no match for %s", path, pattern)
		}
		return string(m[1])
	}
	release := find("../Makefile", `(?m)^RELEASE := (v\d+\.\d+\.\d+)$`)
	for path, pattern := range map[string]string{
		"../CHANGELOG.md":                           `(?m)^## (v\d+\.\d+\.\d+)`,
		"../templates/workflowtemplate.yaml":        `app\.kubernetes\.io/version: (\S+)`,
		"../templates/clusterworkflowtemplate.yaml": `app\.kubernetes\.io/version: (\S+)`,
		"../README.md":                              `ghcr\.io/trainstep/trainstep:(v[\d.]+)`,
	} {
		if got := find(path, pattern); got != release {
			t.Errorf("%s names %s, the Makefile's RELEASE is %s", path, got, release)
		}
	}
}
