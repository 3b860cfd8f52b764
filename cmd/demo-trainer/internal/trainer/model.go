package trainer

import (
	"math"
	"math/rand/v2"
)

// noiseStdDev is the standard deviation of the label noise: small enough
// that the best reachable loss is far below 1% of the starting loss.
const noiseStdDev = 0.01

// Dataset is a design matrix and its labels, stored row-major.
type Dataset struct {
	Features int
	X        []float64 // len(Y) rows of Features values
	Y        []float64
}

// Samples is the number of rows.
func (d Dataset) Samples() int { return len(d.Y) }

func (d Dataset) row(i int) []float64 { return d.X[i*d.Features : (i+1)*d.Features] }

// Generate builds the synthetic regression problem y = X·w* + noise. The
// same seed gives the same dataset in every process, which is how replicas
// agree on the data without exchanging it.
func Generate(seed uint64, samples, features int) (data Dataset, trueWeights []float64) {
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	trueWeights = make([]float64, features)
	for j := range trueWeights {
		trueWeights[j] = rng.NormFloat64()
	}
	data = Dataset{Features: features, X: make([]float64, samples*features), Y: make([]float64, samples)}
	for i := range samples {
		row := data.row(i)
		for j := range row {
			row[j] = rng.NormFloat64()
		}
		data.Y[i] = dot(row, trueWeights) + noiseStdDev*rng.NormFloat64()
	}
	return data, trueWeights
}

// Shard returns the rows a rank of world trains on: every world-th row
// starting at rank, so shards are disjoint and cover the dataset.
func (d Dataset) Shard(rank, world int) Dataset {
	shard := Dataset{Features: d.Features}
	for i := rank; i < d.Samples(); i += world {
		shard.X = append(shard.X, d.row(i)...)
		shard.Y = append(shard.Y, d.Y[i])
	}
	return shard
}

// PartialSums are the additive pieces of the mean-squared-error loss and its
// gradient over some rows. Sums from disjoint shards add up to the sums over
// their union, which is what makes data parallelism exact.
type PartialSums struct {
	Gradient     []float64 // Σ 2·(x·w − y)·x
	SquaredError float64   // Σ (x·w − y)²
	Count        float64   // number of rows
}

// Sums computes the partial sums of d at weights w.
func (d Dataset) Sums(w []float64) PartialSums {
	sums := PartialSums{Gradient: make([]float64, d.Features), Count: float64(d.Samples())}
	for i := range d.Samples() {
		row := d.row(i)
		residual := dot(row, w) - d.Y[i]
		sums.SquaredError += residual * residual
		for j, x := range row {
			sums.Gradient[j] += 2 * residual * x
		}
	}
	return sums
}

// Loss is the mean squared error the sums describe.
func (s PartialSums) Loss() float64 {
	if s.Count == 0 {
		return math.NaN()
	}
	return s.SquaredError / s.Count
}

// MeanGradient is the gradient of Loss.
func (s PartialSums) MeanGradient() []float64 {
	g := make([]float64, len(s.Gradient))
	for j, v := range s.Gradient {
		g[j] = v / s.Count
	}
	return g
}

// Loss is the mean squared error of w over the whole dataset.
func (d Dataset) Loss(w []float64) float64 { return d.Sums(w).Loss() }

func dot(a, b []float64) float64 {
	var s float64
	for i := range a {
		s += a[i] * b[i]
	}
	return s
}
