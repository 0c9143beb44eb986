package storetest

import (
	"crypto/sha256"
	"encoding/hex"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/parley-voice/parley/control/store"
)

var secretRE = regexp.MustCompile(`^sk_(live|test)_[0-9A-Za-z]{43}$`)

func testKeyCreateLookup(t *testing.T, open Opener) {
	s := migrated(t, open)
	ctx := t.Context()
	org := newOrg(t, s, "Acme")
	other := newOrg(t, s, "Globex")
	web := newProject(t, s, org.ID, "Web")
	phone := newProject(t, s, org.ID, "Phone")

	k, secret, err := s.CreateKey(ctx, store.NewKey{
		OrgID: org.ID, Name: "server", Scopes: []string{"agents:read", "calls:write", "agents:read"},
		ProjectIDs: []store.ProjectID{web.ID, phone.ID, web.ID},
	})
	if err != nil {
		t.Fatalf("CreateKey: %v", err)
	}
	if !secretRE.MatchString(secret) || !strings.HasPrefix(secret, "sk_live_") {
		t.Fatalf("secret %q is not sk_live_ + 43 base62 characters", secret)
	}
	if k.Mode != store.ModeLive || k.Prefix != secret[:16] || k.Name != "server" || k.OrgID != org.ID {
		t.Fatalf("key = %+v (secret %q)", k, secret)
	}
	if strings.Join(k.Scopes, ",") != "agents:read,calls:write" {
		t.Fatalf("scopes = %v, want duplicates dropped", k.Scopes)
	}
	if len(k.ProjectIDs) != 2 || k.AllProjects || k.Revoked() || k.ExpiresAt != nil || k.LastUsedAt != nil {
		t.Fatalf("key = %+v", k)
	}

	sameJSON(t, "LookupKey", must[store.Key](t, "LookupKey")(s.LookupKey(ctx, secret)), k)
	sameJSON(t, "GetKey", must[store.Key](t, "GetKey")(s.GetKey(ctx, k.ID)), k)

	tk, tsecret, err := s.CreateKey(ctx, store.NewKey{OrgID: org.ID, Name: "ci", Test: true, Scopes: []string{"*"}, AllProjects: true})
	if err != nil {
		t.Fatalf("CreateKey test: %v", err)
	}
	if !strings.HasPrefix(tsecret, "sk_test_") || !secretRE.MatchString(tsecret) || tk.Mode != store.ModeTest || tsecret == secret {
		t.Fatalf("test key %+v secret %q", tk, tsecret)
	}
	if got := must[store.Key](t, "LookupKey test")(s.LookupKey(ctx, tsecret)); got.ID != tk.ID || got.Mode != store.ModeTest {
		t.Fatalf("LookupKey test = %+v", got)
	}
	_, _, err = s.CreateKey(ctx, store.NewKey{OrgID: other.ID, Name: "theirs", AllProjects: true})
	if err != nil {
		t.Fatalf("CreateKey other org: %v", err)
	}

	keys := must[[]store.Key](t, "ListKeys")(s.ListKeys(ctx, org.ID))
	if len(keys) != 2 || keys[0].ID != k.ID || keys[1].ID != tk.ID {
		t.Fatalf("ListKeys = %+v, want server then ci", keys)
	}

	// Unknown and malformed secrets are simply not found.
	flipped := secret[:len(secret)-1] + "a"
	if strings.HasSuffix(secret, "a") {
		flipped = secret[:len(secret)-1] + "b"
	}
	for _, bad := range []string{
		"", "sk_live_", flipped, strings.Replace(secret, "sk_live_", "sk_test_", 1),
		secret + "x", secret[:len(secret)-1], "Bearer " + secret, strings.ToUpper(secret), "sk_live_" + strings.Repeat("!", 43),
	} {
		_, err := s.LookupKey(ctx, bad)
		wantErr(t, "LookupKey "+bad, err, store.ErrNotFound)
	}
	_, err = s.GetKey(ctx, "nope")
	wantErr(t, "GetKey malformed", err, store.ErrNotFound)
}

