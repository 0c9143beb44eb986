package storetest

// issue 19: the messaging-app channel's repositories.

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/parley-voice/parley/control/store"
)

// testWhatsApp: senders are kept per project and seen only through a scope that reaches it;
// a phone-number id is connected once; a conversation's thread finds the open conversation
// and its window never moves back; an inbound wamid is stored once; status webhooks never move
// a message back; deleting a sender takes its messages.
func testWhatsApp(t *testing.T, open Opener) {
	w := newAgentWorld(t, open)
	ctx := t.Context()
	s := w.s
	a1 := w.create(t, w.p1.ID, "Answers")
	a2 := w.create(t, w.p2.ID, "Other")
	only1 := store.Scope{Org: w.org.ID, Projects: []store.ProjectID{w.p1.ID}}
	ns := store.NewWhatsAppSender{OrgID: w.org.ID, ProjectID: w.p1.ID, AgentID: a1.ID, PhoneNumberID: "106540352242922",
		BusinessAccountID: "102290129340398", DisplayNumber: "+1 555 0100", AccessTokenSecretID: "tok", AppSecretSecretID: "app", VerifyToken: "verify-me"}
	snd := must[store.WhatsAppSender](t, "Create")(s.WhatsAppSenders().Create(ctx, only1, ns))
	if _, err := s.WhatsAppSenders().Create(ctx, w.all(), ns); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("the same phone-number id again: %v", err)
	}
	other := ns
	other.PhoneNumberID, other.AgentID = "999", a2.ID
	if _, err := s.WhatsAppSenders().Create(ctx, w.all(), other); !errors.Is(err, store.ErrOtherProject) {
		t.Fatalf("an agent of another project: %v", err)
	}
	other.ProjectID = w.p2.ID
	if _, err := s.WhatsAppSenders().Create(ctx, only1, other); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("a project out of reach: %v", err)
	}
	bad := ns
	bad.PhoneNumberID = "has space"
	if _, err := s.WhatsAppSenders().Create(ctx, w.all(), bad); !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("a phone-number id with a space: %v", err)
	}
	snd2 := must[store.WhatsAppSender](t, "Create 2")(s.WhatsAppSenders().Create(ctx, w.all(), other))
	if got := must[[]store.WhatsAppSender](t, "List")(s.WhatsAppSenders().List(ctx, only1, store.Page{Limit: 10})); len(got) != 1 || got[0].ID != snd.ID {
		t.Fatalf("project one's senders: %+v", got)
	}
	if got := must[[]store.WhatsAppSender](t, "List all")(s.WhatsAppSenders().List(ctx, w.all(), store.Page{Limit: 1})); len(got) != 2 || got[0].ID != snd.ID {
		t.Fatalf("a page of one: %+v", got)
	}
	if _, err := s.WhatsAppSenders().Get(ctx, only1, snd2.ID); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("a sender out of reach: %v", err)
	}
	if _, err := s.WhatsAppSenders().Get(ctx, store.OrgScope(newOrg(t, s, "Globex").ID), snd.ID); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("another organization's sender: %v", err)
	}
	if got := must[store.WhatsAppSender](t, "by phone id")(s.WhatsAppSenderByPhoneNumberID(ctx, "106540352242922")); got.ID != snd.ID || got.AppSecretSecretID != "app" {
		t.Fatalf("by phone-number id: %+v", got)
	}
	empty := ""
	ch := must[store.WhatsAppSender](t, "Change")(s.WhatsAppSenders().Change(ctx, only1, snd.ID, store.WhatsAppSenderChange{AccessTokenSecretID: &empty}))
	if ch.AccessTokenSecretID != "" || ch.AppSecretSecretID != "app" || ch.AgentID != a1.ID {
		t.Fatalf("changed: %+v", ch)
	}

	// A conversation's thread.
	conv := must[store.Conversation](t, "CreateConversation")(s.CreateConversation(ctx, newConv(w, w.p1.ID, store.ChannelWhatsApp)))
	// Two conversations of a new user started together, on any nodes: the thread's
	// compare-and-set lets one in.
	var wc store.WhatsAppConversation
	{
		var wg sync.WaitGroup
		var won atomic.Int32
		convs := []store.Conversation{conv}
		for range 3 {
			convs = append(convs, must[store.Conversation](t, "CreateConversation")(s.CreateConversation(ctx, newConv(w, w.p1.ID, store.ChannelWhatsApp))))
		}
		results := make([]error, len(convs))
		for i, c := range convs {
			wg.Go(func() {
				got, err := s.CreateWhatsAppConversation(ctx, store.WhatsAppConversation{ConversationID: c.ID, OrgID: w.org.ID, SenderID: snd.ID, UserID: "16505551234"}, "")
				if results[i] = err; err == nil {
					won.Add(1)
					if c.ID != conv.ID {
						conv, wc = c, got
					} else {
						wc = got
					}
				}
			})
		}
		wg.Wait()
		if won.Load() != 1 {
			t.Fatalf("%d conversations started in one thread at once: %v", won.Load(), results)
		}
		for _, err := range results {
			if err != nil && !errors.Is(err, store.ErrConflict) {
				t.Fatalf("the loser's error: %v", err)
			}
		}
	}
	if cur := must[store.ConversationID](t, "Thread")(s.WhatsAppThread(ctx, snd.ID, "16505551234")); cur != conv.ID {
		t.Fatalf("the thread points at %s, not %s", cur, conv.ID)
	}
	if cur := must[store.ConversationID](t, "Thread")(s.WhatsAppThread(ctx, snd.ID, "nobody")); cur != "" {
		t.Fatalf("a thread never started: %s", cur)
	}
	// In progress, answered last by a node that then died: the reapers of lost calls leave it.
	if _, err := s.SetConversationStatus(ctx, conv.ID, store.ConvInProgress, time.Now()); err != nil {
		t.Fatal(err)
	}
	if err := s.SetConversationOwner(ctx, conv.ID, "node-gone"); err != nil {
		t.Fatal(err)
	}
	if cs, err := s.ActiveConversationsOf(ctx, "node-gone", 10); err != nil || len(cs) != 0 {
		t.Fatalf("a dead node's whatsapp conversations: %d %v", len(cs), err)
	}
	if owners, err := s.ActiveOwners(ctx); err != nil || slices.Contains(owners, "node-gone") {
		t.Fatalf("owners %v %v", owners, err)
	}
	if cs, err := s.ActiveConversations(ctx, time.Now().Add(time.Hour), 10); err != nil || slices.ContainsFunc(cs, func(c store.Conversation) bool { return c.ID == conv.ID }) {
		t.Fatalf("the reaper of lost calls sees it (%v)", err)
	}
	if got := must[store.WhatsAppConversation](t, "Open")(s.OpenWhatsAppConversation(ctx, snd.ID, "16505551234")); got.ConversationID != conv.ID || got.LastInboundAt != nil {
		t.Fatalf("open conversation: %+v", got)
	}
	t0 := time.Now().UTC().Truncate(time.Second)
	for _, at := range []time.Time{t0, t0.Add(-time.Hour)} {
		if err := s.TouchWhatsAppInbound(ctx, conv.ID, at); err != nil {
			t.Fatal(err)
		}
	}
	if got := must[store.WhatsAppConversation](t, "Get")(s.GetWhatsAppConversation(ctx, wc.ConversationID)); got.LastInboundAt == nil || !got.LastInboundAt.Equal(t0) {
		t.Fatalf("last inbound moved back: %+v", got.LastInboundAt)
	}
	if idle := must[[]store.WhatsAppConversation](t, "Idle")(s.IdleWhatsAppConversations(ctx, t0.Add(time.Second), 10)); len(idle) != 1 {
		t.Fatalf("idle last inbound before the cut: %+v", idle)
	}
	if idle := must[[]store.WhatsAppConversation](t, "Idle")(s.IdleWhatsAppConversations(ctx, t0.Add(-time.Hour), 10)); len(idle) != 0 {
		t.Fatalf("last inbound after the cut: %+v", idle)
	}

	// Messages: an inbound wamid once; statuses only forward.
	in := store.WhatsAppMessage{OrgID: w.org.ID, SenderID: snd.ID, ConversationID: conv.ID, Direction: store.WAInbound, WAMID: "wamid.IN1",
		UserID: "16505551234", Type: "text", Body: json.RawMessage(`{"text": {"body": "hi"}}`), Status: store.WAReceived}
	must[store.WhatsAppMessage](t, "Insert in")(s.InsertWhatsAppMessage(ctx, in))
	if _, err := s.InsertWhatsAppMessage(ctx, in); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("a replayed wamid: %v", err)
	}
	out := must[store.WhatsAppMessage](t, "Insert out")(s.InsertWhatsAppMessage(ctx, store.WhatsAppMessage{OrgID: w.org.ID, SenderID: snd.ID,
		ConversationID: conv.ID, Direction: store.WAOutbound, UserID: "16505551234", Type: "text", Status: store.WAPending}))
	if err := s.UpdateWhatsAppMessage(ctx, out.ID, store.WhatsAppMessageUpdate{WAMID: "wamid.OUT1", Status: store.WAAccepted, SentAt: &t0}); err != nil {
		t.Fatal(err)
	}
	code := 131047
	for _, st := range []struct {
		status string
		want   bool
	}{{store.WARead, true}, {store.WADelivered, false}, {store.WAFailed, true}, {store.WASent, false}} {
		var c *int
		if st.status == store.WAFailed {
			c = &code
		}
		_, changed, err := s.ApplyWhatsAppStatus(ctx, snd.ID, "wamid.OUT1", st.status, c, "Re-engagement message")
		if err != nil || changed != st.want {
			t.Fatalf("status %s: changed %v, %v", st.status, changed, err)
		}
	}
	if _, _, err := s.ApplyWhatsAppStatus(ctx, snd2.ID, "wamid.OUT1", store.WARead, nil, ""); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("another sender's message: %v", err)
	}
	msgs := must[[]store.WhatsAppMessage](t, "List")(s.ListWhatsAppMessages(ctx, conv.ID, store.Page{Limit: 10}))
	if len(msgs) != 2 || msgs[1].Status != store.WAFailed || msgs[1].ErrorCode == nil || *msgs[1].ErrorCode != code || msgs[1].SentAt == nil || msgs[0].WAMID != "wamid.IN1" {
		t.Fatalf("messages: %+v", msgs)
	}
	// Status webhooks of one message applied at once (Meta sends "delivered" and "failed" close
	// together, and the job queue runs them side by side): the highest rank wins whichever
	// commits last.
	for i := range 12 {
		wamid := fmt.Sprintf("wamid.RACE%d", i)
		o := must[store.WhatsAppMessage](t, "Insert race")(s.InsertWhatsAppMessage(ctx, store.WhatsAppMessage{OrgID: w.org.ID, SenderID: snd.ID,
			ConversationID: conv.ID, Direction: store.WAOutbound, UserID: "16505551234", Type: "text", Status: store.WAPending}))
		if err := s.UpdateWhatsAppMessage(ctx, o.ID, store.WhatsAppMessageUpdate{WAMID: wamid, Status: store.WAAccepted, SentAt: &t0}); err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		var changes atomic.Int32
		for _, st := range []string{store.WASent, store.WADelivered, store.WARead, store.WAFailed} {
			wg.Go(func() {
				var c *int
				if st == store.WAFailed {
					c = &code
				}
				_, changed, err := s.ApplyWhatsAppStatus(ctx, snd.ID, wamid, st, c, "")
				if err != nil {
					t.Errorf("%s %s: %v", wamid, st, err)
				}
				if changed {
					changes.Add(1)
				}
			})
		}
		wg.Wait()
		got := must[store.WhatsAppMessage](t, "Get race")(s.GetWhatsAppMessage(ctx, o.ID))
		if got.Status != store.WAFailed || got.ErrorCode == nil || *got.ErrorCode != code || changes.Load() < 1 {
			t.Fatalf("%s after four statuses at once: %s (code set %v), %d changes; want failed", wamid, got.Status, got.ErrorCode != nil, changes.Load())
		}
	}
	if _, err := s.EndConversation(ctx, conv.ID, store.ConversationEnd{Reason: "completed", At: time.Now()}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.OpenWhatsAppConversation(ctx, snd.ID, "16505551234"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("an ended conversation is open: %v", err)
	}
	// The next conversation takes the ended one's place only from it.
	next := must[store.Conversation](t, "next")(s.CreateConversation(ctx, newConv(w, w.p1.ID, store.ChannelWhatsApp)))
	nwc := store.WhatsAppConversation{ConversationID: next.ID, OrgID: w.org.ID, SenderID: snd.ID, UserID: "16505551234"}
	if _, err := s.CreateWhatsAppConversation(ctx, nwc, ""); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("a thread started twice: %v", err)
	}
	if _, err := s.CreateWhatsAppConversation(ctx, nwc, next.ID); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("a thread moved from a conversation it was not at: %v", err)
	}
	must[store.WhatsAppConversation](t, "move")(s.CreateWhatsAppConversation(ctx, nwc, conv.ID))
	if got := must[store.WhatsAppConversation](t, "Open next")(s.OpenWhatsAppConversation(ctx, snd.ID, "16505551234")); got.ConversationID != next.ID {
		t.Fatalf("open after the move: %+v", got)
	}
	must[store.WhatsAppSender](t, "Delete")(s.WhatsAppSenders().Delete(ctx, only1, snd.ID))
	if got, _ := s.ListWhatsAppMessages(ctx, conv.ID, store.Page{Limit: 10}); len(got) != 0 {
		t.Fatalf("messages of a deleted sender: %+v", got)
	}
	if _, err := s.WhatsAppSenders().Delete(ctx, only1, snd.ID); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("deleted twice: %v", err)
	}
}
