package storetest

import (
	"bytes"
	"errors"
	"testing"

	"github.com/parley-voice/parley/control/secrets"
	"github.com/parley-voice/parley/control/store"
)

// vaultTests are the conformance tests of the vault (issue 17).
var vaultTests = []struct {
	name string
	fn   func(*testing.T, Opener)
}{
	{"VaultCRUD", testVaultCRUD},
	{"VaultScope", testVaultScope},
	{"VaultUses", testVaultUses},
	{"VaultRotate", testVaultRotate},
}

func testBox(t *testing.T, b byte) *secrets.Box {
	t.Helper()
	box, err := secrets.NewBox(bytes.Repeat([]byte{b}, secrets.KeySize))
	if err != nil {
		t.Fatal(err)
	}
	return box
}

// testVaultCRUD: a secret is created sealed, opens with the master key, changes, and is deleted;
// names are unique per project whatever their case; bad fields are ErrInvalid.
func testVaultCRUD(t *testing.T, open Opener) {
	ctx := t.Context()
	w := newAgentWorld(t, open)
	box := testBox(t, 1)
	sc := store.OrgScope(w.org.ID)
	v := w.s.Vault()
	s := must[store.Secret](t, "create")(v.Create(ctx, sc, box, store.NewSecret{ProjectID: w.p1.ID, Name: "crm", Type: store.SecretHeader, HeaderName: "X-Api-Key", Value: "v4lue-crm"}))
	if s.Sealed.KeyID != box.KeyID() || bytes.Contains([]byte(s.Sealed.Ciphertext+s.Sealed.WrappedKey), []byte("v4lue")) {
		t.Fatalf("sealed %+v", s.Sealed)
	}
	got := must[store.Secret](t, "get")(v.Get(ctx, sc, s.ID))
	if got.Name != "crm" || got.HeaderName != "X-Api-Key" || got.LastUsedAt != nil || len(got.UsedBy) != 0 {
		t.Fatalf("got %+v", got)
	}
	if pt, err := got.Open(box); err != nil || string(pt) != "v4lue-crm" {
		t.Fatalf("open %q %v", pt, err)
	}
	if _, err := got.Open(testBox(t, 2)); err == nil {
		t.Fatal("opened with another master key")
	}
	_, err := v.Create(ctx, sc, box, store.NewSecret{ProjectID: w.p1.ID, Name: "CRM", Type: store.SecretBearer, Value: "x"})
	wantErr(t, "same name", err, store.ErrConflict)
	must[store.Secret](t, "same name other project")(v.Create(ctx, sc, box, store.NewSecret{ProjectID: w.p2.ID, Name: "crm", Type: store.SecretBearer, Value: "x"}))
	for _, bad := range []store.NewSecret{
		{Name: "a", Type: store.SecretHeader, Value: "x"},
		{Name: "a", Type: store.SecretHeader, HeaderName: "Bad Header", Value: "x"},
		{Name: "a", Type: store.SecretBearer, HeaderName: "X", Value: "x"},
		{Name: "a", Type: store.SecretQuery, Value: "x"},
		{Name: "a", Type: store.SecretBasic, Value: "x"},
		{Name: "a", Type: store.SecretBasic, Username: "a:b", Value: "x"},
		{Name: "a", Type: store.SecretBearer, Value: ""},
		{Name: "a", Type: store.SecretBearer, Value: "x\r\nInjected: 1"},
		{Name: "a", Type: "oauth", Value: "x"},
		{Name: "", Type: store.SecretBearer, Value: "x"},
	} {
		bad.ProjectID = w.p1.ID
		_, err := v.Create(ctx, sc, box, bad)
		wantErr(t, "bad secret", err, store.ErrInvalid)
	}
	// A change of type drops the old type's fields; a new value gets a new data key.
	typ, val := store.SecretBasic, "pa55"
	user := "svc"
	ch := must[store.Secret](t, "change")(v.Change(ctx, sc, box, s.ID, store.SecretChange{Type: &typ, Username: &user, Value: &val}))
	if ch.HeaderName != "" || ch.Username != "svc" || ch.Sealed.WrappedKey == s.Sealed.WrappedKey {
		t.Fatalf("changed %+v", ch)
	}
	if pt, _ := must[store.Secret](t, "get")(v.Get(ctx, sc, s.ID)).Open(box); string(pt) != "pa55" {
		t.Fatalf("value after change %q", pt)
	}
	name := "crm-2"
	ch = must[store.Secret](t, "rename")(v.Change(ctx, sc, box, s.ID, store.SecretChange{Name: &name}))
	if pt, _ := ch.Open(box); string(pt) != "pa55" || ch.Name != "crm-2" {
		t.Fatalf("rename lost the value: %q", pt)
	}
	// Touch sets last_used_at once a minute at most.
	if err := v.Touch(ctx, sc, s.ID); err != nil {
		t.Fatal(err)
	}
	first := must[store.Secret](t, "get")(v.Get(ctx, sc, s.ID)).LastUsedAt
	if first == nil {
		t.Fatal("last_used_at not set")
	}
	_ = v.Touch(ctx, sc, s.ID)
	if again := must[store.Secret](t, "get")(v.Get(ctx, sc, s.ID)).LastUsedAt; !again.Equal(*first) {
		t.Fatalf("touched twice within a minute: %v then %v", first, again)
	}
	list := must[[]store.Secret](t, "list")(v.List(ctx, sc, store.SecretFilter{ProjectID: w.p1.ID}, store.Page{Limit: 10}))
	if len(list) != 1 || list[0].ID != s.ID {
		t.Fatalf("list %+v", list)
	}
	must[store.Secret](t, "delete")(v.Delete(ctx, sc, s.ID))
	_, err = v.Get(ctx, sc, s.ID)
	wantErr(t, "get deleted", err, store.ErrNotFound)
}