func testKeySecretNotStored(t *testing.T, open Opener) {
	s := migrated(t, open)
	ctx := t.Context()
	org := newOrg(t, s, "Acme")
	k, secret, err := s.CreateKey(ctx, store.NewKey{OrgID: org.ID, Name: "server", AllProjects: true})
	if err != nil {
		t.Fatalf("CreateKey: %v", err)
	}
	var prefix, hash string
	if err := s.DB().QueryRowContext(ctx, `SELECT prefix, hash FROM api_keys WHERE id = '`+string(k.ID)+`'`).Scan(&prefix, &hash); err != nil {
		t.Fatalf("read stored key: %v", err)
	}
	sum := sha256.Sum256([]byte(secret))
	if hash != hex.EncodeToString(sum[:]) {
		t.Fatalf("stored hash %q is not the SHA-256 of the secret", hash)
	}
	if prefix != secret[:16] || len(prefix) >= len(secret) {
		t.Fatalf("stored prefix %q", prefix)
	}
	var n int
	if err := s.DB().QueryRowContext(ctx, `SELECT count(*) FROM api_keys WHERE name = '`+secret+`' OR prefix = '`+secret+
		`' OR hash = '`+secret+`'`).Scan(&n); err != nil {
		t.Fatalf("search for the secret: %v", err)
	}
	if n != 0 {
		t.Fatal("the secret is stored in the clear")
	}
}

func testKeyRevoke(t *testing.T, open Opener) {
	s := migrated(t, open)
	ctx := t.Context()
	org := newOrg(t, s, "Acme")
	k, secret, err := s.CreateKey(ctx, store.NewKey{OrgID: org.ID, Name: "server", AllProjects: true})
	if err != nil {
		t.Fatalf("CreateKey: %v", err)
	}
	if err := s.RevokeKey(ctx, k.ID); err != nil {
		t.Fatalf("RevokeKey: %v", err)
	}
	got := must[store.Key](t, "LookupKey revoked")(s.LookupKey(ctx, secret))
	if !got.Revoked() || got.RevokedAt.Before(k.CreatedAt) {
		t.Fatalf("revoked key = %+v", got)
	}
	if err := s.RevokeKey(ctx, k.ID); err != nil {
		t.Fatalf("second RevokeKey: %v", err)
	}
	again := must[store.Key](t, "LookupKey")(s.LookupKey(ctx, secret))
	if !again.RevokedAt.Equal(*got.RevokedAt) {
		t.Fatalf("second revoke moved revoked_at from %v to %v", got.RevokedAt, again.RevokedAt)
	}
	wantErr(t, "RevokeKey unknown", s.RevokeKey(ctx, "0190a6f0-0000-7000-8000-000000000000"), store.ErrNotFound)
	wantErr(t, "RevokeKey malformed", s.RevokeKey(ctx, "nope"), store.ErrNotFound)
}

func testKeyExpiryReachScopes(t *testing.T, open Opener) {
	s := migrated(t, open)
	ctx := t.Context()
	org := newOrg(t, s, "Acme")
	web := newProject(t, s, org.ID, "Web")
	phone := newProject(t, s, org.ID, "Phone")
	exp := time.Now().Add(time.Hour)

	k, secret, err := s.CreateKey(ctx, store.NewKey{
		OrgID: org.ID, Name: "web only", Scopes: []string{"agents:read"}, ProjectIDs: []store.ProjectID{web.ID}, ExpiresAt: &exp,
	})
	if err != nil {
		t.Fatalf("CreateKey: %v", err)
	}
	k = must[store.Key](t, "LookupKey")(s.LookupKey(ctx, secret))
	checks := []struct {
		what      string
		got, want bool
	}{
		{"Expired now", k.Expired(time.Now()), false},
		{"Expired at expiry", k.Expired(*k.ExpiresAt), true},
		{"Expired a microsecond before", k.Expired(k.ExpiresAt.Add(-time.Microsecond)), false},
		{"Expired in two hours", k.Expired(time.Now().Add(2 * time.Hour)), true},
		{"Reaches web", k.Reaches(web.ID), true},
		{"Reaches phone", k.Reaches(phone.ID), false},
		{"HasScope agents:read", k.HasScope("agents:read"), true},
		{"HasScope agents:write", k.HasScope("agents:write"), false},
		{"HasScope *", k.HasScope("*"), false},
	}
	all, _, err := s.CreateKey(ctx, store.NewKey{OrgID: org.ID, Name: "admin", Scopes: []string{"*"}, AllProjects: true})
	if err != nil {
		t.Fatalf("CreateKey all: %v", err)
	}
	later := newProject(t, s, org.ID, "Later")
	checks = append(checks, []struct {
		what      string
		got, want bool
	}{
		{"all: Expired far ahead", all.Expired(time.Now().AddDate(100, 0, 0)), false},
		{"all: Reaches a later project", all.Reaches(later.ID), true},
		{"all: HasScope audit:read", all.HasScope("audit:read"), true},
	}...)
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s = %v, want %v", c.what, c.got, c.want)
		}
	}
}

