package cluster

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestCRILogLines(t *testing.T) {
	now := time.Date(2025, 3, 4, 5, 6, 7, 8, time.FixedZone("x", 3600))
	tests := []struct {
		name, text, want string
	}{
		{name: "empty text writes nothing", text: "", want: ""},
		{name: "one line gets a newline", text: "hello", want: "2025-03-04T04:06:07.000000008Z stdout F hello\n"},
		{
			name: "each line is one full CRI record, trailing newline optional",
			text: "a\n\nb\n",
			want: "2025-03-04T04:06:07.000000008Z stdout F a\n" +
				"2025-03-04T04:06:07.000000008Z stdout F \n" +
				"2025-03-04T04:06:07.000000008Z stdout F b\n",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, criLogLines(now, tc.text)); diff != "" {
				t.Errorf("criLogLines (-want +got):\n%s", diff)
			}
		})
	}
}
