package storetest

import (
	"errors"
	"strings"
	"testing"

	"github.com/parley-voice/parley/control/store"
)

func testOrgs(t *testing.T, open Opener) {
	s := migrated(t, open)
	ctx := t.Context()
	acme := newOrg(t, s, "Acme")
	if acme.Name != "Acme" || acme.Frozen || acme.CreditMicros != 0 || acme.Timezone != "UTC" {
		t.Fatalf("new org = %+v", acme)
	}
	if _, err := store.ParseID[store.OrgID](string(acme.ID)); err != nil {
		t.Fatalf("org ID %q: %v", acme.ID, err)
	}
	sameJSON(t, "GetOrg", must[store.Org](t, "GetOrg")(s.GetOrg(ctx, acme.ID)), acme)
	sameJSON(t, "FindOrgByName", must[store.Org](t, "FindOrgByName")(s.FindOrgByName(ctx, "Acme")), acme)

	_, err := s.CreateOrg(ctx, "Acme")
	wantErr(t, "CreateOrg with a taken name", err, store.ErrConflict)

	globex := newOrg(t, s, "Globex")
	orgs := must[[]store.Org](t, "ListOrgs")(s.ListOrgs(ctx))
	if len(orgs) != 2 || orgs[0].ID != acme.ID || orgs[1].ID != globex.ID {
		t.Fatalf("ListOrgs = %+v, want Acme then Globex", orgs)
	}

	if err := s.SetOrgFrozen(ctx, acme.ID, true); err != nil {
		t.Fatalf("SetOrgFrozen: %v", err)
	}
	got := must[store.Org](t, "GetOrg")(s.GetOrg(ctx, acme.ID))
	if !got.Frozen || got.UpdatedAt.Before(acme.UpdatedAt) {
		t.Fatalf("after freezing: %+v", got)
	}
	if err := s.SetOrgFrozen(ctx, acme.ID, false); err != nil {
		t.Fatalf("SetOrgFrozen false: %v", err)
	}
	if got := must[store.Org](t, "GetOrg")(s.GetOrg(ctx, acme.ID)); got.Frozen {
		t.Fatal("org still frozen after unfreezing")
	}

	unknown := store.OrgID("0190a6f0-0000-7000-8000-000000000000")
	for _, id := range []store.OrgID{unknown, "not-a-uuid", "", store.OrgID(strings.ToUpper(string(acme.ID)))} {
		_, err := s.GetOrg(ctx, id)
		wantErr(t, "GetOrg "+string(id), err, store.ErrNotFound)
		wantErr(t, "SetOrgFrozen "+string(id), s.SetOrgFrozen(ctx, id, true), store.ErrNotFound)
	}
	_, err = s.FindOrgByName(ctx, "Nobody")
	wantErr(t, "FindOrgByName unknown", err, store.ErrNotFound)
}

func testOrgNames(t *testing.T, open Opener) {
	s := migrated(t, open)
	for _, name := range []string{"", " Acme", "Acme ", "Ac\nme", "Ac\x00me", strings.Repeat("x", 121), "\xff\xfe"} {
		_, err := s.CreateOrg(t.Context(), name)
		wantErr(t, "CreateOrg "+strings.ToValidUTF8(name, "?"), err, store.ErrInvalid)
	}
	for _, name := range []string{"x", "Ünïcödé GmbH", strings.Repeat("é", 120)} {
		if _, err := s.CreateOrg(t.Context(), name); err != nil {
			t.Fatalf("CreateOrg %q: %v", name, err)
		}
	}
}

