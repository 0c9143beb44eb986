package storetest

import (
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/parley-voice/parley/control/store"
)

// campaignTests are the conformance tests of contacts, the do-not-call list and campaigns
// (issue 15).
var campaignTests = []struct {
	name string
	fn   func(*testing.T, Opener)
}{
	{"ContactsScopeAndUpsert", testContactsScopeAndUpsert},
	{"DoNotCallList", testDoNotCallList},
	{"CampaignLifecycle", testCampaignLifecycle},
	{"CampaignLeaseOnce", testCampaignLeaseOnce},
	{"CampaignBatchLeaseAndSettle", testCampaignBatchLeaseAndSettle},
	{"CampaignPlaceAttempt", testCampaignPlaceAttempt},
}

func testContactsScopeAndUpsert(t *testing.T, open Opener) {
	w := newAgentWorld(t, open)
	ctx := t.Context()
	p1 := store.Scope{Org: w.org.ID, Projects: []store.ProjectID{w.p1.ID}, Mode: store.ModeLive}
	c := must[store.Contact](t, "create")(w.s.Contacts().Create(ctx, p1, store.Contact{OrgID: w.org.ID, ProjectID: w.p1.ID,
		Number: "+14155550100", Name: "Ada", Timezone: "Europe/London", ExternalID: "crm-1", Variables: json.RawMessage(`{"plan":"gold"}`)}))
	_, err := w.s.Contacts().Create(ctx, p1, store.Contact{OrgID: w.org.ID, ProjectID: w.p1.ID, Number: "+14155550100"})
	wantErr(t, "same number", err, store.ErrConflict)
	for name, sc := range reachScopes(t, w) {
		if name == "the other mode" {
			continue // contacts belong to no key mode
		}
		_, err := w.s.Contacts().Get(ctx, sc, c.ID)
		wantErr(t, "get from "+name, err, store.ErrNotFound)
		_, err = w.s.Contacts().Delete(ctx, sc, c.ID)
		wantErr(t, "delete from "+name, err, store.ErrNotFound)
		if l := must[[]store.Contact](t, "list")(w.s.Contacts().List(ctx, sc, store.ContactFilter{}, store.Page{Limit: 10})); len(l) != 0 {
			t.Fatalf("%s lists %d contacts", name, len(l))
		}
		_, err = w.s.Contacts().Upsert(ctx, sc, w.p1.ID, []store.Contact{{Number: "+14155550101"}})
		if name == "another project" || name == "another organization" {
			wantErr(t, "upsert from "+name, err, store.ErrNotFound)
		}
	}
	// Upsert: by external id first, else by number; new ones created; ids kept.
	in := []store.Contact{
		{Number: "+14155550199", ExternalID: "crm-1", Name: "Ada L."}, // crm-1 moves to a new number
		{Number: "+14155550102", Name: "Bob"},
	}
	for i := range 1100 { // more than one chunk on either engine (100 on SQLite, 1,000 on PostgreSQL)
		in = append(in, store.Contact{Number: fmt.Sprintf("+1415556%04d", i)})
	}
	res := must[store.UpsertResult](t, "upsert")(w.s.Contacts().Upsert(ctx, p1, w.p1.ID, in))
	if res.Created[0] || res.Contacts[0].ID != c.ID || !res.Created[1] || !res.Created[1101] {
		t.Fatalf("upsert: created %v…, first %+v", res.Created[:3], res.Contacts[0])
	}
	again := must[store.UpsertResult](t, "upsert again")(w.s.Contacts().Upsert(ctx, p1, w.p1.ID, in))
	for i, cr := range again.Created {
		if cr || again.Contacts[i].ID != res.Contacts[i].ID {
			t.Fatalf("repeat %d: created %v, id %s vs %s", i, cr, again.Contacts[i].ID, res.Contacts[i].ID)
		}
	}
	all := must[[]store.Contact](t, "list")(w.s.Contacts().List(ctx, p1, store.ContactFilter{}, store.Page{Limit: 100}))
	if len(all) != 101 {
		t.Fatalf("a page of %d", len(all))
	}
	got := must[store.Contact](t, "get")(w.s.Contacts().Get(ctx, p1, c.ID))
	if got.Number != "+14155550199" || got.Name != "Ada L." || got.ExternalID != "crm-1" {
		t.Fatalf("upserted %+v", got)
	}
	// A row whose external id names one contact and whose number another holds: the first
	// takes the number, the second goes; no external id stays NULL (many contacts have none).
	x := must[store.Contact](t, "create x")(w.s.Contacts().Create(ctx, p1, store.Contact{OrgID: w.org.ID, ProjectID: w.p1.ID, Number: "+14155550300", ExternalID: "crm-9"}))
	y := must[store.Contact](t, "create y")(w.s.Contacts().Create(ctx, p1, store.Contact{OrgID: w.org.ID, ProjectID: w.p1.ID, Number: "+14155550301"}))
	mv := must[store.UpsertResult](t, "move")(w.s.Contacts().Upsert(ctx, p1, w.p1.ID, []store.Contact{{Number: "+14155550301", ExternalID: "crm-9", Name: "X"}, {Number: "+14155550302"}, {Number: "+14155550303"}}))
	if mv.Created[0] || mv.Contacts[0].ID != x.ID || !mv.Created[1] || !mv.Created[2] {
		t.Fatalf("move: %v %+v", mv.Created, mv.Contacts[0])
	}
	_, err = w.s.Contacts().Get(ctx, p1, y.ID)
	wantErr(t, "the contact whose number moved", err, store.ErrNotFound)
	if g := must[store.Contact](t, "get x")(w.s.Contacts().Get(ctx, p1, x.ID)); g.Number != "+14155550301" || g.Name != "X" || g.ExternalID != "crm-9" {
		t.Fatalf("moved %+v", g)
	}
	if g := must[store.Contact](t, "get new")(w.s.Contacts().Get(ctx, p1, mv.Contacts[2].ID)); g.ExternalID != "" || string(g.Variables) != "{}" {
		t.Fatalf("created without an external id: %+v", g)
	}
	got.Name = "Ada Lovelace"
	must[store.Contact](t, "update")(w.s.Contacts().Update(ctx, p1, got))
	must[store.Contact](t, "delete")(w.s.Contacts().Delete(ctx, p1, c.ID))
	_, err = w.s.Contacts().Get(ctx, p1, c.ID)
	wantErr(t, "deleted", err, store.ErrNotFound)
}

