package api

import (
	"testing"
)

func TestParseRange(t *testing.T) {
	cases := []struct {
		h           string
		size        int64
		first, last int64
		partial     bool
		bad         bool
	}{
		{"", 100, 0, 99, false, false},
		{"bytes=0-9", 100, 0, 9, true, false},
		{"bytes=90-", 100, 90, 99, true, false},
		{"bytes=-10", 100, 90, 99, true, false},
		{"bytes=-200", 100, 0, 99, true, false},
		{"bytes=50-500", 100, 50, 99, true, false},
		{"bytes=100-", 100, 0, 0, false, true},
		{"bytes=-0", 100, 0, 0, false, true},
		{"bytes=0-1,5-6", 100, 0, 99, false, false},
		{"items=0-1", 100, 0, 99, false, false},
		{"bytes=9-2", 100, 0, 99, false, false},
		{"bytes=x-y", 100, 0, 99, false, false},
	}
	for _, c := range cases {
		first, last, partial, err := parseRange(c.h, c.size)
		if (err != nil) != c.bad || err == nil && (first != c.first || last != c.last || partial != c.partial) {
			t.Errorf("parseRange(%q, %d) = %d, %d, %v, %v", c.h, c.size, first, last, partial, err)
		}
	}
}

func FuzzParseRange(f *testing.F) {
	for _, s := range []string{"bytes=0-9", "bytes=-5", "bytes=7-", "bytes=1-2,3-4", "bytes=--1", "bytes=99999999999999999999-"} {
		f.Add(s, int64(100))
	}
	f.Fuzz(func(t *testing.T, h string, size int64) {
		if size <= 0 || size > 1<<40 {
			return
		}
		first, last, _, err := parseRange(h, size)
		if err == nil && (first < 0 || last >= size || first > last) {
			t.Fatalf("parseRange(%q, %d) = %d-%d", h, size, first, last)
		}
	})
}