func testKeyRefused(t *testing.T, open Opener) {
	s := migrated(t, open)
	ctx := t.Context()
	org := newOrg(t, s, "Acme")
	other := newOrg(t, s, "Globex")
	web := newProject(t, s, org.ID, "Web")
	foreign := newProject(t, s, other.ID, "Theirs")
	past := time.Now().Add(-time.Minute)
	cases := []struct {
		name string
		nk   store.NewKey
		want error
	}{
		{"no name", store.NewKey{OrgID: org.ID, AllProjects: true}, store.ErrInvalid},
		{"bad scope", store.NewKey{OrgID: org.ID, Name: "k", Scopes: []string{"Agents Read"}, AllProjects: true}, store.ErrInvalid},
		{"empty scope", store.NewKey{OrgID: org.ID, Name: "k", Scopes: []string{""}, AllProjects: true}, store.ErrInvalid},
		{"reaches nothing", store.NewKey{OrgID: org.ID, Name: "k"}, store.ErrInvalid},
		{"all and listed", store.NewKey{OrgID: org.ID, Name: "k", AllProjects: true, ProjectIDs: []store.ProjectID{web.ID}}, store.ErrInvalid},
		{"expired already", store.NewKey{OrgID: org.ID, Name: "k", AllProjects: true, ExpiresAt: &past}, store.ErrInvalid},
		{"unknown org", store.NewKey{OrgID: "0190a6f0-0000-7000-8000-000000000000", Name: "k", AllProjects: true}, store.ErrNotFound},
		{"malformed org", store.NewKey{OrgID: "acme", Name: "k", AllProjects: true}, store.ErrNotFound},
		{"project of another org", store.NewKey{OrgID: org.ID, Name: "k", ProjectIDs: []store.ProjectID{foreign.ID}}, store.ErrNotFound},
		{"unknown project", store.NewKey{OrgID: org.ID, Name: "k", ProjectIDs: []store.ProjectID{"0190a6f0-0000-7000-8000-000000000000"}}, store.ErrNotFound},
		{"malformed project", store.NewKey{OrgID: org.ID, Name: "k", ProjectIDs: []store.ProjectID{"web"}}, store.ErrNotFound},
	}
	for _, c := range cases {
		_, secret, err := s.CreateKey(ctx, c.nk)
		wantErr(t, c.name, err, c.want)
		if secret != "" {
			t.Errorf("%s: a refused key returned a secret", c.name)
		}
	}
	if keys := must[[]store.Key](t, "ListKeys")(s.ListKeys(ctx, org.ID)); len(keys) != 0 {
		t.Fatalf("refused keys were stored: %+v", keys)
	}
}

func testKeyTouch(t *testing.T, open Opener) {
	s := migrated(t, open)
	ctx := t.Context()
	org := newOrg(t, s, "Acme")
	k, _, err := s.CreateKey(ctx, store.NewKey{OrgID: org.ID, Name: "server", AllProjects: true})
	if err != nil {
		t.Fatalf("CreateKey: %v", err)
	}
	t0 := time.Date(2030, 1, 2, 3, 4, 5, 123456789, time.UTC)
	lastUsed := func() time.Time {
		t.Helper()
		got := must[store.Key](t, "GetKey")(s.GetKey(ctx, k.ID))
		if got.LastUsedAt == nil {
			t.Fatal("last_used_at not set")
		}
		return *got.LastUsedAt
	}
	for _, step := range []struct {
		at, want time.Time
	}{
		{t0, t0.Truncate(time.Microsecond)},
		{t0.Add(30 * time.Second), t0.Truncate(time.Microsecond)}, // within a minute: no write
		{t0.Add(2 * time.Minute), t0.Add(2 * time.Minute).Truncate(time.Microsecond)},
	} {
		if err := s.TouchKey(ctx, k.ID, step.at); err != nil {
			t.Fatalf("TouchKey: %v", err)
		}
		if got := lastUsed(); !got.Equal(step.want) {
			t.Fatalf("after TouchKey(%v) last_used_at = %v, want %v", step.at, got, step.want)
		}
	}
	if err := s.TouchKey(ctx, "0190a6f0-0000-7000-8000-000000000000", t0); err != nil {
		t.Fatalf("TouchKey unknown: %v", err)
	}
}
