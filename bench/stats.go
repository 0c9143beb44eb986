package bench

import (
	"math"
	"slices"
	"time"
)

// Summary describes a sample of durations in milliseconds: count, extremes, mean and the
// percentiles the reports show. The zero Summary (N == 0) means "nothing measured"; its other
// fields are then meaningless and reports print a dash.
type Summary struct {
	N    int     `json:"n"`
	Min  float64 `json:"min_ms"`
	Mean float64 `json:"mean_ms"`
	P50  float64 `json:"p50_ms"`
	P90  float64 `json:"p90_ms"`
	P95  float64 `json:"p95_ms"`
	P99  float64 `json:"p99_ms"`
	Max  float64 `json:"max_ms"`
}

// Ms converts a duration to milliseconds.
func Ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// Summarize returns the Summary of xs (milliseconds). NaN and infinite values are left out. xs
// is not modified.
func Summarize(xs []float64) Summary {
	s := sortedFinite(xs)
	if len(s) == 0 {
		return Summary{}
	}
	var sum float64
	for _, v := range s {
		sum += v
	}
	return Summary{
		N: len(s), Min: s[0], Max: s[len(s)-1], Mean: sum / float64(len(s)),
		P50: percentileSorted(s, 50), P90: percentileSorted(s, 90), P95: percentileSorted(s, 95),
		P99: percentileSorted(s, 99),
	}
}

// Percentile returns the p-th percentile (0–100) of xs by linear interpolation between the
// closest ranks (the "R-7" definition, numpy's default): p=0 is the minimum, p=100 the
// maximum, p=50 of an even-sized sample the mean of its two middle values. It returns NaN for
// an empty sample or a p outside 0–100.
func Percentile(xs []float64, p float64) float64 {
	if p < 0 || p > 100 || math.IsNaN(p) {
		return math.NaN()
	}
	s := sortedFinite(xs)
	if len(s) == 0 {
		return math.NaN()
	}
	return percentileSorted(s, p)
}

func percentileSorted(s []float64, p float64) float64 {
	if len(s) == 1 {
		return s[0]
	}
	h := p / 100 * float64(len(s)-1)
	lo := int(math.Floor(h))
	if lo >= len(s)-1 {
		return s[len(s)-1]
	}
	return s[lo] + (h-float64(lo))*(s[lo+1]-s[lo])
}

func sortedFinite(xs []float64) []float64 {
	s := make([]float64, 0, len(xs))
	for _, v := range xs {
		if !math.IsNaN(v) && !math.IsInf(v, 0) {
			s = append(s, v)
		}
	}
	slices.Sort(s)
	return s
}

// CDFPoint is one step of an empirical cumulative distribution: the fraction F of the sample
// at or below X.
type CDFPoint struct {
	X float64 `json:"x"`
	F float64 `json:"f"`
}

// CDF returns the empirical distribution function of xs as at most maxPoints points with
// increasing X and F, the last at F = 1. A sample larger than maxPoints is thinned evenly by
// rank, always keeping the minimum and the maximum. maxPoints < 2 means no limit.
func CDF(xs []float64, maxPoints int) []CDFPoint {
	s := sortedFinite(xs)
	n := len(s)
	if n == 0 {
		return nil
	}
	// One point per distinct value: the fraction at or below it.
	var all []CDFPoint
	for i := 0; i < n; i++ {
		if i+1 < n && s[i+1] == s[i] {
			continue
		}
		all = append(all, CDFPoint{X: s[i], F: float64(i+1) / float64(n)})
	}
	if maxPoints < 2 || len(all) <= maxPoints {
		return all
	}
	out := make([]CDFPoint, 0, maxPoints)
	for k := 0; k < maxPoints; k++ {
		i := int(math.Round(float64(k) * float64(len(all)-1) / float64(maxPoints-1)))
		if len(out) > 0 && out[len(out)-1] == all[i] {
			continue
		}
		out = append(out, all[i])
	}
	return out
}
