// Package docs_test checks the documentation's relative links: every one in
// README.md and docs/*.md must name a file of the repository and, with a
// #fragment, a heading of that file as GitHub renders its anchor.
package docs_test

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode"
)

// link matches inline links and images, [text](target) and ![alt](target),
// with an optional "title" after the target.
var link = regexp.MustCompile(`!?\[[^\]]*\]\(([^)\s]+)(?:\s+"[^"]*")?\)`)

// codeSpan matches inline code, where brackets are not links.
var codeSpan = regexp.MustCompile("`[^`]*`")

// document is a Markdown file's links and the anchors of its headings, both
// outside fenced code blocks (where "# " starts a shell comment).
type document struct {
	links   []string
	anchors map[string]bool
}

func readDocument(path string) (document, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return document{}, err
	}
	doc := document{anchors: map[string]bool{}}
	seen := map[string]int{}
	fenced := false
	for _, line := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
			continue
		}
		if fenced {
			continue
		}
		if heading, ok := strings.CutPrefix(strings.TrimLeft(line, "#"), " "); ok && strings.HasPrefix(line, "#") {
			slug := slug(heading)
			// GitHub numbers repeated headings: x, x-1, x-2.
			if n := seen[slug]; n > 0 {
				doc.anchors[fmt.Sprintf("%s-%d", slug, n)] = true
			} else {
				doc.anchors[slug] = true
			}
			seen[slug]++
		}
		for _, m := range link.FindAllStringSubmatch(codeSpan.ReplaceAllString(line, ""), -1) {
			doc.links = append(doc.links, m[1])
		}
	}
	return doc, nil
}

// slug is the anchor GitHub gives a heading: its text lower-cased, inline
// markup and punctuation other than '-' and '_' dropped, spaces made '-'.
func slug(heading string) string {
	text := link.ReplaceAllStringFunc(strings.TrimSpace(heading), func(s string) string {
		return s[strings.Index(s, "[")+1 : strings.Index(s, "]")]
	})
	var b strings.Builder
	for _, r := range strings.ToLower(text) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.Is(unicode.Mn, r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// brokenLinks returns, for each file (relative to root), every relative
// link whose file or heading does not exist.
func brokenLinks(root string, files []string) ([]string, error) {
	docs := map[string]document{}
	load := func(path string) (document, error) {
		if doc, ok := docs[path]; ok {
			return doc, nil
		}
		doc, err := readDocument(path)
		docs[path] = doc
		return doc, err
	}
	var broken []string
	for _, file := range files {
		doc, err := load(filepath.Join(root, file))
		if err != nil {
			return nil, err
		}
		for _, target := range doc.links {
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			path, fragment, _ := strings.Cut(target, "#")
			resolved := filepath.Join(root, file)
			if path != "" {
				resolved = filepath.Join(root, filepath.Dir(file), filepath.FromSlash(path))
			}
			info, err := os.Stat(resolved)
			if err != nil {
				broken = append(broken, fmt.Sprintf("%s: %s: no such file", file, target))
				continue
			}
			if fragment == "" {
				continue
			}
			if info.IsDir() || !strings.HasSuffix(resolved, ".md") {
				broken = append(broken, fmt.Sprintf("%s: %s: a #fragment needs a Markdown file", file, target))
				continue
			}
			linked, err := load(resolved)
			if err != nil {
				return nil, err
			}
			if !linked.anchors[fragment] {
				broken = append(broken, fmt.Sprintf("%s: %s: no heading with that anchor", file, target))
			}
		}
	}
	return broken, nil
}

func TestREADMEAndDocsLinksResolve(t *testing.T) {
	root := ".."
	files := []string{"README.md"}
	pages, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	if len(pages) == 0 {
		t.Fatal("no pages in docs/")
	}
	for _, p := range pages {
		rel, err := filepath.Rel(root, p)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, rel)
	}
	broken, err := brokenLinks(root, files)
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range broken {
		t.Error(b)
	}
}

// The checker itself: it finds a missing file, a missing heading and a
// fragment on a directory, and takes what exists, in and out of code.
func TestBrokenLinksFindsWhatIsMissing(t *testing.T) {
	root := t.TempDir()
	files := map[string]string{
		"README.md": "# Top\n\n" +
			"[ok](docs/a.md) [ok](docs/a.md#exit-codes--exit-paths) [ok](#top) [ok](docs/) ![plot](docs/p.svg)\n" +
			"[gone](docs/b.md) [no heading](docs/a.md#nope) [dir](docs/#x) [web](https://example.com/x)\n" +
			"`[code](not/a/link.md)`\n```sh\n# not a heading\n[in a fence](nope.md)\n```\n",
		"docs/a.md":  "# A\n\n## Exit codes & exit paths\n\n## `trainstep render`, again\n\n[up](../README.md#top) [self](#trainstep-render-again)\n",
		"docs/p.svg": "<svg/>",
	}
	for name, content := range files {
		path := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	broken, err := brokenLinks(root, []string{"README.md", "docs/a.md"})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"README.md: docs/b.md: no such file",
		"README.md: docs/a.md#nope: no heading with that anchor",
		"README.md: docs/#x: a #fragment needs a Markdown file",
	}
	if strings.Join(broken, "\n") != strings.Join(want, "\n") {
		t.Errorf("broken links:\n%s\nwant:\n%s", strings.Join(broken, "\n"), strings.Join(want, "\n"))
	}
}

func TestSlugIsGitHubs(t *testing.T) {
	for heading, want := range map[string]string{
		"Exit codes & exit paths":                                   "exit-codes--exit-paths",
		"`trainstep render` and `trainstep validate`":               "trainstep-render-and-trainstep-validate",
		"What the real-node tests prove that the KWOK tests do not": "what-the-real-node-tests-prove-that-the-kwok-tests-do-not",
		"How large a job can be":                                    "how-large-a-job-can-be",
		"[Linked](x.md) heading_with_underscore":                    "linked-heading_with_underscore",
		"make test":                                                 "make-test",
	} {
		if got := slug(heading); got != want {
			t.Errorf("slug(%q) = %q, want %q", heading, got, want)
		}
	}
}