func testDoNotCallList(t *testing.T, open Opener) {
	w := newAgentWorld(t, open)
	ctx := t.Context()
	all := w.all()
	d, added, err := w.s.DoNotCallList().Add(ctx, all, store.DoNotCall{Number: "+14155550100", Reason: "asked", Source: store.DNCSourceCaller})
	if err != nil || !added || d.Source != store.DNCSourceCaller {
		t.Fatalf("add: %+v %v %v", d, added, err)
	}
	d2, added, err := w.s.DoNotCallList().Add(ctx, all, store.DoNotCall{Number: "+14155550100", Reason: "again", Source: store.DNCSourceAPI})
	if err != nil || added || d2.Reason != "asked" {
		t.Fatalf("add again: %+v %v %v", d2, added, err)
	}
	_, _, err = w.s.DoNotCallList().Add(ctx, all, store.DoNotCall{Number: "0155", Source: store.DNCSourceAPI})
	wantErr(t, "bad number", err, store.ErrInvalid)
	if on, _ := w.s.OnDoNotCall(ctx, w.org.ID, "+14155550100"); !on {
		t.Fatal("not on the list")
	}
	must[struct{}](t, "add 2")(struct{}{}, w.s.AddDoNotCall(ctx, w.org.ID, "+14155550200", ""))
	l := must[[]store.DoNotCall](t, "list")(w.s.DoNotCallList().List(ctx, all, "", store.Page{Limit: 1}))
	if len(l) != 2 || l[0].Number != "+14155550100" {
		t.Fatalf("list %+v", l)
	}
	l = must[[]store.DoNotCall](t, "list page 2")(w.s.DoNotCallList().List(ctx, all, "", store.Page{Limit: 1, After: l[0].Number}))
	if len(l) != 1 || l[0].Number != "+14155550200" {
		t.Fatalf("page 2 %+v", l)
	}
	for name, sc := range reachScopes(t, w) {
		if name == "the other mode" {
			continue // the list belongs to no key mode
		}
		if l := must[[]store.DoNotCall](t, "list from "+name)(w.s.DoNotCallList().List(ctx, sc, "", store.Page{Limit: 10})); len(l) != 0 {
			t.Fatalf("%s lists %d numbers", name, len(l))
		}
		_, err := w.s.DoNotCallList().Remove(ctx, sc, "+14155550100")
		wantErr(t, "remove from "+name, err, store.ErrNotFound)
	}
	must[store.DoNotCall](t, "remove")(w.s.DoNotCallList().Remove(ctx, all, "+14155550100"))
	if on, _ := w.s.OnDoNotCall(ctx, w.org.ID, "+14155550100"); on {
		t.Fatal("still on the list")
	}
}

