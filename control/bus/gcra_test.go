package bus

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/parley-voice/parley/internal/testenv"
)

func TestLimitValidate(t *testing.T) {
	for _, tc := range []struct {
		l  Limit
		ok bool
	}{
		{Limit{Rate: 1, Period: time.Second}, true},
		{Limit{Rate: 100, Period: time.Minute, Burst: 99}, true},
		{Limit{Rate: 1_000_000, Period: time.Second}, true}, // exactly 1µs
		{Limit{Rate: 1, Period: 99 * 365 * 24 * time.Hour}, true},
		{Limit{Rate: 1_000_001, Period: time.Second}, false},
		{Limit{}, false},
		{Limit{Rate: -5, Period: time.Second}, false},
		{Limit{Rate: 1, Period: -1}, false},
		{Limit{Rate: 1, Period: time.Second, Burst: -1}, false},
		{Limit{Rate: 1, Period: time.Second, Burst: math.MaxInt}, false},
		{Limit{Rate: 1, Period: 50 * 365 * 24 * time.Hour, Burst: 1}, true},
		{Limit{Rate: 1, Period: 50 * 365 * 24 * time.Hour, Burst: 2}, false},
	} {
		err := tc.l.Validate()
		if (err == nil) != tc.ok {
			t.Errorf("%+v: Validate() = %v, want ok=%v", tc.l, err, tc.ok)
		}
		if err != nil && !errors.Is(err, ErrInvalid) {
			t.Errorf("%+v: error %v does not wrap ErrInvalid", tc.l, err)
		}
	}
}

func TestGCRAStep(t *testing.T) {
	// T = 10, capacity 3 (tolerance 30).
	for _, tc := range []struct {
		name                       string
		now, tat                   int64
		wantTAT                    int64
		wantOK                     bool
		wantRem, wantRetry, wantRs int64
	}{
		{"idle", 100, 0, 110, true, 2, 0, 10},
		{"idle, stale tat", 100, 50, 110, true, 2, 0, 10},
		{"second", 100, 110, 120, true, 1, 0, 20},
		{"last cell", 100, 120, 130, true, 0, 0, 30},
		{"refused", 100, 130, 130, false, 0, 10, 30},
		{"refused by 1", 109, 130, 130, false, 0, 1, 21},
		{"conforms exactly", 110, 130, 140, true, 0, 0, 30},
		{"half a cell earned floors", 115, 130, 140, true, 0, 0, 25},
	} {
		tat, ok, rem, retry, reset := gcraStep(tc.now, tc.tat, 10, 30)
		if tat != tc.wantTAT || ok != tc.wantOK || rem != tc.wantRem || retry != tc.wantRetry || reset != tc.wantRs {
			t.Errorf("%s: got tat %d ok %v rem %d retry %d reset %d; want %d %v %d %d %d",
				tc.name, tat, ok, rem, retry, reset, tc.wantTAT, tc.wantOK, tc.wantRem, tc.wantRetry, tc.wantRs)
		}
	}
}

// TestGCRAProperties drives gcraStep with random arrivals and checks what a rate limit
// promises: no window of length w admits more than capacity + w/T requests; a refused
// request would pass exactly RetryAfter later and not a unit sooner; and Remaining requests
// in a row do pass.
func TestGCRAProperties(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for range 200 {
		interval := int64(1 + rng.IntN(50))
		capacity := int64(1 + rng.IntN(10))
		tol := interval * capacity
		var tat, now int64 = 0, 1000
		var admitted []int64
		for range 300 {
			now += int64(rng.IntN(int(2 * interval)))
			newTAT, ok, rem, retry, reset := gcraStep(now, tat, interval, tol)
			if ok {
				admitted = append(admitted, now)
				tat = newTAT
				// Remaining more requests right now pass; one more does not.
				probe := tat
				for i := range rem + 1 {
					var pass bool
					probe, pass, _, _, _ = gcraStep(now, probe, interval, tol)
					if pass != (i < rem) {
						t.Fatalf("T=%d cap=%d: Remaining %d but request %d after it passed=%v", interval, capacity, rem, i+1, pass)
					}
				}
				if reset != tat-now || reset > tol {
					t.Fatalf("ResetAfter %d, tat-now %d, tolerance %d", reset, tat-now, tol)
				}
				continue
			}
			if retry <= 0 || retry > interval {
				t.Fatalf("refused with RetryAfter %d (T=%d)", retry, interval)
			}
			if _, pass, _, _, _ := gcraStep(now+retry-1, tat, interval, tol); pass {
				t.Fatalf("passes before RetryAfter")
			}
			if _, pass, _, _, _ := gcraStep(now+retry, tat, interval, tol); !pass {
				t.Fatalf("refused at RetryAfter")
			}
		}
		for i := range admitted {
			for j := i; j < len(admitted); j++ {
				w := admitted[j] - admitted[i]
				if n := int64(j - i + 1); n > capacity+w/interval {
					t.Fatalf("T=%d cap=%d: %d requests admitted within %d", interval, capacity, n, w)
				}
			}
		}
	}
}

// TestGCRAScriptMatchesGo runs the Lua script (with the clock passed in) and gcraStep on the
// same random arrivals and requires identical decisions.
func TestGCRAScriptMatchesGo(t *testing.T) {
	url := testenv.RedisURL(t)
	o, err := redis.ParseURL(url)
	if err != nil {
		t.Fatal(err)
	}
	c := redis.NewClient(o)
	defer c.Close()
	ctx := t.Context()
	key := fmt.Sprintf("parleytest:gcra-equivalence:%x", rand.Uint64())
	defer c.Del(context.Background(), key)

	rng := rand.New(rand.NewPCG(3, 4))
	const interval, capacity = int64(time.Second / time.Microsecond), 4 // ≥ 1s: PX outlives a slow test machine
	tol := interval * capacity
	now := time.Now().UnixMicro()
	var tat int64
	for i := range 200 {
		now += rng.Int64N(2 * interval)
		v, err := allowScript.Run(ctx, c, []string{key}, interval, tol, now).Int64Slice()
		if err != nil {
			t.Fatal(err)
		}
		newTAT, ok, rem, retry, reset := gcraStep(now, tat, interval, tol)
		if ok {
			tat = newTAT
		}
		want := []int64{0, rem, retry, reset}
		if ok {
			want[0] = 1
		}
		if len(v) != 4 || v[0] != want[0] || v[1] != want[1] || v[2] != want[2] || v[3] != want[3] {
			t.Fatalf("step %d: script %v, Go %v", i, v, want)
		}
	}
}

func BenchmarkGCRAStep(b *testing.B) {
	b.ReportAllocs()
	var tat int64
	now := int64(0)
	for b.Loop() {
		now += 7
		tat, _, _, _, _ = gcraStep(now, tat, 10, 1000)
	}
}
