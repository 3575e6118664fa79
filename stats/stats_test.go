package stats

import (
	"math"
	"testing"
)

func TestUpperBoundKnownValues(t *testing.T) {
	for _, c := range []struct {
		k, n int
		want float64
	}{
		{0, 4, 0.5271},   // 1 − 0.05^(1/4)
		{0, 300, 0.0099}, // 1 − 0.05^(1/300)
		{0, 1, 0.95},
		{1, 10, 0.3942}, // Clopper–Pearson one-sided 95%, from tables
		{5, 10, 0.7778},
		{10, 10, 1},
	} {
		got, err := UpperBound(c.k, c.n, 0.95)
		if err != nil {
			t.Fatalf("%d of %d: %v", c.k, c.n, err)
		}
		if math.Abs(got-c.want) > 0.0005 {
			t.Errorf("upper bound of %d in %d = %.4f, want %.4f", c.k, c.n, got, c.want)
		}
	}
}

func TestUpperBoundBadInput(t *testing.T) {
	for _, c := range []struct {
		k, n int
		conf float64
	}{{0, 0, 0.95}, {-1, 3, 0.95}, {4, 3, 0.95}, {0, 3, 1}, {0, 3, 0}, {0, 3, math.NaN()}} {
		if _, err := UpperBound(c.k, c.n, c.conf); err == nil {
			t.Errorf("UpperBound(%d, %d, %v) accepted", c.k, c.n, c.conf)
		}
	}
	if got := Upper95(0, 0); got != 1 {
		t.Errorf("Upper95 without trials = %v, want 1 (no bound)", got)
	}
}