func newCampaign(t *testing.T, w agentWorld, n int) (store.Campaign, store.Scope) {
	t.Helper()
	ag := w.create(t, w.p1.ID, "Caller "+fmt.Sprint(time.Now().UnixNano()))
	sc := store.Scope{Org: w.org.ID, Projects: []store.ProjectID{w.p1.ID}, Mode: store.ModeLive}
	var ccs []store.CampaignContact
	for i := range n {
		ccs = append(ccs, store.CampaignContact{ToNumber: fmt.Sprintf("+1415557%04d", i), Timezone: "America/New_York"})
	}
	c := must[store.Campaign](t, "create campaign")(w.s.Campaigns().Create(t.Context(), sc, store.Campaign{OrgID: w.org.ID, ProjectID: w.p1.ID,
		AgentID: ag.ID, Mode: store.ModeLive, Name: "Reminders", Status: store.CampaignDraft}, ccs))
	return c, sc
}

func testCampaignLifecycle(t *testing.T, open Opener) {
	w := newAgentWorld(t, open)
	ctx := t.Context()
	c, sc := newCampaign(t, w, 3)
	if c.Counts[store.ContactQueued] != 3 || c.Status != store.CampaignDraft {
		t.Fatalf("created %+v", c)
	}
	added := must[[]store.CampaignContact](t, "add")(w.s.Campaigns().AddContacts(ctx, c, []store.CampaignContact{
		{ToNumber: "+14155570000"}, {ToNumber: "+14155579999"}}))
	if len(added) != 1 || added[0].ToNumber != "+14155579999" {
		t.Fatalf("added %+v (a number the campaign has is left out)", added)
	}
	for name, s := range reachScopes(t, w) {
		_, err := w.s.Campaigns().Get(ctx, s, c.ID)
		wantErr(t, "get from "+name, err, store.ErrNotFound)
		if l := must[[]store.Campaign](t, "list")(w.s.Campaigns().List(ctx, s, store.CampaignFilter{}, store.Page{Limit: 10})); len(l) != 0 {
			t.Fatalf("%s lists %d", name, len(l))
		}
	}
	l := must[[]store.Campaign](t, "list")(w.s.Campaigns().List(ctx, sc, store.CampaignFilter{Status: store.CampaignDraft}, store.Page{Limit: 10}))
	if len(l) != 1 || l[0].Counts[store.ContactQueued] != 4 {
		t.Fatalf("list %+v", l)
	}
	now := time.Now()
	run := must[store.Campaign](t, "start")(w.s.Campaigns().Move(ctx, c.ID, []string{store.CampaignDraft}, store.CampaignRunning, "", "", now))
	if run.Status != store.CampaignRunning || run.StartedAt == nil {
		t.Fatalf("started %+v", run)
	}
	cur, err := w.s.Campaigns().Move(ctx, c.ID, []string{store.CampaignDraft}, store.CampaignRunning, "", "", now)
	if !errors.Is(err, store.ErrConflict) || cur.Status != store.CampaignRunning {
		t.Fatalf("start twice: %v %+v", err, cur)
	}
	must[store.Campaign](t, "pause")(w.s.Campaigns().Move(ctx, c.ID, []string{store.CampaignRunning}, store.CampaignPaused, "trunk down", "upstream_unreachable", now))
	p := must[store.Campaign](t, "get")(w.s.Campaigns().Get(ctx, sc, c.ID))
	if p.PausedReason != "trunk down" || p.PausedCode != "upstream_unreachable" {
		t.Fatalf("paused %+v", p)
	}
	must[store.Campaign](t, "cancel")(w.s.Campaigns().Move(ctx, c.ID, []string{store.CampaignPaused}, store.CampaignCancelled, "", "", now))
	if n := must[int64](t, "cancel queued")(w.s.Campaigns().CancelQueued(ctx, c.ID, now)); n != 4 {
		t.Fatalf("cancelled %d", n)
	}
	ccs := must[[]store.CampaignContact](t, "contacts")(w.s.Campaigns().ListContacts(ctx, c, store.CampaignContactFilter{State: store.ContactCancelled}, store.Page{Limit: 10}))
	if len(ccs) != 4 || ccs[0].FinishedAt == nil {
		t.Fatalf("contacts %+v", ccs)
	}
}

