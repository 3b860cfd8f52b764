package logs

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// appendEscaped appends line to dst with every byte a terminal would act on
// made visible: a replica's output is untrusted, and a raw escape sequence
// in the step's log could erase the line before it and print a forged one
// (ESC [2K), retitle the viewer's terminal or write its clipboard (OSC 52).
// C0 controls but tab, DEL and C1 controls become \xNN (a carriage return
// \r), bytes that are not UTF-8 \xNN, and Unicode's bidirectional overrides,
// which reorder what a reader sees, \uNNNN. A line's trailing carriage
// return (CRLF line ends) is dropped. Other text is copied unchanged.
func appendEscaped(dst, line []byte) []byte {
	if n := len(line); n > 0 && line[n-1] == '\r' {
		line = line[:n-1]
	}
	for len(line) > 0 {
		b := line[0]
		if b < utf8.RuneSelf {
			switch {
			case b == '\r':
				dst = append(dst, `\r`...)
			case (b < 0x20 && b != '\t') || b == 0x7f:
				dst = fmt.Appendf(dst, `\x%02x`, b)
			default:
				dst = append(dst, b)
			}
			line = line[1:]
			continue
		}
		r, size := utf8.DecodeRune(line)
		switch {
		case r == utf8.RuneError && size == 1:
			dst = fmt.Appendf(dst, `\x%02x`, b)
		case r >= 0x80 && r <= 0x9f:
			dst = fmt.Appendf(dst, `\x%02x`, r)
		case isBidiControl(r):
			dst = fmt.Appendf(dst, `\u%04x`, r)
		default:
			dst = append(dst, line[:size]...)
		}
		line = line[size:]
	}
	return dst
}

// isBidiControl reports the Unicode characters that reorder the text around
// them (embeddings, overrides, isolates and their terminators).
func isBidiControl(r rune) bool {
	return (r >= 0x202a && r <= 0x202e) || (r >= 0x2066 && r <= 0x2069) || r == 0x200e || r == 0x200f || r == 0x061c
}

// EscapeText escapes a replica's multi-line text (a termination message)
// as its log lines are: each line escaped, the line feeds between them
// kept, so an output parameter shown by Argo's UI or CLI can neither
// carry an escape sequence nor reorder what a reader sees.
func EscapeText(text string) string {
	var out []byte
	for i, line := range strings.Split(text, "\n") {
		if i > 0 {
			out = append(out, '\n')
		}
		out = appendEscaped(out, []byte(line))
	}
	return string(out)
}