func testCredit(t *testing.T, open Opener) {
	s := migrated(t, open)
	ctx := t.Context()
	org := newOrg(t, s, "Acme")
	other := newOrg(t, s, "Globex")

	o := must[store.Org](t, "AddCredit")(s.AddCredit(ctx, org.ID, 5_000_000, "top-up"))
	if o.CreditMicros != 5_000_000 {
		t.Fatalf("balance after top-up = %d", o.CreditMicros)
	}
	o = must[store.Org](t, "AddCredit")(s.AddCredit(ctx, org.ID, -1_250_000, "calls in June"))
	if o.CreditMicros != 3_750_000 {
		t.Fatalf("balance after spending = %d", o.CreditMicros)
	}
	if got := must[store.Org](t, "GetOrg")(s.GetOrg(ctx, org.ID)); got.CreditMicros != 3_750_000 {
		t.Fatalf("stored balance = %d", got.CreditMicros)
	}
	must[store.Org](t, "AddCredit other")(s.AddCredit(ctx, other.ID, 1, "other org"))

	txs := must[[]store.CreditTransaction](t, "ListCreditTransactions")(s.ListCreditTransactions(ctx, store.CreditFilter{OrgID: org.ID}))
	if len(txs) != 2 {
		t.Fatalf("got %d credit transactions, want 2: %+v", len(txs), txs)
	}
	if a, b := txs[0], txs[1]; a.AmountMicros != 5_000_000 || a.BalanceAfter != 5_000_000 || a.Reason != "top-up" ||
		b.AmountMicros != -1_250_000 || b.BalanceAfter != 3_750_000 || b.Reason != "calls in June" || a.OrgID != org.ID {
		t.Fatalf("credit transactions = %+v", txs)
	}
	page := must[[]store.CreditTransaction](t, "ListCreditTransactions page")(
		s.ListCreditTransactions(ctx, store.CreditFilter{OrgID: org.ID, AfterID: txs[0].ID, Limit: 1}))
	if len(page) != 1 || page[0].ID != txs[1].ID {
		t.Fatalf("second page = %+v", page)
	}

	_, err := s.AddCredit(ctx, org.ID, 0, "nothing")
	wantErr(t, "AddCredit 0", err, store.ErrInvalid)
	_, err = s.AddCredit(ctx, org.ID, 10, "")
	wantErr(t, "AddCredit without reason", err, store.ErrInvalid)
	_, err = s.AddCredit(ctx, org.ID, 1<<62, "too much")
	wantErr(t, "AddCredit out of range", err, store.ErrInvalid)
	unknown := store.OrgID("0190a6f0-0000-7000-8000-000000000000")
	_, err = s.AddCredit(ctx, unknown, 10, "ghost")
	wantErr(t, "AddCredit unknown org", err, store.ErrNotFound)
	if ghost := must[[]store.CreditTransaction](t, "List ghost")(s.ListCreditTransactions(ctx, store.CreditFilter{OrgID: unknown})); len(ghost) != 0 {
		t.Fatalf("an unknown org has credit transactions: %+v", ghost)
	}

	// Inside a transaction that rolls back, neither the balance nor the record changes.
	boom := errors.New("boom")
	err = s.Tx(ctx, func(tx *store.Tx) error {
		if _, err := tx.AddCredit(ctx, org.ID, 999, "rolled back"); err != nil {
			return err
		}
		return boom
	})
	wantErr(t, "Tx", err, boom)
	if got := must[store.Org](t, "GetOrg")(s.GetOrg(ctx, org.ID)); got.CreditMicros != 3_750_000 {
		t.Fatalf("balance after rollback = %d", got.CreditMicros)
	}
	if n := len(must[[]store.CreditTransaction](t, "List")(s.ListCreditTransactions(ctx, store.CreditFilter{OrgID: org.ID}))); n != 2 {
		t.Fatalf("%d credit transactions after rollback, want 2", n)
	}
}

