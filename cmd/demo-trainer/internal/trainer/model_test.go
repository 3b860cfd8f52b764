package trainer

import (
	"math"
	"slices"
	"testing"
)

func TestGradientMatchesFiniteDifferences(t *testing.T) {
	data, trueWeights := Generate(7, 300, 5)
	cases := []struct {
		name    string
		weights []float64
	}{
		{"zero weights", make([]float64, 5)},
		{"true weights", trueWeights},
		{"arbitrary weights", []float64{0.3, -2, 1.5, 0, 4}},
	}
	const h = 1e-6
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			gradient := data.Sums(tc.weights).MeanGradient()
			for j := range tc.weights {
				up, down := slices.Clone(tc.weights), slices.Clone(tc.weights)
				up[j] += h
				down[j] -= h
				numeric := (data.Loss(up) - data.Loss(down)) / (2 * h)
				if math.Abs(numeric-gradient[j]) > 1e-5*math.Max(1, math.Abs(numeric)) {
					t.Errorf("d loss / d w[%d] = %v analytically, %v numerically", j, gradient[j], numeric)
				}
			}
		})
	}
}

func TestShardsPartitionTheDataset(t *testing.T) {
	data, _ := Generate(3, 1001, 4)
	weights := []float64{1, -1, 0.5, 2}
	whole := data.Sums(weights)
	for _, world := range []int{1, 2, 3, 7} {
		var total PartialSums
		total.Gradient = make([]float64, 4)
		for rank := range world {
			part := data.Shard(rank, world).Sums(weights)
			total.SquaredError += part.SquaredError
			total.Count += part.Count
			for j, g := range part.Gradient {
				total.Gradient[j] += g
			}
		}
		if total.Count != whole.Count {
			t.Errorf("world %d: shards hold %v rows, dataset %v", world, total.Count, whole.Count)
		}
		if !nearlyEqual(total.SquaredError, whole.SquaredError) {
			t.Errorf("world %d: shard squared errors add to %v, whole dataset %v", world, total.SquaredError, whole.SquaredError)
		}
		for j := range whole.Gradient {
			if !nearlyEqual(total.Gradient[j], whole.Gradient[j]) {
				t.Errorf("world %d: shard gradients add to %v at %d, whole dataset %v", world, total.Gradient[j], j, whole.Gradient[j])
			}
		}
	}
}

func TestGenerateIsDeterministicPerSeed(t *testing.T) {
	a, wa := Generate(42, 50, 3)
	b, wb := Generate(42, 50, 3)
	c, _ := Generate(43, 50, 3)
	if !slices.Equal(a.X, b.X) || !slices.Equal(a.Y, b.Y) || !slices.Equal(wa, wb) {
		t.Error("the same seed gave two different datasets")
	}
	if slices.Equal(a.Y, c.Y) {
		t.Error("different seeds gave the same labels")
	}
	// The labels follow the true weights up to the small noise.
	if loss := a.Loss(wa); loss > 10*noiseStdDev*noiseStdDev {
		t.Errorf("loss at the true weights is %v, want about %v", loss, noiseStdDev*noiseStdDev)
	}
}

func nearlyEqual(a, b float64) bool { return math.Abs(a-b) <= 1e-9*math.Max(1, math.Abs(b)) }
