package logs

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestHighWaterPrintsEachLineOnce(t *testing.T) {
	t0 := time.Date(2025, 3, 1, 10, 0, 0, 0, time.UTC)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	type read struct {
		stream int // which stream reads the line
		ts     time.Time
	}
	cases := []struct {
		name  string
		reads []read
		want  []bool
	}{
		{
			name:  "one stream, increasing timestamps",
			reads: []read{{0, at(1)}, {0, at(2)}, {0, at(3)}},
			want:  []bool{true, true, true},
		},
		{
			name:  "second stream replays the whole log",
			reads: []read{{0, at(1)}, {0, at(2)}, {1, at(1)}, {1, at(2)}, {1, at(3)}},
			want:  []bool{true, true, false, false, true},
		},
		{
			name:  "distinct lines sharing a timestamp are all printed once",
			reads: []read{{0, at(1)}, {0, at(1)}, {0, at(1)}, {1, at(1)}, {1, at(1)}, {1, at(1)}, {1, at(1)}},
			want:  []bool{true, true, true, false, false, false, true},
		},
		{
			name:  "resumed stream from the high-water second",
			reads: []read{{0, at(100)}, {0, at(900)}, {1, at(100)}, {1, at(900)}, {1, at(1500)}},
			want:  []bool{true, true, false, false, true},
		},
		{
			name:  "lines without a timestamp are always printed",
			reads: []read{{0, time.Time{}}, {1, time.Time{}}},
			want:  []bool{true, true},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var mark highWater
			positions := map[int]*streamPosition{0: {}, 1: {}}
			var got []bool
			for _, r := range tc.reads {
				got = append(got, mark.admit(r.ts, positions[r.stream]))
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("printed lines (-want +got):\n%s", diff)
			}
		})
	}
}

func TestSplitTimestamp(t *testing.T) {
	cases := []struct {
		line        string
		wantTime    time.Time
		wantContent string
	}{
		{
			line:        "2025-03-01T10:00:00.123456789Z epoch 1 loss=0.5",
			wantTime:    time.Date(2025, 3, 1, 10, 0, 0, 123456789, time.UTC),
			wantContent: "epoch 1 loss=0.5",
		},
		{
			line:        "2025-03-01T10:00:00Z ",
			wantTime:    time.Date(2025, 3, 1, 10, 0, 0, 0, time.UTC),
			wantContent: "",
		},
		{line: "fake logs", wantContent: "fake logs"},
		{line: "no-space-at-all", wantContent: "no-space-at-all"},
		{line: " leading space", wantContent: " leading space"},
		{line: "", wantContent: ""},
	}
	for _, tc := range cases {
		ts, content := splitTimestamp([]byte(tc.line))
		if !ts.Equal(tc.wantTime) || string(content) != tc.wantContent {
			t.Errorf("splitTimestamp(%q) = %v, %q; want %v, %q", tc.line, ts, content, tc.wantTime, tc.wantContent)
		}
	}
}