// testCampaignLeaseOnce: two workers leasing the same due contacts at once take each attempt
// once; an attempt placed is never given back; a given-back attempt restores the count.
func testCampaignLeaseOnce(t *testing.T, open Opener) {
	w := newAgentWorld(t, open)
	ctx := t.Context()
	c, _ := newCampaign(t, w, 20)
	now := time.Now()
	var mu sync.Mutex
	leased := map[store.CampaignContactID]int{}
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			due, err := w.s.DueCampaignContacts(ctx, c.ID, now, 100)
			if err != nil {
				t.Error(err)
				return
			}
			for _, cc := range due {
				err := w.s.Tx(ctx, func(tx *store.Tx) error {
					_, err := tx.LeaseCampaignAttempt(ctx, cc, now)
					return err
				})
				if errors.Is(err, store.ErrConflict) {
					continue
				}
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				leased[cc.ID]++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(leased) != 20 {
		t.Fatalf("%d contacts leased", len(leased))
	}
	for id, n := range leased {
		if n != 1 {
			t.Fatalf("contact %s leased %d times", id, n)
		}
	}
	load := must[store.CampaignLoad](t, "load")(w.s.CampaignLoadAt(ctx, c.ID, now.Add(time.Second)))
	if load.Active != 20 || load.StartedMinute != 20 || load.Unfinished != 20 {
		t.Fatalf("load %+v", load)
	}
	var a store.CampaignAttempt
	for id := range leased {
		cc := must[store.CampaignContact](t, "contact")(w.s.GetCampaignContact(ctx, id))
		a = must[store.CampaignAttempt](t, "attempt")(w.s.GetCampaignAttempt(ctx, cc.ConversationID))
		break
	}
	next := now.Add(time.Hour)
	must[struct{}](t, "give back")(struct{}{}, w.s.GiveBackAttempt(ctx, a, "paused", &next, now))
	cc := must[store.CampaignContact](t, "contact")(w.s.GetCampaignContact(ctx, a.CampaignContactID))
	if cc.State != store.ContactQueued || cc.Attempts != 0 || cc.NextAttemptAt == nil {
		t.Fatalf("given back %+v", cc)
	}
	wantErr(t, "place a given-back attempt", w.s.MarkAttemptPlaced(ctx, a.ConversationID), store.ErrConflict)
	// Stale leased attempts with no conversation are settled by the dialler.
	settle := must[[]store.AttemptToSettle](t, "settle")(w.s.AttemptsToSettle(ctx, c.ID, now.Add(time.Minute), 100))
	if len(settle) != 19 {
		t.Fatalf("%d to settle", len(settle))
	}
	s := settle[0].Attempt
	must[struct{}](t, "finish")(struct{}{}, w.s.FinishAttempt(ctx, s, "no_answer", "", store.ContactQueued, &next, now))
	wantErr(t, "finish twice", w.s.FinishAttempt(ctx, s, "no_answer", "", store.ContactQueued, &next, now), store.ErrConflict)
	cc = must[store.CampaignContact](t, "contact")(w.s.GetCampaignContact(ctx, s.CampaignContactID))
	if cc.State != store.ContactQueued || cc.Attempts != 1 || cc.LastOutcome != "no_answer" {
		t.Fatalf("after no answer %+v", cc)
	}
	if r := must[[]store.CampaignAttempt](t, "recent")(w.s.RecentAttemptOutcomes(ctx, c.ID, 5)); len(r) != 1 || r[0].Outcome != "no_answer" {
		t.Fatalf("recent %+v", r)
	}
}

// testCampaignBatchLeaseAndSettle: a tick's batch lease leaves out the contacts another took
// and enqueues one job per attempt; the attempt's joined read sees the do-not-call list as it
// is now; the batch settle leaves out an attempt settled already and moves each contact to
// its state; a batch of events is recorded whole.
func testCampaignBatchLeaseAndSettle(t *testing.T, open Opener) {
	w := newAgentWorld(t, open)
	ctx := t.Context()
	c, _ := newCampaign(t, w, 6)
	now := time.Now()
	due := must[[]store.CampaignContact](t, "due")(w.s.DueCampaignContacts(ctx, c.ID, now, 100))
	if len(due) != 6 {
		t.Fatalf("%d due", len(due))
	}
	for _, cc := range due[:2] { // another tick took these two
		must[struct{}](t, "lease one")(struct{}{}, w.s.Tx(ctx, func(tx *store.Tx) error { _, err := tx.LeaseCampaignAttempt(ctx, cc, now); return err }))
	}
	kind := "test.campaign_attempt." + fmt.Sprint(now.UnixNano())
	var as []store.CampaignAttempt
	must[struct{}](t, "lease batch")(struct{}{}, w.s.Tx(ctx, func(tx *store.Tx) error {
		var err error
		as, err = tx.LeaseCampaignAttempts(ctx, due, now, func(a store.CampaignAttempt) store.AttemptJob {
			return store.AttemptJob{Kind: kind, Payload: json.RawMessage(`{"conversation_id":"` + string(a.ConversationID) + `"}`),
				DedupeKey: "test:" + string(a.ConversationID), MaxAttempts: 3}
		})
		return err
	}))
	if len(as) != 4 {
		t.Fatalf("%d leased, want the 4 not taken", len(as))
	}
	jobs := must[[]store.Job](t, "jobs")(w.s.ListJobs(ctx, store.JobFilter{Kind: kind, Limit: 100}))
	if len(jobs) != 4 || jobs[0].State != store.JobQueued || jobs[0].MaxAttempts != 3 {
		t.Fatalf("jobs %+v", jobs)
	}
	for _, a := range as {
		cc := must[store.CampaignContact](t, "contact")(w.s.GetCampaignContact(ctx, a.CampaignContactID))
		if cc.State != store.ContactDialing || cc.Attempts != 1 || cc.ConversationID != a.ConversationID || a.Attempt != 1 {
			t.Fatalf("leased %+v for %+v", cc, a)
		}
	}
	d := must[store.AttemptToDial](t, "to dial")(w.s.GetAttemptToDial(ctx, as[0].ConversationID))
	if d.Attempt.State != store.AttemptLeased || d.Campaign.ID != c.ID || d.Contact.ID != as[0].CampaignContactID || d.Org.ID != w.org.ID || d.OnDNC {
		t.Fatalf("to dial %+v", d)
	}
	if _, _, err := w.s.DoNotCallList().Add(ctx, w.all(), store.DoNotCall{Number: d.Contact.ToNumber, Source: store.DNCSourceAPI}); err != nil {
		t.Fatal(err)
	}
	if d = must[store.AttemptToDial](t, "to dial")(w.s.GetAttemptToDial(ctx, as[0].ConversationID)); !d.OnDNC {
		t.Fatal("the number put on the list is not seen at dial time")
	}
	_, err := w.s.GetAttemptToDial(ctx, store.NewConversationID())
	wantErr(t, "no such attempt", err, store.ErrNotFound)

	next := now.Add(time.Hour)
	must[struct{}](t, "finish one")(struct{}{}, w.s.FinishAttempt(ctx, as[0], "busy", "", "busy", nil, now))
	var done []bool
	must[struct{}](t, "finish batch")(struct{}{}, w.s.Tx(ctx, func(tx *store.Tx) error {
		var err error
		done, err = tx.FinishAttempts(ctx, []store.CampaignAttemptOutcome{
			{Attempt: as[0], Outcome: "no_answer", State: "no_answer"}, // settled already
			{Attempt: as[1], Outcome: "no_answer", Detail: "ring timeout", State: store.ContactQueued, Next: &next},
			{Attempt: as[2], Outcome: "failed", Detail: "upstream_unreachable", State: "failed"},
		}, now)
		return err
	}))
	if len(done) != 3 || done[0] || !done[1] || !done[2] {
		t.Fatalf("finished %v", done)
	}
	if cc := must[store.CampaignContact](t, "contact")(w.s.GetCampaignContact(ctx, as[0].CampaignContactID)); cc.State != "busy" || cc.LastOutcome != "busy" {
		t.Fatalf("settled twice: %+v", cc)
	}
	cc := must[store.CampaignContact](t, "contact")(w.s.GetCampaignContact(ctx, as[1].CampaignContactID))
	if cc.State != store.ContactQueued || cc.LastDetail != "ring timeout" || cc.NextAttemptAt == nil || !cc.NextAttemptAt.Equal(next.Truncate(time.Microsecond)) || cc.FinishedAt != nil {
		t.Fatalf("retried %+v", cc)
	}
	cc = must[store.CampaignContact](t, "contact")(w.s.GetCampaignContact(ctx, as[2].CampaignContactID))
	if cc.State != "failed" || cc.LastDetail != "upstream_unreachable" || cc.FinishedAt == nil || cc.NextAttemptAt != nil {
		t.Fatalf("failed %+v", cc)
	}
	r := must[[]store.CampaignAttempt](t, "recent")(w.s.RecentAttemptOutcomes(ctx, c.ID, 10))
	if len(r) != 3 {
		t.Fatalf("recent %+v", r)
	}

	before := must[[]store.Event](t, "events")(w.s.ListEvents(ctx, w.org.ID, store.ModeLive, "", 1000))
	var es []store.Event
	for i := range 3 {
		es = append(es, store.Event{OrgID: w.org.ID, ProjectID: w.p1.ID, Mode: store.ModeLive, Type: "campaign.contact_finished",
			Data: json.RawMessage(fmt.Sprintf(`{"n":%d}`, i))})
	}
	must[struct{}](t, "events")(struct{}{}, w.s.Tx(ctx, func(tx *store.Tx) error { _, err := tx.InsertEvents(ctx, es); return err }))
	after := must[[]store.Event](t, "events")(w.s.ListEvents(ctx, w.org.ID, store.ModeLive, "", 1000))
	if len(after) != len(before)+3 {
		t.Fatalf("%d events recorded, want 3", len(after)-len(before))
	}
	bad := []store.Event{es[0], {OrgID: w.org.ID, Mode: store.ModeLive}}
	wantErr(t, "an event with no type", w.s.Tx(ctx, func(tx *store.Tx) error { _, err := tx.InsertEvents(ctx, bad); return err }), store.ErrInvalid)
}

// testCampaignPlaceAttempt: placing an attempt stores its conversation, its placed mark and
// the audit event together; an attempt no longer leased, a campaign no longer running, a
// number on the do-not-call list or a project outside the organization writes none of the
// three.
func testCampaignPlaceAttempt(t *testing.T, open Opener) {
	w := newAgentWorld(t, open)
	ctx := t.Context()
	c, _ := newCampaign(t, w, 5)
	now := time.Now()
	must[store.Campaign](t, "start")(w.s.Campaigns().Move(ctx, c.ID, []string{store.CampaignDraft}, store.CampaignRunning, "", "", now))
	var as []store.CampaignAttempt
	for _, cc := range must[[]store.CampaignContact](t, "due")(w.s.DueCampaignContacts(ctx, c.ID, now, 10)) {
		must[struct{}](t, "lease")(struct{}{}, w.s.Tx(ctx, func(tx *store.Tx) error {
			a, err := tx.LeaseCampaignAttempt(ctx, cc, now)
			as = append(as, a)
			return err
		}))
	}
	conv := func(a store.CampaignAttempt, p store.ProjectID) store.Conversation {
		return store.Conversation{ID: a.ConversationID, OrgID: w.org.ID, ProjectID: p, AgentID: c.AgentID, Channel: store.ChannelPhone,
			Direction: "outbound", Mode: store.ModeLive, Language: "en", ToNumber: "+14155570000"}
	}
	audit := func(a store.CampaignAttempt) store.AuditEvent {
		return store.AuditEvent{OrgID: w.org.ID, ProjectID: w.p1.ID, ActorType: store.ActorSystem, ActorID: "campaign",
			Action: "call.created", ObjectType: "conversation", ObjectID: string(a.ConversationID), Data: json.RawMessage(`{"attempt": 1}`)}
	}
	placed := func(a store.CampaignAttempt, want bool) {
		t.Helper()
		got := must[store.CampaignAttempt](t, "attempt")(w.s.GetCampaignAttempt(ctx, a.ConversationID))
		_, err := w.s.GetConversation(ctx, a.ConversationID)
		if want != (got.State == store.AttemptPlaced) || want != (err == nil) {
			t.Fatalf("attempt %s: state %s, conversation read: %v (want placed: %v)", a.ConversationID, got.State, err, want)
		}
	}
	audited := func(want int) {
		t.Helper()
		if l := must[[]store.AuditEvent](t, "audit")(w.s.ListAudit(ctx, store.AuditFilter{OrgID: w.org.ID, Actions: []string{"call.created"}})); len(l) != want {
			t.Fatalf("%d call.created events, want %d", len(l), want)
		}
	}
	place := func(q *store.Queries, a store.CampaignAttempt, p store.ProjectID, job *store.JobLease) (store.Conversation, error) {
		c, _, err := q.PlaceAttempt(ctx, conv(a, p), audit(a), job, time.Now())
		return c, err
	}
	other := newProject(t, w.s, newOrg(t, w.s, "Other").ID, "Theirs")
	_, err := place(w.s.Queries, as[0], other.ID, nil)
	wantErr(t, "place with another organization's project", err, store.ErrNotFound)
	placed(as[0], false)
	audited(0)

	// Placed with its job's lease: the job is done in the same commit.
	j := enqueue(t, w.s, store.NewJob{Kind: "campaign-place-test"})
	lease := claim(t, w.s, "worker-1", time.Now(), time.Minute, 1, "campaign-place-test")[0].Lease()
	got, completed, err := w.s.PlaceAttempt(ctx, conv(as[0], w.p1.ID), audit(as[0]), &lease, time.Now())
	if err != nil || !completed {
		t.Fatalf("place with the job's lease: completed %v, %v", completed, err)
	}
	if jj := getJob(t, w.s, j.ID); jj.State != store.JobDone || jj.FinishedAt == nil {
		t.Fatalf("the job after the placing: %+v", jj)
	}
	if got.ID != as[0].ConversationID || got.Status != store.ConvPending || got.CreatedAt.IsZero() {
		t.Fatalf("placed %+v", got)
	}
	placed(as[0], true)
	audited(1)
	_, err = place(w.s.Queries, as[0], w.p1.ID, nil)
	wantErr(t, "place twice", err, store.ErrConflict)
	audited(1)

	next := now.Add(time.Hour)
	must[struct{}](t, "give back")(struct{}{}, w.s.GiveBackAttempt(ctx, as[1], "paused", &next, now))
	// Refused: a job whose lease is given stays running (the worker records its end).
	j2 := enqueue(t, w.s, store.NewJob{Kind: "campaign-place-test"})
	lease2 := claim(t, w.s, "worker-1", time.Now(), time.Minute, 1, "campaign-place-test")[0].Lease()
	_, err = place(w.s.Queries, as[1], w.p1.ID, &lease2)
	wantErr(t, "place a given-back attempt", err, store.ErrConflict)
	placed(as[1], false)
	if jj := getJob(t, w.s, j2.ID); jj.State != store.JobRunning {
		t.Fatalf("the job of a refused placing: %+v", jj)
	}

	cc := must[store.CampaignContact](t, "contact")(w.s.GetCampaignContact(ctx, as[4].CampaignContactID))
	if _, _, err := w.s.DoNotCallList().Add(ctx, w.all(), store.DoNotCall{Number: cc.ToNumber, Source: store.DNCSourceAPI}); err != nil {
		t.Fatal(err)
	}
	_, err = place(w.s.Queries, as[4], w.p1.ID, nil)
	wantErr(t, "place a number put on the do-not-call list", err, store.ErrConflict)
	placed(as[4], false)
	audited(1)

	must[store.Campaign](t, "pause")(w.s.Campaigns().Move(ctx, c.ID, []string{store.CampaignRunning}, store.CampaignPaused, "", "", now))
	_, err = place(w.s.Queries, as[2], w.p1.ID, nil)
	wantErr(t, "place in a paused campaign", err, store.ErrConflict)
	placed(as[2], false)
	audited(1)
	must[store.Campaign](t, "resume")(w.s.Campaigns().Move(ctx, c.ID, []string{store.CampaignPaused}, store.CampaignRunning, "", "", now))

	// A lease lost meanwhile (another worker claimed the job again): the attempt is placed all
	// the same (its placed mark keeps it to one call), the job is left to its new holder.
	stale := lease2
	stale.Owner = "worker-gone"
	_, completed, err = w.s.PlaceAttempt(ctx, conv(as[2], w.p1.ID), audit(as[2]), &stale, time.Now())
	if err != nil || completed {
		t.Fatalf("place with a lost lease: completed %v, %v", completed, err)
	}
	placed(as[2], true)
	audited(2)
	if jj := getJob(t, w.s, j2.ID); jj.State != store.JobRunning || jj.LeaseOwner != "worker-1" {
		t.Fatalf("the job of another holder: %+v", jj)
	}

	// In the caller's transaction, it rolls back with it, the job's completion too.
	rollback := errors.New("roll back")
	err = w.s.Tx(ctx, func(tx *store.Tx) error {
		if _, err := place(tx.Queries, as[3], w.p1.ID, &lease2); err != nil {
			return err
		}
		return rollback
	})
	wantErr(t, "place in a rolled-back transaction", err, rollback)
	placed(as[3], false)
	audited(2)
	if jj := getJob(t, w.s, j2.ID); jj.State != store.JobRunning {
		t.Fatalf("the job of a rolled-back placing: %+v", jj)
	}
}