// testVaultScope: a secret outside the scope (another organization, an unreached project) is
// not found for every operation.
func testVaultScope(t *testing.T, open Opener) {
	ctx := t.Context()
	w := newAgentWorld(t, open)
	other := newOrg(t, w.s, "Other")
	box := testBox(t, 1)
	v := w.s.Vault()
	s := must[store.Secret](t, "create")(v.Create(ctx, store.OrgScope(w.org.ID), box, store.NewSecret{ProjectID: w.p1.ID, Name: "k", Type: store.SecretBearer, Value: "x"}))
	val := "y"
	for _, sc := range []store.Scope{store.OrgScope(other.ID), {Org: w.org.ID, Projects: []store.ProjectID{w.p2.ID}}} {
		_, err := v.Get(ctx, sc, s.ID)
		wantErr(t, "get", err, store.ErrNotFound)
		_, err = v.Change(ctx, sc, box, s.ID, store.SecretChange{Value: &val})
		wantErr(t, "change", err, store.ErrNotFound)
		_, err = v.Delete(ctx, sc, s.ID)
		wantErr(t, "delete", err, store.ErrNotFound)
		if l, _ := v.List(ctx, sc, store.SecretFilter{}, store.Page{Limit: 10}); len(l) != 0 {
			t.Fatalf("list outside scope: %d", len(l))
		}
		_ = v.Touch(ctx, sc, s.ID)
		err = v.SetUses(ctx, sc, w.p1.ID, store.SecretUse{Type: "tool", ID: "t1", Name: "t"}, []store.SecretID{s.ID})
		wantErr(t, "use", err, store.ErrNotFound)
	}
	if got := must[store.Secret](t, "get")(v.Get(ctx, store.OrgScope(w.org.ID), s.ID)); got.LastUsedAt != nil {
		t.Fatal("touched from outside the scope")
	}
	_, err := v.Create(ctx, store.OrgScope(other.ID), box, store.NewSecret{ProjectID: w.p1.ID, Name: "k2", Type: store.SecretBearer, Value: "x"})
	wantErr(t, "create in another org's project", err, store.ErrNotFound)
}

// testVaultUses: a used secret cannot be deleted and the error names its users; a user of
// another project cannot use it; replacing and clearing uses frees it.
func testVaultUses(t *testing.T, open Opener) {
	ctx := t.Context()
	w := newAgentWorld(t, open)
	box := testBox(t, 1)
	sc := store.OrgScope(w.org.ID)
	v := w.s.Vault()
	a := must[store.Secret](t, "create")(v.Create(ctx, sc, box, store.NewSecret{ProjectID: w.p1.ID, Name: "a", Type: store.SecretBearer, Value: "x"}))
	b := must[store.Secret](t, "create")(v.Create(ctx, sc, box, store.NewSecret{ProjectID: w.p1.ID, Name: "b", Type: store.SecretBearer, Value: "x"}))
	tool := store.SecretUse{Type: "tool", ID: "11111111-1111-7111-8111-111111111111", Name: "lookup"}
	mcp := store.SecretUse{Type: "mcp_server", ID: "22222222-2222-7222-8222-222222222222", Name: "everything"}
	if err := v.SetUses(ctx, sc, w.p1.ID, tool, []store.SecretID{a.ID, a.ID}); err != nil {
		t.Fatal(err)
	}
	if err := v.SetUses(ctx, sc, w.p1.ID, mcp, []store.SecretID{a.ID}); err != nil {
		t.Fatal(err)
	}
	err := v.SetUses(ctx, sc, w.p2.ID, store.SecretUse{Type: "tool", ID: "x", Name: "x"}, []store.SecretID{a.ID})
	wantErr(t, "use from another project", err, store.ErrNotFound)
	got := must[store.Secret](t, "get")(v.Get(ctx, sc, a.ID))
	if len(got.UsedBy) != 2 || got.UsedBy[0] != mcp || got.UsedBy[1] != tool {
		t.Fatalf("used by %+v", got.UsedBy)
	}
	_, err = v.Delete(ctx, sc, a.ID)
	var iu *store.SecretInUseError
	if !errors.As(err, &iu) || !errors.Is(err, store.ErrInUse) || len(iu.Uses) != 2 {
		t.Fatalf("delete used: %v", err)
	}
	// The tool moves to b; the server lets go.
	if err := v.SetUses(ctx, sc, w.p1.ID, tool, []store.SecretID{b.ID}); err != nil {
		t.Fatal(err)
	}
	if err := v.ClearUses(ctx, sc, mcp); err != nil {
		t.Fatal(err)
	}
	must[store.Secret](t, "delete a")(v.Delete(ctx, sc, a.ID))
	_, err = v.Delete(ctx, sc, b.ID)
	wantErr(t, "delete b", err, store.ErrInUse)
}

