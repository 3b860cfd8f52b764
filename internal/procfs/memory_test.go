package procfs

import (
	"os"
	"testing"
)

func TestStatusKiBReadsOneField(t *testing.T) {
	status := []byte("Name:\ttrainstep\nVmHWM:\t  160000 kB\nRssAnon:\t  120000 kB\nRssFile:\t   30000 kB\nVmPeak:\t  bad kB\n")
	tests := []struct {
		field string
		want  int64
	}{{"RssAnon", 120000}, {"RssFile", 30000}, {"VmHWM", 160000}, {"RssShmem", 0}, {"Name", 0}, {"VmPeak", 0}}
	for _, tc := range tests {
		if got := StatusKiB(status, tc.field); got != tc.want {
			t.Errorf("StatusKiB(%s) = %d, want %d", tc.field, got, tc.want)
		}
	}
}

func TestPeakResidentGrowsWithTouchedMemory(t *testing.T) {
	if _, err := os.Stat("/proc/self/status"); err != nil {
		t.Skipf("no /proc here: %v", err)
	}
	before := PeakResident()
	if before <= 0 {
		t.Fatalf("PeakResident = %d with /proc present, want > 0", before)
	}
	// 64 MiB written page by page are resident at once, so the mark rises
	// by about that much.
	block := make([]byte, 64<<20)
	for i := range block {
		if i%4096 == 0 {
			block[i] = 1
		}
	}
	after := PeakResident()
	if after < before+48<<20 {
		t.Errorf("PeakResident went from %d to %d after touching 64 MiB, want at least 48 MiB more", before, after)
	}
	_ = block[len(block)-1]
}
