package app

import (
	"encoding/json"
	"testing"
	"time"
)

func TestTimeAlwaysSixDigits(t *testing.T) {
	cases := map[time.Time]string{
		time.Date(2026, 11, 26, 10, 0, 0, 0, time.UTC):           `"2026-11-26T10:00:00.000000Z"`,
		time.Date(2026, 11, 26, 10, 0, 0, 120_000_000, time.UTC): `"2026-11-26T10:00:00.120000Z"`,
		time.Date(2026, 11, 26, 10, 0, 0, 123_456_789, time.UTC): `"2026-11-26T10:00:00.123456Z"`,
		time.Date(2026, 11, 26, 10, 0, 0, 999_999_999, time.UTC): `"2026-11-26T10:00:00.999999Z"`,
	}
	for in, want := range cases {
		b, err := json.Marshal(T(in))
		if err != nil || string(b) != want {
			t.Errorf("%v: %s, %v; want %s", in, b, err, want)
		}
	}
	paris := time.FixedZone("CET", 3600)
	b, _ := json.Marshal(Time{time.Date(2026, 11, 1, 0, 0, 0, 0, paris)})
	if string(b) != `"2026-11-01T00:00:00.000000+01:00"` {
		t.Errorf("zone kept: %s", b)
	}
	if b, _ := json.Marshal(T(time.Date(2026, 11, 1, 0, 0, 0, 0, paris))); string(b) != `"2026-10-31T23:00:00.000000Z"` {
		t.Errorf("T converts to UTC: %s", b)
	}
}

func TestTimeRoundTripAndNull(t *testing.T) {
	var v struct {
		A Time  `json:"a"`
		B *Time `json:"b"`
	}
	if err := json.Unmarshal([]byte(`{"a":"2026-11-26T10:00:00.5Z","b":null}`), &v); err != nil {
		t.Fatal(err)
	}
	if !v.A.Equal(time.Date(2026, 11, 26, 10, 0, 0, 500_000_000, time.UTC)) || v.B != nil {
		t.Fatalf("%v %v", v.A, v.B)
	}
	if TP(nil) != nil || TP(&time.Time{}) != nil {
		t.Fatal("TP of nil or zero must be nil")
	}
}