// testVaultRotate: rotation re-wraps every data key under the new master key without
// re-encrypting values, re-seals trunk passwords, and after it the old key alone opens nothing
// new while old and new together open everything.
func testVaultRotate(t *testing.T, open Opener) {
	ctx := t.Context()
	w := newAgentWorld(t, open)
	oldBox := testBox(t, 1)
	sc := store.OrgScope(w.org.ID)
	v := w.s.Vault()
	var ids []store.SecretID
	for _, n := range []string{"a", "b", "c"} {
		s := must[store.Secret](t, "create")(v.Create(ctx, sc, oldBox, store.NewSecret{ProjectID: w.p1.ID, Name: n, Type: store.SecretBearer, Value: "value-" + n}))
		ids = append(ids, s.ID)
	}
	tr := must[store.Trunk](t, "trunk")(w.s.CreateTrunk(ctx, oldBox, store.NewTrunk{Name: "carrier", URI: "sip:127.0.0.1", Username: "u", Password: "trunkpw"}))
	before := must[store.Secret](t, "get")(v.Get(ctx, sc, ids[0]))

	newKey := bytes.Repeat([]byte{9}, secrets.KeySize)
	ring, err := secrets.NewKeyring(newKey, bytes.Repeat([]byte{1}, secrets.KeySize))
	if err != nil {
		t.Fatal(err)
	}
	n, resealed, err := w.s.RotateMasterKey(ctx, ring)
	if err != nil || n != 3 || resealed != 1 {
		t.Fatalf("rotate: %d %d %v", n, resealed, err)
	}
	newOnly := must[*secrets.Box](t, "box")(secrets.NewBox(newKey))
	for i, id := range ids {
		s := must[store.Secret](t, "get")(v.Get(ctx, sc, id))
		if s.Sealed.KeyID != newOnly.KeyID() {
			t.Fatalf("key id %s", s.Sealed.KeyID)
		}
		if pt, err := s.Open(newOnly); err != nil || string(pt) != "value-"+[]string{"a", "b", "c"}[i] {
			t.Fatalf("open after rotation %q %v", pt, err)
		}
		if _, err := s.Open(oldBox); !errors.Is(err, secrets.ErrUnknownKey) {
			t.Fatalf("old key alone: %v", err)
		}
	}
	after := must[store.Secret](t, "get")(v.Get(ctx, sc, ids[0]))
	if after.Sealed.Ciphertext != before.Sealed.Ciphertext || after.Sealed.WrappedKey == before.Sealed.WrappedKey {
		t.Fatal("rotation re-encrypted the value or kept the wrapped key")
	}
	tr = must[store.Trunk](t, "trunk")(w.s.GetTrunk(ctx, tr.ID))
	if pw, err := tr.Password(newOnly); err != nil || pw != "trunkpw" {
		t.Fatalf("trunk password after rotation %q %v", pw, err)
	}
	check := must[string](t, "check")(w.s.GetSetting(ctx, store.SettingMasterKeyCheck))
	if !newOnly.Verify(check) || oldBox.Verify(check) {
		t.Fatal("the check value is not under the new key alone")
	}
	counts := must[map[string]int](t, "count")(w.s.DataKeysByMasterKey(ctx))
	if len(counts) != 1 || counts[newOnly.KeyID()] != 3 {
		t.Fatalf("counts %v", counts)
	}
	// A second rotation with nothing to do changes nothing.
	if n, r, err := w.s.RotateMasterKey(ctx, ring); err != nil || n != 0 || r != 0 {
		t.Fatalf("again: %d %d %v", n, r, err)
	}
	// Without the key that wrapped them, rotation fails and changes nothing.
	_, _, err = w.s.RotateMasterKey(ctx, testBox(t, 5))
	if !errors.Is(err, secrets.ErrUnknownKey) {
		t.Fatalf("rotate without the old key: %v", err)
	}
}
