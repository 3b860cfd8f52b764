package logs

import (
	"bytes"
	"testing"
)

func TestTailKeepsTheLastLines(t *testing.T) {
	tail := NewTail(3)
	for _, chunk := range []string{"one\ntw", "o\nthree\n", "four\nfive", ""} {
		if _, err := tail.Write([]byte(chunk)); err != nil {
			t.Fatal(err)
		}
	}
	var out bytes.Buffer
	if _, err := tail.WriteTo(&out); err != nil {
		t.Fatal(err)
	}
	if got, want := out.String(), "three\nfour\nfive\n"; got != want {
		t.Errorf("before Close: %q, want %q", got, want)
	}
	_ = tail.Close()
	out.Reset()
	_, _ = tail.WriteTo(&out)
	if got, want := out.String(), "three\nfour\nfive\n"; got != want {
		t.Errorf("after Close: %q, want %q", got, want)
	}
}
