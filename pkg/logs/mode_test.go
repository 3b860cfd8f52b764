package logs

import "testing"

func TestParseMode(t *testing.T) {
	cases := []struct {
		in      string
		want    Mode
		wantErr bool
	}{
		{in: "leaders", want: ModeLeaders},
		{in: "all", want: ModeAll},
		{in: "none", want: ModeNone},
		{in: "", wantErr: true},
		{in: "All", wantErr: true},
		{in: "workers", wantErr: true},
	}
	for _, tc := range cases {
		t.Run(tc.in, func(t *testing.T) {
			got, err := ParseMode(tc.in)
			if (err != nil) != tc.wantErr {
				t.Fatalf("ParseMode(%q) error = %v, want error %v", tc.in, err, tc.wantErr)
			}
			if got != tc.want {
				t.Errorf("ParseMode(%q) = %q, want %q", tc.in, got, tc.want)
			}
		})
	}
}

func TestModeSelects(t *testing.T) {
	cases := []struct {
		mode         Mode
		leader, want bool
	}{
		{ModeLeaders, true, true},
		{ModeLeaders, false, false},
		{ModeAll, true, true},
		{ModeAll, false, true},
		{ModeNone, true, false},
		{ModeNone, false, false},
	}
	for _, tc := range cases {
		if got := tc.mode.Selects(tc.leader); got != tc.want {
			t.Errorf("%s.Selects(leader=%v) = %v, want %v", tc.mode, tc.leader, got, tc.want)
		}
	}
}

func TestReplicaPrefix(t *testing.T) {
	cases := []struct {
		replicaType string
		index       int
		want        string
	}{
		{"Worker", 1, "worker-1"},
		{"Chief", 0, "chief-0"},
		{"PS", 2, "ps-2"},
		{"Launcher", 0, "launcher-0"},
		{"worker", 10, "worker-10"},
	}
	for _, tc := range cases {
		if got := ReplicaPrefix(tc.replicaType, tc.index); got != tc.want {
			t.Errorf("ReplicaPrefix(%q, %d) = %q, want %q", tc.replicaType, tc.index, got, tc.want)
		}
	}
}
