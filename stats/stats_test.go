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

func TestLowerBoundKnownValues(t *testing.T) {
	for _, c := range []struct {
		k, n int
		want float64
	}{
		{0, 10, 0},
		{1, 10, 0.0051}, // 1 − 0.95^(1/10)
		{5, 10, 0.2224}, // Clopper–Pearson one-sided 95%
		{10, 10, 0.7411},
		{4, 4, 0.4729}, // 0.05^(1/4)
	} {
		got, err := LowerBound(c.k, c.n, 0.95)
		if err != nil {
			t.Fatalf("%d of %d: %v", c.k, c.n, err)
		}
		if math.Abs(got-c.want) > 0.0005 {
			t.Errorf("lower bound of %d in %d = %.4f, want %.4f", c.k, c.n, got, c.want)
		}
		up, _ := UpperBound(c.k, c.n, 0.95)
		if got > float64(c.k)/float64(c.n) || up < float64(c.k)/float64(c.n) {
			t.Errorf("%d in %d: bounds %.4f–%.4f do not hold the observed rate", c.k, c.n, got, up)
		}
	}
	if _, err := LowerBound(3, 2, 0.95); err == nil {
		t.Error("LowerBound(3, 2) accepted")
	}
}

func TestRate(t *testing.T) {
	for _, c := range []struct {
		name        string
		r           Rate
		known       bool
		upper       float64
		lower       float64
		upperWithin float64
	}{
		{"zero in four", Rate{0, 4}, true, 0.5271, 0, 0.0005},
		{"zero in 300", Rate{0, 300}, true, 0.0099, 0, 0.0005},
		{"no trials", Rate{0, 0}, false, 1, 0, 0},
		{"more events than trials", Rate{7, 3}, true, 1, 0.3684, 0.0005}, // capped at 3 in 3: 0.05^(1/3)
	} {
		t.Run(c.name, func(t *testing.T) {
			if c.r.Known() != c.known {
				t.Errorf("Known = %v", c.r.Known())
			}
			if got := c.r.Upper95(); math.Abs(got-c.upper) > c.upperWithin+1e-12 {
				t.Errorf("Upper95 = %.4f, want %.4f", got, c.upper)
			}
			if got := c.r.Lower95(); math.Abs(got-c.lower) > 0.0005 {
				t.Errorf("Lower95 = %.4f, want %.4f", got, c.lower)
			}
		})
	}
	if !math.IsNaN((Rate{}).Observed()) {
		t.Error("0 in 0 has an observed rate")
	}
	clean, dirty := Rate{0, 40}, Rate{12, 40}
	if !dirty.Above(clean) || clean.Above(dirty) {
		t.Errorf("12 in 40 vs 0 in 40: Above = %v / %v", dirty.Above(clean), clean.Above(dirty))
	}
	if (Rate{1, 4}).Above(Rate{0, 4}) {
		t.Error("1 in 4 is not clearly above 0 in 4")
	}
	if (Rate{5, 5}).Above(Rate{}) || (Rate{}).Above(Rate{0, 5}) {
		t.Error("a rate without trials compared")
	}
	if got := clean.Add(dirty); got != (Rate{12, 80}) {
		t.Errorf("Add = %v", got)
	}
}

func TestSpread(t *testing.T) {
	inf := math.Inf(1)
	for _, c := range []struct {
		name string
		xs   []float64
		want Spread
	}{
		{"empty", nil, Spread{}},
		{"odd", []float64{3, 1, 2}, Spread{3, 2, 1, 3}},
		{"even", []float64{4, 1, 3, 2}, Spread{4, 2.5, 1, 4}},
		{"NaN left out", []float64{math.NaN(), 5}, Spread{1, 5, 5, 5}},
		{"never recovered", []float64{1, inf}, Spread{2, inf, 1, inf}},
		{"mostly never", []float64{1, inf, inf}, Spread{3, inf, 1, inf}},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := SpreadOf(c.xs); got != c.want {
				t.Errorf("SpreadOf(%v) = %+v, want %+v", c.xs, got, c.want)
			}
		})
	}
	a, b, c := SpreadOf([]float64{100, 110, 105}), SpreadOf([]float64{120, 130, 125}), SpreadOf([]float64{108, 140, 120})
	if a.Compare(b) != -1 || b.Compare(a) != 1 {
		t.Errorf("separate ranges compare %d / %d", a.Compare(b), b.Compare(a))
	}
	if a.Compare(c) != 0 || c.Compare(b) != 0 {
		t.Error("overlapping ranges were told apart")
	}
	if a.Compare(Spread{}) != 0 {
		t.Error("an empty spread was compared")
	}
}

// TestBoundsOfLargeCounts checks the bounds where counts run to millions
// (overlaps of the noop control per grant): they must be right and
// cheap.
func TestBoundsOfLargeCounts(t *testing.T) {
	// Against the normal approximation, which is good here: p = 0.1,
	// n = 10^7, sd = sqrt(p(1−p)/n); the one-sided 95% bounds sit about
	// 1.645 sd from p.
	k, n := 1_000_000, 10_000_000
	sd := math.Sqrt(0.1 * 0.9 / float64(n))
	up, err := UpperBound(k, n, 0.95)
	if err != nil {
		t.Fatal(err)
	}
	lo, err := LowerBound(k, n, 0.95)
	if err != nil {
		t.Fatal(err)
	}
	if math.Abs(up-(0.1+1.645*sd)) > 0.05*sd || math.Abs(lo-(0.1-1.645*sd)) > 0.05*sd {
		t.Errorf("bounds of 10%% in 10^7: %.7f–%.7f, want about %.7f–%.7f", lo, up, 0.1-1.645*sd, 0.1+1.645*sd)
	}
	// The CDF against a direct sum for a small case.
	for _, c := range []struct {
		k, n int
		p    float64
	}{{3, 40, 0.05}, {0, 10, 0.3}, {7, 9, 0.5}, {20, 100, 0.25}} {
		var direct float64
		for i := 0; i <= c.k; i++ {
			lgN, _ := math.Lgamma(float64(c.n + 1))
			lgI, _ := math.Lgamma(float64(i + 1))
			lgR, _ := math.Lgamma(float64(c.n - i + 1))
			direct += math.Exp(lgN - lgI - lgR + float64(i)*math.Log(c.p) + float64(c.n-i)*math.Log1p(-c.p))
		}
		if got := binomialCDF(c.k, c.n, c.p); math.Abs(got-direct) > 1e-10 {
			t.Errorf("P(X ≤ %d; %d, %v) = %.12f, the sum gives %.12f", c.k, c.n, c.p, got, direct)
		}
	}
}
