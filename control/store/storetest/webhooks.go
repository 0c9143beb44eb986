package storetest

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/parley-voice/parley/control/secrets"
	"github.com/parley-voice/parley/control/store"
)

// issue 14: webhook receivers, the fan-out of events into deliveries, attempts and events.
var webhookTests = []struct {
	name string
	fn   func(*testing.T, Opener)
}{
	{"WebhookReceivers", testWebhookReceivers},
	{"WebhookFanOut", testWebhookFanOut},
	{"WebhookDeliveries", testWebhookDeliveries},
	{"WebhookRecordSettled", testWebhookRecordSettled},
	{"EventsPurge", testEventsPurge},
	{"EventsList", testEventsList},
}

func hooksBox(t *testing.T) *secrets.Box {
	key := make([]byte, secrets.KeySize)
	for i := range key {
		key[i] = byte(i + 1)
	}
	b, err := secrets.NewBox(key)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func liveScope(w agentWorld) store.Scope {
	return store.Scope{Org: w.org.ID, AllProjects: true, Mode: store.ModeLive}
}

func testWebhookReceivers(t *testing.T, open Opener) {
	w := newAgentWorld(t, open)
	ctx := t.Context()
	box := hooksBox(t)
	live, test := liveScope(w), store.Scope{Org: w.org.ID, AllProjects: true, Mode: store.ModeTest}
	narrow := store.Scope{Org: w.org.ID, Projects: []store.ProjectID{w.p2.ID}, Mode: store.ModeLive}
	r := must[store.Receiver](t, "Create")(w.s.Receivers().Create(ctx, box, live, store.NewReceiver{ProjectID: w.p1.ID, Mode: store.ModeLive,
		URL: "https://hooks.example.com/a", IncludeValues: true, Secret: "whsec_c2VjcmV0c2VjcmV0c2VjcmV0c2VjcmV0"}))
	if r.Events != nil || len(r.AgentIDs) != 0 || r.SecretSealed == "" || r.SecretSealed == "whsec_c2VjcmV0c2VjcmV0c2VjcmV0c2VjcmV0" {
		t.Fatalf("created %+v", r)
	}
	got := must[store.Receiver](t, "Get")(w.s.Receivers().Get(ctx, live, r.ID))
	sameJSON(t, "read back", got, r)
	secs := must[[]string](t, "Secrets")(got.Secrets(box, time.Now()))
	if !slices.Equal(secs, []string{"whsec_c2VjcmV0c2VjcmV0c2VjcmV0c2VjcmV0"}) {
		t.Fatalf("secrets %v", secs)
	}
	// The other mode and a project outside the reach see nothing.
	for name, sc := range map[string]store.Scope{"test mode": test, "other project": narrow, "other org": store.OrgScope(newOrg(t, w.s, "Other").ID)} {
		if _, err := w.s.Receivers().Get(ctx, sc, r.ID); err == nil {
			t.Fatalf("%s reads the receiver", name)
		}
		if l, _ := w.s.Receivers().List(ctx, sc, "", store.Page{Limit: 10}); len(l) != 0 {
			t.Fatalf("%s lists %d receivers", name, len(l))
		}
	}
	_, err := w.s.Receivers().Create(ctx, box, narrow, store.NewReceiver{ProjectID: w.p1.ID, Mode: store.ModeLive, URL: "https://x.example", Secret: "whsec_x"})
	wantErr(t, "create outside the reach", err, store.ErrNotFound)
	// Ten per project, both modes together.
	for i := 1; i < store.MaxReceiversPerProject; i++ {
		mode, sc := store.ModeLive, live
		if i%2 == 0 {
			mode, sc = store.ModeTest, test
		}
		must[store.Receiver](t, "Create more")(w.s.Receivers().Create(ctx, box, sc, store.NewReceiver{ProjectID: w.p1.ID, Mode: mode, URL: "https://x.example", Secret: "whsec_x"}))
	}
	_, err = w.s.Receivers().Create(ctx, box, live, store.NewReceiver{ProjectID: w.p1.ID, Mode: store.ModeLive, URL: "https://x.example", Secret: "whsec_x"})
	wantErr(t, "an 11th", err, store.ErrFull)
	must[store.Receiver](t, "another project")(w.s.Receivers().Create(ctx, box, live, store.NewReceiver{ProjectID: w.p2.ID, Mode: store.ModeLive, URL: "https://x.example", Secret: "whsec_x"}))
	// Update, rotate, disable, enable, delete.
	evs := []string{"conversation.ended"}
	agents := []store.AgentID{"0190a6f0-0000-7000-8000-0000000000aa"}
	no := false
	u := must[store.Receiver](t, "Update")(w.s.Receivers().Update(ctx, live, r.ID, store.ReceiverChange{Events: &evs, AgentIDs: &agents, IncludeValues: &no}))
	if !slices.Equal(u.Events, evs) || len(u.AgentIDs) != 1 || u.IncludeValues {
		t.Fatalf("updated %+v", u)
	}
	var back []string
	u = must[store.Receiver](t, "Update back")(w.s.Receivers().Update(ctx, live, r.ID, store.ReceiverChange{Events: &back}))
	if u.Events != nil {
		t.Fatalf("events back to the default: %v", u.Events)
	}
	until := time.Now().Add(time.Hour)
	rot := must[store.Receiver](t, "Rotate")(w.s.Receivers().Rotate(ctx, box, live, r.ID, "whsec_bmV3bmV3bmV3bmV3bmV3bmV3bmV3bmV3", until))
	secs = must[[]string](t, "Secrets after rotation")(rot.Secrets(box, time.Now()))
	if !slices.Equal(secs, []string{"whsec_bmV3bmV3bmV3bmV3bmV3bmV3bmV3bmV3", "whsec_c2VjcmV0c2VjcmV0c2VjcmV0c2VjcmV0"}) {
		t.Fatalf("secrets during the overlap %v", secs)
	}
	if secs = must[[]string](t, "Secrets after the overlap")(rot.Secrets(box, until.Add(time.Second))); len(secs) != 1 {
		t.Fatalf("secrets after the overlap %v", secs)
	}
	if _, err := w.s.Receivers().Rotate(ctx, box, test, r.ID, "whsec_x", until); err == nil {
		t.Fatal("a test scope rotated a live receiver")
	}
	if err := w.s.DisableReceiver(ctx, r.ID, "answered 410 Gone", time.Now()); err != nil {
		t.Fatal(err)
	}
	d := must[store.Receiver](t, "Get disabled")(w.s.Receivers().Get(ctx, live, r.ID))
	if d.DisabledAt == nil || d.DisabledReason != "answered 410 Gone" || d.Hears("conversation.ended", "") {
		t.Fatalf("disabled %+v", d)
	}
	e := must[store.Receiver](t, "Enable")(w.s.Receivers().Update(ctx, live, r.ID, store.ReceiverChange{Enable: true}))
	if e.DisabledAt != nil {
		t.Fatal("still disabled")
	}
	if _, err := w.s.Receivers().Delete(ctx, test, r.ID); err == nil {
		t.Fatal("a test scope deleted a live receiver")
	}
	must[store.Receiver](t, "Delete")(w.s.Receivers().Delete(ctx, live, r.ID))
	_, err = w.s.Receivers().Get(ctx, live, r.ID)
	wantErr(t, "deleted", err, store.ErrNotFound)
}

func testWebhookFanOut(t *testing.T, open Opener) {
	w := newAgentWorld(t, open)
	ctx := t.Context()
	box := hooksBox(t)
	live, test := liveScope(w), store.Scope{Org: w.org.ID, AllProjects: true, Mode: store.ModeTest}
	agentA, agentB := store.AgentID("0190a6f0-0000-7000-8000-0000000000aa"), store.AgentID("0190a6f0-0000-7000-8000-0000000000bb")
	mk := func(sc store.Scope, mode store.Mode, p store.ProjectID, events []string, agents []store.AgentID) store.Receiver {
		return must[store.Receiver](t, "Create")(w.s.Receivers().Create(ctx, box, sc, store.NewReceiver{ProjectID: p, Mode: mode,
			URL: "https://x.example", Events: events, AgentIDs: agents, Secret: "whsec_x"}))
	}
	def := mk(live, store.ModeLive, w.p1.ID, nil, nil)
	transcripts := mk(live, store.ModeLive, w.p1.ID, []string{"conversation.transcript"}, nil)
	onlyB := mk(live, store.ModeLive, w.p1.ID, []string{"conversation.ended"}, []store.AgentID{agentB})
	testMode := mk(test, store.ModeTest, w.p1.ID, nil, nil)
	otherProject := mk(live, store.ModeLive, w.p2.ID, nil, nil)
	disabled := mk(live, store.ModeLive, w.p1.ID, nil, nil)
	if err := w.s.DisableReceiver(ctx, disabled.ID, "gone", time.Now()); err != nil {
		t.Fatal(err)
	}
	var kinds []string
	w.s.OnEnqueue(func(k string) { kinds = append(kinds, k) })
	defer w.s.OnEnqueue(nil)
	emit := func(typ string, agent store.AgentID, mode store.Mode) store.Event {
		var e store.Event
		before := len(kinds)
		err := w.s.Tx(ctx, func(tx *store.Tx) (err error) {
			e, err = tx.InsertEvent(ctx, store.Event{OrgID: w.org.ID, ProjectID: w.p1.ID, Mode: mode, Type: typ, AgentID: agent})
			if len(kinds) != before {
				t.Error("the enqueue was announced before the commit")
			}
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	emit("conversation.ended", agentA, store.ModeLive)
	if !slices.Equal(kinds, []string{store.WebhookDeliverKind}) {
		t.Fatalf("announced %v after the commit", kinds)
	}
	emit("conversation.ended", agentB, store.ModeLive)
	emit("conversation.transcript", agentA, store.ModeLive)
	emit("conversation.ended", agentA, store.ModeTest)
	emit("webhook.test", agentA, store.ModeLive) // never fanned out
	count := func(r store.Receiver, sc store.Scope) []string {
		ds := must[[]store.Delivery](t, "ListDeliveries")(w.s.Receivers().ListDeliveries(ctx, sc, r.ID, store.DeliveryFilter{}, store.Page{Limit: 50}))
		var out []string
		for _, d := range ds {
			out = append(out, d.EventType+"/"+d.Status)
		}
		return out
	}
	for _, c := range []struct {
		name string
		r    store.Receiver
		sc   store.Scope
		want []string
	}{
		{"default set: both ends, no transcript", def, live, []string{"conversation.ended/pending", "conversation.ended/pending"}},
		{"opted into transcripts only", transcripts, live, []string{"conversation.transcript/pending"}},
		{"agent filter", onlyB, live, []string{"conversation.ended/pending"}},
		{"test mode hears test events only", testMode, test, []string{"conversation.ended/pending"}},
		{"other project", otherProject, live, nil},
		{"disabled", disabled, live, nil},
	} {
		if got := count(c.r, c.sc); !slices.Equal(got, c.want) {
			t.Errorf("%s: deliveries %v, want %v", c.name, got, c.want)
		}
	}
	jobs := must[[]store.Job](t, "ListJobs")(w.s.ListJobs(ctx, store.JobFilter{Kind: store.WebhookDeliverKind, Limit: 100}))
	if len(jobs) != 5 {
		t.Fatalf("%d delivery jobs, want one per delivery (5)", len(jobs))
	}
	// A rolled-back event leaves no delivery and no job.
	_ = w.s.Tx(ctx, func(tx *store.Tx) error {
		_, _ = tx.InsertEvent(ctx, store.Event{OrgID: w.org.ID, ProjectID: w.p1.ID, Mode: store.ModeLive, Type: "conversation.ended"})
		return store.ErrConflict
	})
	if got := count(def, live); len(got) != 2 {
		t.Fatalf("a rolled-back event made deliveries: %v", got)
	}
}

func testWebhookDeliveries(t *testing.T, open Opener) {
	w := newAgentWorld(t, open)
	ctx := t.Context()
	box := hooksBox(t)
	live := liveScope(w)
	mk := func() store.Receiver {
		return must[store.Receiver](t, "Create")(w.s.Receivers().Create(ctx, box, live, store.NewReceiver{ProjectID: w.p1.ID, Mode: store.ModeLive, URL: "https://x.example", Secret: "whsec_eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4"}))
	}
	r1, r2 := mk(), mk()
	e := must[store.Event](t, "event")(w.s.InsertEvent(ctx, store.Event{OrgID: w.org.ID, ProjectID: w.p1.ID, Mode: store.ModeLive,
		Type: "conversation.ended", Data: json.RawMessage(`{"id": "x"}`)}))
	ds := must[[]store.Delivery](t, "list")(w.s.Receivers().ListDeliveries(ctx, live, r1.ID, store.DeliveryFilter{}, store.Page{Limit: 10}))
	if len(ds) != 1 || len(ds[0].AttemptList) != 0 {
		t.Fatalf("deliveries %+v", ds)
	}
	d := ds[0]
	snd := must[store.Sending](t, "GetSending")(w.s.GetSending(ctx, d.ID))
	if snd.Receiver.ID != r1.ID || snd.Event.ID != e.ID || string(snd.Event.Data) == "" || snd.Delivery.Status != store.DeliveryPending {
		t.Fatalf("sending %+v", snd)
	}
	next := time.Now().Add(5 * time.Second)
	d2 := must[store.Delivery](t, "RecordAttempt")(w.s.RecordAttempt(ctx, d.ID, store.AttemptOutcome{
		Attempt: store.DeliveryAttempt{At: time.Now(), StatusCode: 500, DurationMS: 12, Body: "\x00\xff" + strings.Repeat("b", 5000), Error: "answered 500"},
		Status:  store.DeliveryPending, NextAt: &next}))
	if d2.Attempts != 1 || d2.LastStatusCode != 500 || d2.Status != store.DeliveryPending {
		t.Fatalf("after a failed attempt %+v", d2)
	}
	must[store.Delivery](t, "RecordAttempt ok")(w.s.RecordAttempt(ctx, d.ID, store.AttemptOutcome{
		Attempt: store.DeliveryAttempt{At: time.Now(), StatusCode: 204, DurationMS: 3}, Status: store.DeliveryDelivered}))
	ds = must[[]store.Delivery](t, "list")(w.s.Receivers().ListDeliveries(ctx, live, r1.ID, store.DeliveryFilter{Status: store.DeliveryDelivered}, store.Page{Limit: 10}))
	if len(ds) != 1 || ds[0].Attempts != 2 || len(ds[0].AttemptList) != 2 || ds[0].DeliveredAt == nil ||
		len(ds[0].AttemptList[0].Body) != store.MaxAttemptBody || ds[0].AttemptList[1].StatusCode != 204 {
		t.Fatalf("delivered %+v", ds)
	}
	if ds = must[[]store.Delivery](t, "list pending")(w.s.Receivers().ListDeliveries(ctx, live, r1.ID, store.DeliveryFilter{Status: store.DeliveryPending}, store.Page{Limit: 10})); len(ds) != 0 {
		t.Fatalf("pending %+v", ds)
	}
	// Resend: same delivery, pending again, one more job; another receiver's delivery is not found.
	re := must[store.Delivery](t, "Resend")(w.s.Receivers().Resend(ctx, live, r1.ID, d.ID))
	if re.ID != d.ID || re.Status != store.DeliveryPending {
		t.Fatalf("resent %+v", re)
	}
	_, err := w.s.Receivers().Resend(ctx, live, r2.ID, d.ID)
	wantErr(t, "resend through another receiver", err, store.ErrNotFound)
	_, err = w.s.Receivers().Resend(ctx, store.Scope{Org: w.org.ID, AllProjects: true, Mode: store.ModeTest}, r1.ID, d.ID)
	wantErr(t, "resend from the other mode", err, store.ErrNotFound)
	jobs := must[[]store.Job](t, "ListJobs")(w.s.ListJobs(ctx, store.JobFilter{Kind: store.WebhookDeliverKind, Limit: 100}))
	var once int
	for _, j := range jobs {
		id, o, err := store.DeliveryIDOf(j.Payload)
		if err != nil {
			t.Fatal(err)
		}
		if id == d.ID && o {
			once++
		}
	}
	if len(jobs) != 3 || once != 1 {
		t.Fatalf("%d jobs (%d resends), want 3 (1)", len(jobs), once)
	}
	// Deleting the receiver drops its deliveries: the job finds nothing to send.
	must[store.Receiver](t, "Delete")(w.s.Receivers().Delete(ctx, live, r1.ID))
	_, err = w.s.GetSending(ctx, d.ID)
	wantErr(t, "sending of a deleted receiver", err, store.ErrNotFound)
}

func testEventsList(t *testing.T, open Opener) {
	w := newAgentWorld(t, open)
	ctx := t.Context()
	conv := store.ConversationID("0190a6f0-0000-7000-8000-0000000000cc")
	var ids []store.EventID
	for i, typ := range []string{"conversation.started", "conversation.ended", "conversation.analyzed"} {
		p := w.p1.ID
		if i == 2 {
			p = w.p2.ID
		}
		e := must[store.Event](t, "insert")(w.s.InsertEvent(ctx, store.Event{OrgID: w.org.ID, ProjectID: p, Mode: store.ModeLive, Type: typ, ConversationID: conv}))
		ids = append(ids, e.ID)
	}
	must[store.Event](t, "test")(w.s.InsertEvent(ctx, store.Event{OrgID: w.org.ID, ProjectID: w.p1.ID, Mode: store.ModeTest, Type: "conversation.ended"}))
	list := func(sc store.Scope, f store.EventFilter) []store.EventID {
		es := must[[]store.Event](t, "List")(w.s.Events().List(ctx, sc, f, store.Page{Limit: 10}))
		var out []store.EventID
		for _, e := range es {
			out = append(out, e.ID)
		}
		return out
	}
	live := liveScope(w)
	if got := list(live, store.EventFilter{}); !slices.Equal(got, []store.EventID{ids[2], ids[1], ids[0]}) {
		t.Fatalf("newest first: %v", got)
	}
	if got := list(live, store.EventFilter{Types: []string{"conversation.ended", "conversation.started"}}); !slices.Equal(got, []store.EventID{ids[1], ids[0]}) {
		t.Fatalf("by type: %v", got)
	}
	if got := list(live, store.EventFilter{ConversationID: "0190a6f0-0000-7000-8000-0000000000dd"}); len(got) != 0 {
		t.Fatalf("other conversation: %v", got)
	}
	if got := list(store.Scope{Org: w.org.ID, Projects: []store.ProjectID{w.p2.ID}, Mode: store.ModeLive}, store.EventFilter{ConversationID: conv}); !slices.Equal(got, []store.EventID{ids[2]}) {
		t.Fatalf("one project: %v", got)
	}
	if got := list(store.Scope{Org: w.org.ID, AllProjects: true, Mode: store.ModeTest}, store.EventFilter{}); len(got) != 1 {
		t.Fatalf("test mode sees %d events", len(got))
	}
	future := time.Now().Add(time.Hour)
	if got := list(live, store.EventFilter{CreatedAfter: &future}); len(got) != 0 {
		t.Fatalf("created after: %v", got)
	}
	es := must[[]store.Event](t, "page")(w.s.Events().List(ctx, live, store.EventFilter{}, store.Page{Limit: 1, After: string(ids[2])}))
	if len(es) != 2 || es[0].ID != ids[1] {
		t.Fatalf("second page %v", es)
	}
	n := must[int64](t, "PurgeEvents")(w.s.PurgeEvents(ctx, time.Now().Add(time.Minute)))
	if n != 4 {
		t.Fatalf("purged %d events, want 4", n)
	}
}

// testWebhookRecordSettled: RecordSettled stores the last attempts of several deliveries at once,
// as RecordAttempt does each; a delivery named twice gets two attempts; an unknown delivery
// fails the call and a pending outcome is refused.
func testWebhookRecordSettled(t *testing.T, open Opener) {
	w := newAgentWorld(t, open)
	ctx := t.Context()
	box := hooksBox(t)
	live := liveScope(w)
	r := must[store.Receiver](t, "Create")(w.s.Receivers().Create(ctx, box, live, store.NewReceiver{ProjectID: w.p1.ID, Mode: store.ModeLive, URL: "https://x.example", Secret: "whsec_eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4"}))
	for range 3 {
		must[store.Event](t, "event")(w.s.InsertEvent(ctx, store.Event{OrgID: w.org.ID, ProjectID: w.p1.ID, Mode: store.ModeLive,
			Type: "conversation.ended", Data: json.RawMessage(`{"id": "x"}`)}))
	}
	ds := must[[]store.Delivery](t, "list")(w.s.Receivers().ListDeliveries(ctx, live, r.ID, store.DeliveryFilter{}, store.Page{Limit: 10}))
	if len(ds) != 3 {
		t.Fatalf("%d deliveries, want 3", len(ds))
	}
	// GetSendings reads them together; an unknown delivery is left out.
	unknown := store.DeliveryID("0190a6f0-0000-7000-8000-00000000dead")
	sends := must[map[store.DeliveryID]store.Sending](t, "GetSendings")(w.s.GetSendings(ctx, []store.DeliveryID{ds[0].ID, ds[1].ID, unknown, ds[2].ID, "not-an-id"}))
	if len(sends) != 3 {
		t.Fatalf("GetSendings found %d, want 3", len(sends))
	}
	for _, d := range ds {
		one := must[store.Sending](t, "GetSending")(w.s.GetSending(ctx, d.ID))
		got := sends[d.ID]
		if got.Delivery.ID != d.ID || got.Receiver.ID != r.ID || got.Event.ID != d.EventID || got.Receiver.SecretSealed != one.Receiver.SecretSealed ||
			string(got.Event.Data) != string(one.Event.Data) || got.Delivery.Status != store.DeliveryPending {
			t.Fatalf("GetSendings %+v, GetSending %+v", got, one)
		}
	}
	settle := func(id store.DeliveryID, o store.AttemptOutcome) store.SettledAttempt {
		return store.SettledAttempt{DeliveryID: id, Outcome: o}
	}
	at := time.Now().Add(-time.Second).Truncate(time.Microsecond)
	ok := store.AttemptOutcome{Attempt: store.DeliveryAttempt{At: at, StatusCode: 204, DurationMS: 7}, Status: store.DeliveryDelivered}
	gone := store.AttemptOutcome{Attempt: store.DeliveryAttempt{At: at, StatusCode: 410, DurationMS: 9, Body: "bye\x00\xff", Error: "answered 410"}, Status: store.DeliveryFailed}
	refused := store.AttemptOutcome{Attempt: store.DeliveryAttempt{At: at, Error: "connection refused"}, Status: store.DeliveryFailed}
	err := w.s.Tx(ctx, func(tx *store.Tx) error {
		return tx.RecordSettled(ctx, []store.SettledAttempt{settle(ds[0].ID, ok), settle(ds[1].ID, gone), settle(ds[2].ID, refused)})
	})
	if err != nil {
		t.Fatalf("RecordSettled: %v", err)
	}
	byID := map[store.DeliveryID]store.Delivery{}
	for _, d := range must[[]store.Delivery](t, "list")(w.s.Receivers().ListDeliveries(ctx, live, r.ID, store.DeliveryFilter{}, store.Page{Limit: 10})) {
		byID[d.ID] = d
	}
	d0, d1, d2 := byID[ds[0].ID], byID[ds[1].ID], byID[ds[2].ID]
	if d0.Status != store.DeliveryDelivered || d0.Attempts != 1 || d0.DeliveredAt == nil || d0.NextAttemptAt != nil || d0.LastStatusCode != 204 ||
		len(d0.AttemptList) != 1 || d0.AttemptList[0].N != 1 || d0.AttemptList[0].StatusCode != 204 || d0.AttemptList[0].DurationMS != 7 || !d0.AttemptList[0].At.Equal(at) {
		t.Fatalf("delivered %+v", d0)
	}
	if d1.Status != store.DeliveryFailed || d1.DeliveredAt != nil || d1.LastStatusCode != 410 || len(d1.AttemptList) != 1 ||
		d1.AttemptList[0].Body != "bye\uFFFD\uFFFD" || d1.AttemptList[0].Error != "answered 410" {
		t.Fatalf("gone %+v", d1)
	}
	if d2.Status != store.DeliveryFailed || d2.LastStatusCode != 0 || len(d2.AttemptList) != 1 || d2.AttemptList[0].StatusCode != 0 ||
		d2.AttemptList[0].Error != "connection refused" {
		t.Fatalf("refused %+v", d2)
	}
	// A delivery named twice in one call (a resend settling with the attempt it followed).
	if err := w.s.RecordSettled(ctx, []store.SettledAttempt{settle(ds[0].ID, ok), settle(ds[0].ID, ok)}); err != nil {
		t.Fatal(err)
	}
	ds0 := must[[]store.Delivery](t, "list")(w.s.Receivers().ListDeliveries(ctx, live, r.ID, store.DeliveryFilter{Status: store.DeliveryDelivered}, store.Page{Limit: 10}))
	if len(ds0) != 1 || ds0[0].Attempts != 3 || len(ds0[0].AttemptList) != 3 || ds0[0].AttemptList[2].N != 3 {
		t.Fatalf("after two more attempts %+v", ds0)
	}
	// Nothing of a call that names an unknown delivery is kept.
	missing := store.DeliveryID("0190a6f0-0000-7000-8000-00000000beef")
	err = w.s.Tx(ctx, func(tx *store.Tx) error {
		return tx.RecordSettled(ctx, []store.SettledAttempt{settle(ds[1].ID, ok), settle(missing, ok)})
	})
	wantErr(t, "an unknown delivery", err, store.ErrNotFound)
	if d := must[store.Sending](t, "GetSending")(w.s.GetSending(ctx, ds[1].ID)); d.Delivery.Attempts != 1 || d.Delivery.Status != store.DeliveryFailed {
		t.Fatalf("after a failed call %+v", d.Delivery)
	}
	next := time.Now()
	wantErr(t, "a pending outcome", w.s.RecordSettled(ctx, []store.SettledAttempt{settle(ds[1].ID, store.AttemptOutcome{Status: store.DeliveryPending, NextAt: &next})}), store.ErrInvalid)
}

// testEventsPurge: PurgeEvents removes the events made before the cut (the node runs it with
// the cut 30 days back) and the settled deliveries made before it, with their attempts; an
// event with a delivery still pending is kept with that delivery until it settles; newer
// events and deliveries stay.
func testEventsPurge(t *testing.T, open Opener) {
	w := newAgentWorld(t, open)
	ctx := t.Context()
	box := hooksBox(t)
	live := liveScope(w)
	r := must[store.Receiver](t, "Create")(w.s.Receivers().Create(ctx, box, live, store.NewReceiver{ProjectID: w.p1.ID, Mode: store.ModeLive, URL: "https://x.example", Secret: "whsec_eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4"}))
	emit := func(typ string) store.Event {
		return must[store.Event](t, "event")(w.s.InsertEvent(ctx, store.Event{OrgID: w.org.ID, ProjectID: w.p1.ID, Mode: store.ModeLive, Type: typ}))
	}
	deliveryOf := func(e store.Event) store.DeliveryID {
		for _, d := range must[[]store.Delivery](t, "list")(w.s.Receivers().ListDeliveries(ctx, live, r.ID, store.DeliveryFilter{}, store.Page{Limit: 100})) {
			if d.EventID == e.ID {
				return d.ID
			}
		}
		return ""
	}
	delivered := store.AttemptOutcome{Attempt: store.DeliveryAttempt{At: time.Now(), StatusCode: 204}, Status: store.DeliveryDelivered}
	settledOld := emit("conversation.ended")    // its delivery settles: both go
	pendingOld := emit("conversation.ended")    // its delivery stays pending: both stay
	quietOld := emit("conversation.transcript") // no receiver hears it: it goes
	must[store.Delivery](t, "settle")(w.s.RecordAttempt(ctx, deliveryOf(settledOld), delivered))
	time.Sleep(5 * time.Millisecond)
	cut := time.Now()
	time.Sleep(5 * time.Millisecond)
	settledNew := emit("conversation.ended") // newer than the cut: stays
	must[store.Delivery](t, "settle")(w.s.RecordAttempt(ctx, deliveryOf(settledNew), delivered))

	n := must[int64](t, "PurgeEvents")(w.s.PurgeEvents(ctx, cut))
	if n != 2 {
		t.Fatalf("purged %d events, want 2 (the old settled one and the old one nobody hears)", n)
	}
	var left []store.EventID
	for _, e := range must[[]store.Event](t, "events")(w.s.Events().List(ctx, live, store.EventFilter{}, store.Page{Limit: 100})) {
		left = append(left, e.ID)
	}
	if want := []store.EventID{settledNew.ID, pendingOld.ID}; !slices.Equal(left, want) {
		t.Fatalf("events left %v, want %v (quiet %s, settled %s gone)", left, want, quietOld.ID, settledOld.ID)
	}
	ds := must[[]store.Delivery](t, "list")(w.s.Receivers().ListDeliveries(ctx, live, r.ID, store.DeliveryFilter{}, store.Page{Limit: 100}))
	if len(ds) != 2 || deliveryOf(settledOld) != "" || deliveryOf(pendingOld) == "" || deliveryOf(settledNew) == "" {
		t.Fatalf("deliveries left %+v", ds)
	}
	if _, err := w.s.GetSending(ctx, deliveryOf(pendingOld)); err != nil {
		t.Fatalf("the pending delivery cannot be sent any more: %v", err)
	}
	// Once it settles, the next purge takes it and its event.
	must[store.Delivery](t, "settle")(w.s.RecordAttempt(ctx, deliveryOf(pendingOld), delivered))
	if n := must[int64](t, "PurgeEvents")(w.s.PurgeEvents(ctx, cut)); n != 1 {
		t.Fatalf("second purge took %d events, want 1", n)
	}
	if ds := must[[]store.Delivery](t, "list")(w.s.Receivers().ListDeliveries(ctx, live, r.ID, store.DeliveryFilter{}, store.Page{Limit: 100})); len(ds) != 1 || ds[0].EventID != settledNew.ID {
		t.Fatalf("deliveries left %+v", ds)
	}
}
