package store_test

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/parley-voice/parley/control/secrets"
	"github.com/parley-voice/parley/control/store"
)

// TestTrunks runs the trunk repository against both engines.
func TestTrunks(t *testing.T) {
	t.Run("sqlite", func(t *testing.T) {
		t.Parallel()
		testTrunks(t, openSQLite(t))
	})
	t.Run("postgres", func(t *testing.T) {
		t.Parallel()
		testTrunks(t, postgresOpener(t)(t))
	})
}

func testBox(t *testing.T) *secrets.Box {
	t.Helper()
	b, err := secrets.NewBox([]byte(strings.Repeat("k", secrets.KeySize)))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func testTrunks(t *testing.T, s *store.Store) {
	ctx := t.Context()
	if _, err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	box := testBox(t)
	tr, err := s.CreateTrunk(ctx, box, store.NewTrunk{
		Name: "twilio", URI: "sip:example.pstn.twilio.com:5060", Transport: "TCP", Username: "acct", Password: "s3cret",
		AllowedSources: []string{"54.172.60.0/23", "54.172.60.9", " 2001:db8::1 ", "54.172.60.0/23"}, InboundAuth: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	if tr.Transport != "tcp" || !tr.HasPassword() || strings.Contains(tr.PasswordSealed, "s3cret") {
		t.Fatalf("trunk %+v", tr)
	}
	if want := []string{"54.172.60.0/23", "54.172.60.9/32", "2001:db8::1/128"}; !slices.Equal(tr.AllowedSources, want) {
		t.Errorf("sources %v, want %v", tr.AllowedSources, want)
	}
	got, err := s.FindTrunkByName(ctx, "twilio")
	if err != nil {
		t.Fatal(err)
	}
	if got.ID != tr.ID || got.PasswordSealed != tr.PasswordSealed || !got.InboundAuth || !slices.Equal(got.AllowedSources, tr.AllowedSources) {
		t.Fatalf("read back %+v", got)
	}
	if pw, err := got.Password(box); err != nil || pw != "s3cret" {
		t.Fatalf("password %q %v", pw, err)
	}
	other, _ := secrets.NewBox([]byte(strings.Repeat("x", secrets.KeySize)))
	if _, err := got.Password(other); !errors.Is(err, secrets.ErrOpen) {
		t.Errorf("opened with another key: %v", err)
	}
	// The sealed value is bound to its trunk: moved to another row it does not open.
	moved := got
	moved.ID = "01900000-0000-7000-8000-000000000000"
	if _, err := moved.Password(box); !errors.Is(err, secrets.ErrOpen) {
		t.Errorf("password opened under another trunk id: %v", err)
	}
	if _, err := s.CreateTrunk(ctx, box, store.NewTrunk{Name: "twilio", URI: "sip:x"}); !errors.Is(err, store.ErrConflict) {
		t.Errorf("duplicate name: %v", err)
	}
	plain, err := s.CreateTrunk(ctx, nil, store.NewTrunk{Name: "pbx", URI: "sip:10.0.0.5"})
	if err != nil {
		t.Fatal(err)
	}
	if plain.HasPassword() || plain.Transport != "udp" {
		t.Errorf("plain %+v", plain)
	}
	if pw, err := plain.Password(nil); err != nil || pw != "" {
		t.Errorf("no password: %q %v", pw, err)
	}
	for _, bad := range []store.NewTrunk{
		{Name: "", URI: "sip:x"},
		{Name: "a", URI: "http://x"},
		{Name: "a", URI: "sip:"},
		{Name: "a", URI: "sip:x", Transport: "sctp"},
		{Name: "a", URI: "sip:x", AllowedSources: []string{"300.1.1.1"}},
		{Name: "a", URI: "sip:x", AllowedSources: []string{"10.0.0.0/33"}},
		{Name: "a", URI: "sip:x", InboundAuth: true},
		{Name: "a", URI: "sip:x", Username: "a\r\nb"},
	} {
		if _, err := s.CreateTrunk(ctx, box, bad); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("%+v: %v", bad, err)
		}
	}
	if _, err := s.CreateTrunk(ctx, nil, store.NewTrunk{Name: "nokey", URI: "sip:x", Password: "p"}); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("password without a key: %v", err)
	}
	all, err := s.ListTrunks(ctx)
	if err != nil || len(all) != 2 || all[0].Name != "twilio" || all[1].Name != "pbx" {
		t.Fatalf("list %v %v", all, err)
	}
	if err := s.DeleteTrunk(ctx, tr.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetTrunk(ctx, tr.ID); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("after delete: %v", err)
	}
	if err := s.DeleteTrunk(ctx, tr.ID); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("delete twice: %v", err)
	}
	if _, err := s.GetTrunk(ctx, "not-a-uuid"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("bad id: %v", err)
	}
}
