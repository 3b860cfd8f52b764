package docs_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
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

// shippedImageRef is a reference to the release image with a version tag
// (and, pinned, a digest); a mention without a tag names the repository only.
var shippedImageRef = regexp.MustCompile(`ghcr\.io/trainstep/trainstep:v[0-9][^\s"'` + "`" + `|),]*`)

// The image the templates, examples and docs ship is the release's, named by
// tag and digest — a tag alone can be moved to other contents — and every
// reference names the same one (`make image-pin` writes them all).
func TestShippedImageIsPinnedByDigest(t *testing.T) {
	data, err := os.ReadFile("../Makefile")
	if err != nil {
		t.Fatal(err)
	}
	release := regexp.MustCompile(`(?m)^RELEASE := (v\d+\.\d+\.\d+)$`).FindSubmatch(data)
	if release == nil {
		t.Fatal("the Makefile sets no RELEASE")
	}
	pinned := regexp.MustCompile(`^ghcr\.io/trainstep/trainstep:` + regexp.QuoteMeta(string(release[1])) + `@sha256:[0-9a-f]{64}$`)
	var files []string
	for _, dir := range []string{"../templates", "../workflows", "."} {
		err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
			if err == nil && !d.IsDir() && (strings.HasSuffix(path, ".yaml") || strings.HasSuffix(path, ".md")) {
				files = append(files, path)
			}
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	files = append(files, "../README.md")
	refs := map[string][]string{} // reference → files naming it
	for _, path := range files {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		for _, ref := range shippedImageRef.FindAllString(string(data), -1) {
			refs[ref] = append(refs[ref], path)
		}
	}
	for _, tmpl := range []string{"../templates/workflowtemplate.yaml", "../templates/clusterworkflowtemplate.yaml"} {
		found := false
		for _, paths := range refs {
			found = found || slices.Contains(paths, tmpl)
		}
		if !found {
			t.Errorf("%s names no ghcr.io/trainstep/trainstep:<tag>@sha256:<digest>", tmpl)
		}
	}
	for ref, paths := range refs {
		if !pinned.MatchString(ref) {
			t.Errorf("%s names %s, want ghcr.io/trainstep/trainstep:%s@sha256:<digest> (make image-pin writes it)", strings.Join(slices.Compact(paths), ", "), ref, release[1])
		}
	}
	if len(refs) > 1 {
		t.Errorf("the shipped files name %d different release images, want one: %v", len(refs), refs)
	}
}