func testProjects(t *testing.T, open Opener) {
	s := migrated(t, open)
	ctx := t.Context()
	acme := newOrg(t, s, "Acme")
	globex := newOrg(t, s, "Globex")
	web := newProject(t, s, acme.ID, "Web")
	phone := newProject(t, s, acme.ID, "Phone")
	if web.OrgID != acme.ID || web.Name != "Web" || web.Frozen {
		t.Fatalf("new project = %+v", web)
	}
	_, err := s.CreateProject(ctx, acme.ID, "Web")
	wantErr(t, "CreateProject with a taken name", err, store.ErrConflict)
	gweb := newProject(t, s, globex.ID, "Web") // the same name in another org is fine

	sameJSON(t, "GetProject", must[store.Project](t, "GetProject")(s.GetProject(ctx, web.ID)), web)
	sameJSON(t, "FindProjectByName", must[store.Project](t, "Find")(s.FindProjectByName(ctx, globex.ID, "Web")), gweb)
	_, err = s.FindProjectByName(ctx, globex.ID, "Phone")
	wantErr(t, "FindProjectByName in the wrong org", err, store.ErrNotFound)

	ps := must[[]store.Project](t, "ListProjects")(s.ListProjects(ctx, acme.ID))
	if len(ps) != 2 || ps[0].ID != web.ID || ps[1].ID != phone.ID {
		t.Fatalf("ListProjects = %+v, want Web then Phone", ps)
	}

	if err := s.SetProjectFrozen(ctx, phone.ID, true); err != nil {
		t.Fatalf("SetProjectFrozen: %v", err)
	}
	if got := must[store.Project](t, "GetProject")(s.GetProject(ctx, phone.ID)); !got.Frozen {
		t.Fatal("project not frozen")
	}

	unknownOrg := store.OrgID("0190a6f0-0000-7000-8000-000000000000")
	_, err = s.CreateProject(ctx, unknownOrg, "Lost")
	wantErr(t, "CreateProject in an unknown org", err, store.ErrNotFound)
	_, err = s.CreateProject(ctx, "nope", "Lost")
	wantErr(t, "CreateProject in a malformed org", err, store.ErrNotFound)
	_, err = s.CreateProject(ctx, acme.ID, "")
	wantErr(t, "CreateProject without a name", err, store.ErrInvalid)
	_, err = s.GetProject(ctx, store.ProjectID(unknownOrg))
	wantErr(t, "GetProject unknown", err, store.ErrNotFound)
	wantErr(t, "SetProjectFrozen unknown", s.SetProjectFrozen(ctx, "nope", true), store.ErrNotFound)
	if ps := must[[]store.Project](t, "ListProjects unknown")(s.ListProjects(ctx, unknownOrg)); len(ps) != 0 {
		t.Fatalf("unknown org has projects %+v", ps)
	}
}

// testOrgTransferAllow: the organization's transfer allow-list (issue 22 item 7) is stored
// canonical, replaced, cleared, refused when an entry is not an address or CIDR (the old list
// kept), and belongs to its organization only.
func testOrgTransferAllow(t *testing.T, open Opener) {
	s := migrated(t, open)
	ctx := t.Context()
	acme, globex := newOrg(t, s, "Acme"), newOrg(t, s, "Globex")
	if got := must[store.Org](t, "GetOrg")(s.GetOrg(ctx, acme.ID)); len(got.TransferAllow) != 0 {
		t.Fatalf("a new organization allows %v", got.TransferAllow)
	}
	if err := s.SetOrgTransferAllow(ctx, acme.ID, []string{"10.1.2.3/16", " 192.168.7.7", "10.1.0.0/16", "::ffff:172.16.0.1"}); err != nil {
		t.Fatalf("SetOrgTransferAllow: %v", err)
	}
	want := []string{"10.1.0.0/16", "192.168.7.7/32", "172.16.0.1/32"}
	got := must[store.Org](t, "GetOrg")(s.GetOrg(ctx, acme.ID))
	sameJSON(t, "transfer allow-list", got.TransferAllow, want)
	if other := must[store.Org](t, "GetOrg")(s.GetOrg(ctx, globex.ID)); len(other.TransferAllow) != 0 {
		t.Fatalf("another organization got the list: %v", other.TransferAllow)
	}
	for _, bad := range [][]string{{"10.0.0.0/99"}, {"pbx.local"}, {"10.0.0.1", ""}} {
		wantErr(t, "SetOrgTransferAllow "+strings.Join(bad, ","), s.SetOrgTransferAllow(ctx, acme.ID, bad), store.ErrInvalid)
	}
	sameJSON(t, "list after refusals", must[store.Org](t, "GetOrg")(s.GetOrg(ctx, acme.ID)).TransferAllow, want)
	if err := s.SetOrgTransferAllow(ctx, acme.ID, nil); err != nil {
		t.Fatalf("clear: %v", err)
	}
	if got := must[store.Org](t, "GetOrg")(s.GetOrg(ctx, acme.ID)); len(got.TransferAllow) != 0 {
		t.Fatalf("after clearing: %v", got.TransferAllow)
	}
	wantErr(t, "SetOrgTransferAllow unknown", s.SetOrgTransferAllow(ctx, "0190a6f0-0000-7000-8000-000000000000", nil), store.ErrNotFound)
}
