package store

import (
	"errors"
	"testing"

	"github.com/google/uuid"
)

func TestParseID(t *testing.T) {
	const canon = "0190a6f0-1234-7abc-8def-0123456789ab"
	cases := []struct {
		in, want string
		ok       bool
	}{
		{canon, canon, true},
		{"0190A6F0-1234-7ABC-8DEF-0123456789AB", canon, true},
		{"{" + canon + "}", canon, true},
		{"urn:uuid:" + canon, canon, true},
		{"0190a6f012347abc8def0123456789ab", canon, true},
		{"", "", false},
		{"acme", "", false},
		{canon[:35], "", false},
		{canon + "0", "", false},
		{"0190a6f0-1234-7abc-8def-0123456789ag", "", false},
	}
	for _, c := range cases {
		got, err := ParseID[ProjectID](c.in)
		if c.ok != (err == nil) || string(got) != c.want {
			t.Errorf("ParseID(%q) = %q, %v; want %q ok=%v", c.in, got, err, c.want, c.ok)
		}
		if err != nil && !errors.Is(err, ErrInvalid) {
			t.Errorf("ParseID(%q) error %v does not wrap ErrInvalid", c.in, err)
		}
	}
}

func TestValidID(t *testing.T) {
	for s, want := range map[string]bool{
		"0190a6f0-1234-7abc-8def-0123456789ab":   true,
		"0190A6F0-1234-7ABC-8DEF-0123456789AB":   false, // must be canonical
		"{0190a6f0-1234-7abc-8def-0123456789ab}": false,
		"0190a6f012347abc8def0123456789ab":       false,
		"":                                       false,
	} {
		if got := validID(s); got != want {
			t.Errorf("validID(%q) = %v, want %v", s, got, want)
		}
	}
}

func TestNewIDIsSortedV7(t *testing.T) {
	prev := newID[AuditID]()
	for range 1000 {
		id := newID[AuditID]()
		if !validID(id) || uuid.MustParse(string(id)).Version() != 7 {
			t.Fatalf("newID = %q, want a canonical UUIDv7", id)
		}
		if id <= prev {
			t.Fatalf("IDs out of order: %s after %s", id, prev)
		}
		prev = id
	}
}

func FuzzParseID(f *testing.F) {
	f.Add("0190a6f0-1234-7abc-8def-0123456789ab")
	f.Add("urn:uuid:0190a6f0-1234-7abc-8def-0123456789ab")
	f.Fuzz(func(t *testing.T, s string) {
		id, err := ParseID[OrgID](s)
		if err == nil && !validID(id) {
			t.Fatalf("ParseID(%q) = %q, which is not canonical", s, id)
		}
	})
}
