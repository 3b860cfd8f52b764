package spec

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestDuplicateKeys(t *testing.T) {
	cases := []struct {
		name, doc string
		want      []duplicateKey
	}{
		{name: "none", doc: "a: 1\nb: {a: 2}\n"},
		{name: "a merge key overrides without duplicating", doc: "base: &b {x: 1}\nc:\n  <<: *b\n  x: 2\n"},
		{name: "nested in a list", doc: "l:\n- {k: 1}\n- k: 1\n  k: 2\n",
			want: []duplicateKey{{path: "l[1].k", first: 3, then: 4}}},
		{name: "flow map", doc: "m: {a: 1, a: 2}\n", want: []duplicateKey{{path: "m.a", first: 1, then: 1}}},
		{name: "a dotted key is quoted", doc: "labels:\n  a.b/c: x\n  a.b/c: y\n",
			want: []duplicateKey{{path: `labels."a.b/c"`, first: 2, then: 3}}},
		{name: "JSON indented with tabs", doc: "{\n\t\"a\": 1,\n\t\"a\": 2\n}\n", want: []duplicateKey{{path: "a", first: 2, then: 3}}},
		{name: "JSON escapes", doc: `{"spec": {"\u0061": 1, "a": 2}}`, want: []duplicateKey{{path: "spec.a", first: 1, then: 1}}},
		{name: "not parseable: left to the reader", doc: "a: [1,\n"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := duplicateKeys([]byte(tc.doc))
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(duplicateKey{})); diff != "" {
				t.Errorf("duplicates of %q (-want +got):\n%s", tc.doc, diff)
			}
		})
	}
}

func TestDuplicateKeysUnderLenientAreWarnings(t *testing.T) {
	warnings, err := checkDuplicateKeys([]byte("a: 1\na: 2\n"), true)
	if err != nil || len(warnings) != 1 || !strings.Contains(warnings[0], "a: duplicate field, at lines 1 and 2") {
		t.Errorf("warnings %q, err %v; want one warning", warnings, err)
	}
	if _, err := checkDuplicateKeys([]byte("a: 1\na: 2\n"), false); err == nil {
		t.Error("a duplicate key is no error")
	}
}
