package store

import (
	"encoding/json"
	"math/rand/v2"
	"sort"
	"strings"
	"testing"
	"time"
)

func TestTimeCol(t *testing.T) {
	zone := time.FixedZone("X", -5*3600)
	want := time.Date(2030, 1, 2, 3, 4, 5, 123456000, time.UTC)
	cases := []struct {
		name string
		src  any
		ok   bool
	}{
		{"time in another zone", want.In(zone), true},
		{"sqlite text", "2030-01-02T03:04:05.123456Z", true},
		{"bytes", []byte("2030-01-02T03:04:05.123456Z"), true},
		{"offset text", "2030-01-01T22:04:05.123456-05:00", true},
		{"garbage", "yesterday", false},
		{"integer", int64(5), false},
		{"null", nil, false},
	}
	for _, c := range cases {
		var got time.Time
		err := timeCol{&got}.Scan(c.src)
		if c.ok != (err == nil) {
			t.Errorf("%s: err = %v", c.name, err)
			continue
		}
		if c.ok && (!got.Equal(want) || got.Location() != time.UTC) {
			t.Errorf("%s: got %v, want %v in UTC", c.name, got, want)
		}
	}
	var p *time.Time = &want
	if err := (nullTimeCol{&p}).Scan(nil); err != nil || p != nil {
		t.Errorf("null time: %v, %v", p, err)
	}
	if err := (nullTimeCol{&p}).Scan("2030-01-02T03:04:05.123456Z"); err != nil || p == nil || !p.Equal(want) {
		t.Errorf("non-null time: %v, %v", p, err)
	}
}

// TestTSSortsLikeTime checks the stored text form: fixed width, and ordered as the times are.
func TestTSSortsLikeTime(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	times := make([]time.Time, 500)
	for i := range times {
		times[i] = time.Unix(r.Int64N(1<<35), r.Int64N(1e9)).In(time.FixedZone("", int(r.Int64N(20)-10)*3600))
	}
	texts := make([]string, len(times))
	for i, tm := range times {
		texts[i] = ts(tm)
		if len(texts[i]) != len(tsLayout) {
			t.Fatalf("ts(%v) = %q is not fixed width", tm, texts[i])
		}
	}
	sort.Slice(times, func(i, j int) bool { return times[i].Before(times[j]) })
	sort.Strings(texts)
	for i := range times {
		if ts(times[i]) != texts[i] {
			t.Fatalf("order differs at %d: %s vs %s", i, ts(times[i]), texts[i])
		}
	}
	if got := ts(time.Date(2030, 1, 2, 3, 4, 5, 999999999, time.UTC)); got != "2030-01-02T03:04:05.999999Z" {
		t.Fatalf("ts truncates to %q", got)
	}
}

func TestNullArgs(t *testing.T) {
	if nullTS(nil) != nil || nullText(ProjectID("")) != nil || nullText(Mode("live")) != "live" {
		t.Fatal("null argument helpers")
	}
	var p ProjectID = "x"
	if err := (nullTextCol[ProjectID]{&p}).Scan(nil); err != nil || p != "" {
		t.Fatalf("null text: %q %v", p, err)
	}
	if err := (nullTextCol[ProjectID]{&p}).Scan([]byte("y")); err != nil || p != "y" {
		t.Fatalf("bytes text: %q %v", p, err)
	}
	if err := (nullTextCol[ProjectID]{&p}).Scan(3.5); err == nil {
		t.Fatal("float scanned as text")
	}
}

func TestJSONCol(t *testing.T) {
	var list []string
	if err := (jsonCol{&list}).Scan(`["a","b"]`); err != nil || strings.Join(list, ",") != "a,b" {
		t.Fatalf("list = %v, %v", list, err)
	}
	var raw json.RawMessage
	src := []byte(`{"a": 1}`)
	if err := (jsonCol{&raw}).Scan(src); err != nil || string(raw) != `{"a": 1}` {
		t.Fatalf("raw = %s, %v", raw, err)
	}
	src[2] = 'X' // the driver may reuse its buffer: raw must hold a copy
	if string(raw) != `{"a": 1}` {
		t.Fatal("jsonCol kept the driver's buffer")
	}
	if err := (jsonCol{&list}).Scan(42); err == nil {
		t.Fatal("an integer scanned as JSON")
	}
	if err := (jsonCol{&list}).Scan(`{`); err == nil {
		t.Fatal("broken JSON scanned")
	}
}

func TestCheckName(t *testing.T) {
	for name, ok := range map[string]bool{
		"Acme":                    true,
		"Ünïcödé":                 true,
		strings.Repeat("é", 120):  true,
		strings.Repeat("é", 121):  false,
		"":                        false,
		" Acme":                   false,
		"Acme\t":                  false,
		"Ac\u0000me":              false,
		"Ac\u007fme":              false,
		"\xff":                    false,
		"two  spaces inside okay": true,
	} {
		if err := checkName("org", name); (err == nil) != ok {
			t.Errorf("checkName(%q) = %v, want ok=%v", name, err, ok)
		}
	}
}

func TestClampLimit(t *testing.T) {
	for in, want := range map[int]int{-1: 100, 0: 100, 1: 1, 100: 100, 1000: 1000, 1001: 1000} {
		if got := clampLimit(in); got != want {
			t.Errorf("clampLimit(%d) = %d, want %d", in, got, want)
		}
	}
}
