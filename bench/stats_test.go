package bench

import (
	"math"
	"testing"
	"time"
)

func TestPercentile(t *testing.T) {
	xs := []float64{15, 20, 35, 40, 50}
	cases := []struct {
		p, want float64
	}{
		{0, 15}, {100, 50}, {50, 35}, {25, 20}, {75, 40}, {40, 29}, {90, 46}, {99, 49.6},
	}
	for _, c := range cases {
		if got := Percentile(xs, c.p); math.Abs(got-c.want) > 1e-9 {
			t.Errorf("Percentile(%v, %v) = %v, want %v", xs, c.p, got, c.want)
		}
	}
	if got := Percentile([]float64{1, 2, 3, 4}, 50); got != 2.5 {
		t.Errorf("median of an even sample = %v, want 2.5", got)
	}
	if got := Percentile([]float64{7}, 99); got != 7 {
		t.Errorf("percentile of one value = %v, want 7", got)
	}
	for _, bad := range []float64{-1, 101, math.NaN()} {
		if got := Percentile(xs, bad); !math.IsNaN(got) {
			t.Errorf("Percentile(p=%v) = %v, want NaN", bad, got)
		}
	}
	if got := Percentile(nil, 50); !math.IsNaN(got) {
		t.Errorf("Percentile(empty) = %v, want NaN", got)
	}
}

func TestPercentileIgnoresOrderAndNaN(t *testing.T) {
	xs := []float64{50, math.NaN(), 15, math.Inf(1), 40, 20, 35}
	if got := Percentile(xs, 50); got != 35 {
		t.Errorf("median = %v, want 35", got)
	}
	if xs[0] != 50 || xs[2] != 15 {
		t.Errorf("the input was modified: %v", xs)
	}
}

func TestSummarize(t *testing.T) {
	var xs []float64
	for i := 1; i <= 1000; i++ {
		xs = append(xs, float64(i))
	}
	s := Summarize(xs)
	if s.N != 1000 || s.Min != 1 || s.Max != 1000 || s.Mean != 500.5 {
		t.Fatalf("summary %+v", s)
	}
	for _, c := range []struct {
		name      string
		got, want float64
	}{{"p50", s.P50, 500.5}, {"p90", s.P90, 900.1}, {"p95", s.P95, 950.05}, {"p99", s.P99, 990.01}} {
		if math.Abs(c.got-c.want) > 1e-9 {
			t.Errorf("%s = %v, want %v", c.name, c.got, c.want)
		}
	}
	if z := Summarize(nil); z.N != 0 {
		t.Errorf("empty summary %+v", z)
	}
}

func TestMs(t *testing.T) {
	if got := Ms(1500 * time.Microsecond); got != 1.5 {
		t.Errorf("Ms = %v", got)
	}
}

func TestCDF(t *testing.T) {
	pts := CDF([]float64{3, 1, 2, 2}, 0)
	want := []CDFPoint{{1, 0.25}, {2, 0.75}, {3, 1}}
	if len(pts) != len(want) {
		t.Fatalf("CDF = %v, want %v", pts, want)
	}
	for i := range want {
		if pts[i] != want[i] {
			t.Errorf("point %d = %v, want %v", i, pts[i], want[i])
		}
	}
	if CDF(nil, 10) != nil {
		t.Error("CDF of nothing is not nil")
	}
}

func TestCDFThinning(t *testing.T) {
	var xs []float64
	for i := 0; i < 5000; i++ {
		xs = append(xs, float64((i*7919)%5000))
	}
	pts := CDF(xs, 100)
	if len(pts) > 100 || len(pts) < 90 {
		t.Fatalf("thinned to %d points", len(pts))
	}
	if pts[0].X != 0 || pts[len(pts)-1].X != 4999 || pts[len(pts)-1].F != 1 {
		t.Errorf("ends %v … %v", pts[0], pts[len(pts)-1])
	}
	for i := 1; i < len(pts); i++ {
		if pts[i].X <= pts[i-1].X || pts[i].F <= pts[i-1].F {
			t.Fatalf("not increasing at %d: %v then %v", i, pts[i-1], pts[i])
		}
	}
}
