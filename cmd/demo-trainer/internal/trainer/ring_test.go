package trainer

import (
	"bytes"
	"context"
	"math"
	"math/rand/v2"
	"net"
	"strings"
	"sync"
	"testing"
	"time"
)

// freePort asks the kernel for a port that is free right now.
func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// formRing runs the rendezvous for world ranks in this process over real
// loopback TCP, each rank with the settings adjust gives it.
func formRing(t *testing.T, world int, adjust func(rank int, s *Settings)) ([]*Ring, []Settings) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	port := freePort(t)
	rings, agreed, errs := make([]*Ring, world), make([]Settings, world), make([]error, world)
	var wg sync.WaitGroup
	// Start the highest rank first, so the others must retry reaching rank 0.
	for rank := world - 1; rank >= 0; rank-- {
		s := DefaultSettings()
		s.ConnectTimeout = 10 * time.Second
		if adjust != nil {
			adjust(rank, &s)
		}
		env := PyTorchEnv{MasterAddr: "127.0.0.1", MasterPort: port, Rank: rank, WorldSize: world}
		wg.Add(1)
		go func() {
			defer wg.Done()
			rings[rank], agreed[rank], errs[rank] = JoinRing(ctx, s, env, NewLogger(&bytes.Buffer{}))
		}()
	}
	wg.Wait()
	for rank, err := range errs {
		if err != nil {
			t.Fatalf("rank %d joining: %v", rank, err)
		}
	}
	t.Cleanup(func() {
		for _, r := range rings {
			r.Close()
		}
	})
	return rings, agreed
}

func allReduceEverywhere(rings []*Ring, vectors [][]float64) []error {
	errs := make([]error, len(rings))
	var wg sync.WaitGroup
	for rank, r := range rings {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			errs[rank] = r.AllReduce(ctx, vectors[rank])
		}()
	}
	wg.Wait()
	return errs
}

func TestRingAllReduceSumsOverRealTCP(t *testing.T) {
	for _, world := range []int{1, 2, 3, 4, 7} {
		rings, _ := formRing(t, world, nil)
		// Several lengths on one ring: shorter than the ring (empty chunks),
		// uneven chunks, and large enough to exceed socket buffers.
		for _, length := range []int{0, 1, 5, 15, 1000, 300_000} {
			rng := rand.New(rand.NewPCG(uint64(world), uint64(length)))
			vectors := make([][]float64, world)
			want := make([]float64, length)
			for rank := range vectors {
				vectors[rank] = make([]float64, length)
				for i := range vectors[rank] {
					vectors[rank][i] = rng.NormFloat64() * 100
					want[i] += vectors[rank][i]
				}
			}
			for rank, err := range allReduceEverywhere(rings, vectors) {
				if err != nil {
					t.Fatalf("world %d length %d: rank %d: %v", world, length, rank, err)
				}
			}
			for i := range want {
				if math.Abs(vectors[0][i]-want[i]) > 1e-9*math.Max(1, math.Abs(want[i])) {
					t.Fatalf("world %d length %d: element %d is %v, the plain sum %v", world, length, i, vectors[0][i], want[i])
				}
				for rank := 1; rank < world; rank++ {
					if math.Float64bits(vectors[rank][i]) != math.Float64bits(vectors[0][i]) {
						t.Fatalf("world %d length %d: element %d differs between rank 0 (%v) and rank %d (%v)",
							world, length, i, vectors[0][i], rank, vectors[rank][i])
					}
				}
			}
		}
	}
}

func TestRingAllReduceIsExactOnIntegers(t *testing.T) {
	const world = 5
	rings, _ := formRing(t, world, nil)
	vectors := make([][]float64, world)
	for rank := range vectors {
		vectors[rank] = []float64{float64(rank), 1, float64(rank * rank), -3, 1e6}
	}
	allReduceEverywhere(rings, vectors)
	want := []float64{10, 5, 30, -15, 5e6}
	for rank, v := range vectors {
		for i := range want {
			if v[i] != want[i] {
				t.Errorf("rank %d: %v, want %v", rank, v, want)
				break
			}
		}
	}
}

func TestRingUsesRankZeroSettings(t *testing.T) {
	_, agreed := formRing(t, 3, func(rank int, s *Settings) {
		s.Steps = 100 + rank
		s.LR = 0.01 * float64(rank+1)
		s.StepDelay = time.Duration(rank) * time.Millisecond
	})
	for rank, s := range agreed {
		if s.Steps != 100 || s.LR != 0.01 {
			t.Errorf("rank %d trains with steps %d lr %v, rank 0 said 100 and 0.01", rank, s.Steps, s.LR)
		}
		if s.StepDelay != time.Duration(rank)*time.Millisecond {
			t.Errorf("rank %d lost its own step delay: %v", rank, s.StepDelay)
		}
	}
}

func TestDeadRankFailsTheRingInsteadOfHanging(t *testing.T) {
	rings, _ := formRing(t, 3, nil)
	rings[2].Close()
	vectors := [][]float64{{1, 2, 3}, {4, 5, 6}}
	start := time.Now()
	errs := allReduceEverywhere(rings[:2], vectors)
	for rank, err := range errs {
		if err == nil {
			t.Errorf("rank %d all-reduced without rank 2", rank)
		}
	}
	if elapsed := time.Since(start); elapsed > 5*time.Second {
		t.Errorf("the ranks took %v to notice rank 2 was gone", elapsed)
	}
}

func TestRendezvousRejectsMismatchedWorldSize(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	port := freePort(t)
	s := DefaultSettings()
	s.ConnectTimeout = 5 * time.Second
	errs := make(chan error, 2)
	go func() {
		_, _, err := JoinRing(ctx, s, PyTorchEnv{MasterAddr: "127.0.0.1", MasterPort: port, Rank: 0, WorldSize: 2}, NewLogger(&bytes.Buffer{}))
		errs <- err
	}()
	_, _, err := JoinRing(ctx, s, PyTorchEnv{MasterAddr: "127.0.0.1", MasterPort: port, Rank: 1, WorldSize: 3}, NewLogger(&bytes.Buffer{}))
	if err == nil || !strings.Contains(err.Error(), "WORLD_SIZE") {
		t.Errorf("rank 1 with the wrong WORLD_SIZE: err = %v, want one naming WORLD_SIZE", err)
	}
	if err := <-errs; err == nil || !strings.Contains(err.Error(), "WORLD_SIZE") {
		t.Errorf("rank 0: err = %v, want one naming WORLD_SIZE", err)
	}
}
