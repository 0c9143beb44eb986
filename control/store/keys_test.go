package store

import (
	"strings"
	"testing"
	"time"
)

func TestNewSecret(t *testing.T) {
	seen := map[string]bool{}
	counts := map[rune]int{}
	const n = 2000
	for i := range n {
		m := ModeLive
		if i%2 == 1 {
			m = ModeTest
		}
		s := newSecret(m)
		if len(s) != 8+secretLen || !strings.HasPrefix(s, "sk_"+string(m)+"_") {
			t.Fatalf("secret %q has the wrong shape", s)
		}
		got, ok := parseSecret(s)
		if !ok || got != m {
			t.Fatalf("parseSecret(%q) = %q, %v", s, got, ok)
		}
		if seen[s] {
			t.Fatalf("secret %q repeated", s)
		}
		seen[s] = true
		for _, r := range s[8:] {
			counts[r]++
		}
	}
	// Every base62 character turns up about equally often (expected n*43/62 ≈ 1387 each).
	if len(counts) != 62 {
		t.Fatalf("%d distinct characters, want 62", len(counts))
	}
	for r, c := range counts {
		if c < 1100 || c > 1700 {
			t.Errorf("character %q appeared %d times, want about 1387", r, c)
		}
	}
}

func TestParseSecret(t *testing.T) {
	good := "sk_live_" + strings.Repeat("aZ9", 14) + "x"
	cases := []struct {
		in   string
		mode Mode
		ok   bool
	}{
		{good, ModeLive, true},
		{"sk_test_" + good[8:], ModeTest, true},
		{"sk_demo_" + good[8:], "", false},
		{good[:len(good)-1], "", false},
		{good + "x", "", false},
		{"sk_live_" + strings.Repeat("-", 43), "", false},
		{"sk_live_" + strings.Repeat("é", 21) + "a", "", false},
		{"", "", false},
		{"sk_live", "", false},
	}
	for _, c := range cases {
		m, ok := parseSecret(c.in)
		if m != c.mode || ok != c.ok {
			t.Errorf("parseSecret(%q) = %q, %v; want %q, %v", c.in, m, ok, c.mode, c.ok)
		}
	}
}

func FuzzParseSecret(f *testing.F) {
	f.Add(newSecret(ModeLive))
	f.Add("sk_test_")
	f.Fuzz(func(t *testing.T, s string) {
		if m, ok := parseSecret(s); ok && (len(s) != 51 || !strings.HasPrefix(s, "sk_"+string(m)+"_")) {
			t.Fatalf("parseSecret accepted %q", s)
		}
	})
}

func TestHashSecret(t *testing.T) {
	// SHA-256("abc"), FIPS 180-2 appendix B.1.
	if got := hashSecret("abc"); got != "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad" {
		t.Fatalf("hashSecret(abc) = %s", got)
	}
}

func TestKeyMethods(t *testing.T) {
	now := time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)
	exp := now.Add(time.Hour)
	k := Key{Scopes: []string{"agents:read", "calls:write"}, ProjectIDs: []ProjectID{"p1", "p2"}, ExpiresAt: &exp}
	all := Key{Scopes: []string{"*"}, AllProjects: true, RevokedAt: &now}
	cases := []struct {
		name      string
		got, want bool
	}{
		{"Revoked", k.Revoked(), false},
		{"all Revoked", all.Revoked(), true},
		{"Expired before", k.Expired(now), false},
		{"Expired at", k.Expired(exp), true},
		{"Expired after", k.Expired(exp.Add(time.Nanosecond)), true},
		{"never Expired", all.Expired(now.AddDate(1000, 0, 0)), false},
		{"Reaches p1", k.Reaches("p1"), true},
		{"Reaches p3", k.Reaches("p3"), false},
		{"Reaches empty", k.Reaches(""), false},
		{"all Reaches", all.Reaches("p3"), true},
		{"HasScope agents:read", k.HasScope("agents:read"), true},
		{"HasScope agents:write", k.HasScope("agents:write"), false},
		{"HasScope prefix", k.HasScope("agents"), false},
		{"HasScope empty", k.HasScope(""), false},
		{"all HasScope", all.HasScope("audit:read"), true},
	}
	for _, c := range cases {
		if c.got != c.want {
			t.Errorf("%s = %v, want %v", c.name, c.got, c.want)
		}
	}
}

func TestCheckScopes(t *testing.T) {
	got, err := checkScopes([]string{"agents:read", "*", "agents:read", "webhooks:write"})
	if err != nil || strings.Join(got, " ") != "agents:read * webhooks:write" {
		t.Fatalf("checkScopes = %v, %v", got, err)
	}
	if got, err := checkScopes(nil); err != nil || got == nil || len(got) != 0 {
		t.Fatalf("checkScopes(nil) = %#v, %v; want an empty list", got, err)
	}
	for _, bad := range []string{"", "Agents:read", "agents read", "agents:réad", strings.Repeat("a", 65), "a\n"} {
		if _, err := checkScopes([]string{bad}); err == nil {
			t.Errorf("checkScopes(%q) accepted", bad)
		}
	}
}

// BenchmarkLookupKey measures the per-request key lookup on SQLite (hash, indexed select, scan).
func BenchmarkLookupKey(b *testing.B) {
	s, err := Open(b.Context(), Options{DataDir: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	if _, err := s.Migrate(b.Context()); err != nil {
		b.Fatal(err)
	}
	o, err := s.CreateOrg(b.Context(), "Acme")
	if err != nil {
		b.Fatal(err)
	}
	_, secret, err := s.CreateKey(b.Context(), NewKey{OrgID: o.ID, Name: "k", Scopes: []string{"agents:read"}, AllProjects: true})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := s.LookupKey(b.Context(), secret); err != nil {
			b.Fatal(err)
		}
	}
}
