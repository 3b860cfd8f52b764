package bench

import (
	"testing"
	"time"
)

func TestParseProcessStatReadsTheNameAndBothCPUTimes(t *testing.T) {
	// A name with a space and a parenthesis, as a process may set.
	stat := "4242 (kube-apiserver) x) S 1 4242 4242 0 -1 4194560 5000 0 0 0 250 37 0 0 20 0 12 0 100 0 0"
	name, used, kernel, err := parseProcessStat(stat)
	if err != nil {
		t.Fatal(err)
	}
	if name != "kube-apiserver) x" || used != 2870*time.Millisecond || kernel {
		t.Fatalf("got %q %v kernel %v, want \"kube-apiserver) x\" 2.87s, not the kernel's", name, used, kernel)
	}
	kworker := "77 (kworker/1:0-events) I 2 0 0 0 -1 69238880 0 0 0 0 148 0 0 0 20 0 1 0 9 0 0"
	if _, _, kernel, err := parseProcessStat(kworker); err != nil || !kernel {
		t.Fatalf("a kworker: kernel %v, err %v; want a kernel thread", kernel, err)
	}
	if _, _, _, err := parseProcessStat("4242 (short) S 1"); err == nil {
		t.Fatal("a line without CPU times parsed")
	}
}

func TestProcessCPUSinceKeepsWhatGrew(t *testing.T) {
	prev := ProcessCPU{"etcd": time.Second, "kwok": time.Second}
	now := ProcessCPU{"etcd": 1500 * time.Millisecond, "kwok": time.Second, "trainstep": 300 * time.Millisecond}
	if got, want := now.Since(prev).String(), "etcd 0.50s, trainstep 0.30s"; got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
}
