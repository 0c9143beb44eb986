package api

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/parley-voice/parley/control/fault"

	"github.com/parley-voice/parley/control/store"
)

var _ = register(
	scenario{"ScheduledCalls", testScheduledCalls},
	scenario{"ScheduledCallsTwoWorkers", testScheduledCallsTwoWorkers},
	scenario{"WebCalls", testWebCalls},
	scenario{"ScheduledCallsOfDeletedAgent", testScheduledCallsOfDeletedAgent},
)

// testScheduledCallsOfDeletedAgent: deleting an agent cancels its scheduled calls, of both key
// modes, saying why; the calls of other agents stay.
func testScheduledCallsOfDeletedAgent(t *testing.T, e engine) {
	w := newWorld(t, e.open(t), worldOpts{conv: &convOpts{}})
	w.credit(t, 10)
	gone, kept := w.outboundAgent(t, "+14155550001"), w.outboundAgent(t, "+14155550002")
	later := time.Now().Add(24 * time.Hour).UTC().Format(time.RFC3339)
	sched := func(key, agent string) string {
		return w.must(t, http.StatusCreated, req{method: "POST", path: "/v1/scheduled-calls", key: key, header: idem(randHex(6)),
			body: map[string]any{"agent_id": agent, "to_number": "+14155550100", "dial_at": later, "variables": map[string]any{"customer": "Ada"}}}).Str("id")
	}
	live, test, other := sched(kLive, gone), sched(kTest, gone), sched(kTest, kept)
	w.must(t, http.StatusOK, req{method: "DELETE", path: "/v1/agents/" + gone, key: kLive})
	for key, id := range map[string]string{kLive: live, kTest: test} {
		r := w.must(t, http.StatusOK, req{method: "GET", path: "/v1/scheduled-calls/" + id, key: key})
		if r.Str("status") != "cancelled" || r.Str("failure_code") != fault.CodeAgentNotFound || !strings.Contains(r.Str("failure_reason"), "deleted") {
			t.Fatalf("a scheduled call of the deleted agent: %s", r)
		}
	}
	if r := w.must(t, http.StatusOK, req{method: "GET", path: "/v1/scheduled-calls/" + other, key: kTest}); r.Str("status") != "scheduled" {
		t.Fatalf("another agent's call: %s", r)
	}
}

func testScheduledCalls(t *testing.T, e engine) {
	w := newWorld(t, e.open(t), worldOpts{conv: &convOpts{}})
	ctx := context.Background()
	agent := w.outboundAgent(t, "+14155550001")
	sched := func(key, idemKey string, extra map[string]any) req {
		b := map[string]any{"agent_id": agent, "to_number": "+14155550100", "variables": map[string]any{"customer": "Ada"}}
		for k, v := range extra {
			b[k] = v
		}
		return req{method: "POST", path: "/v1/scheduled-calls", key: key, header: idem(idemKey), body: b}
	}
	now := time.Now().UTC()
	// Due now: a worker dials it.
	due := w.must(t, http.StatusCreated, sched(kTest, "s1", nil))
	if due.Str("status") != "scheduled" || due.JSON["conversation_id"] != nil || due.Header.Get("Location") != "/v1/scheduled-calls/"+due.Str("id") {
		t.Fatalf("created %s", due)
	}
	// Later, with a window: due at the window's first opening at or after dial_at.
	dialAt := now.Add(48 * time.Hour).Truncate(time.Hour)
	later := w.must(t, http.StatusCreated, sched(kTest, "s2", map[string]any{"dial_at": dialAt.Format(time.RFC3339),
		"call_window": map[string]any{"timezone": "UTC", "start": dialAt.Add(3 * time.Hour).Format("15:04"), "end": dialAt.Add(4 * time.Hour).Format("15:04")}}))
	if got, _ := time.Parse(time.RFC3339, later.Str("due_at")); !got.Equal(dialAt.Add(3 * time.Hour)) {
		t.Fatalf("due_at %s, want %s", later.Str("due_at"), dialAt.Add(3*time.Hour))
	}
	w.fails(t, 422, fault.CodeValidationFailed, sched(kTest, "s3", map[string]any{"dial_at": now.Add(31 * 24 * time.Hour).Format(time.RFC3339)}))
	// Well in the past is refused; a moment ago means now.
	w.fails(t, 422, fault.CodeValidationFailed, sched(kTest, "s3-past", map[string]any{"dial_at": now.Add(-10 * time.Minute).Format(time.RFC3339)}))
	justPast := w.must(t, http.StatusCreated, sched(kTest, "s3-just-past", map[string]any{"dial_at": now.Add(-time.Minute).Format(time.RFC3339)}))
	if d, _ := time.Parse(time.RFC3339, justPast.Str("due_at")); justPast.Str("status") != "scheduled" || d.Before(now.Add(-time.Second)) {
		t.Fatalf("a moment ago: %s", justPast)
	}
	w.must(t, http.StatusOK, req{method: "DELETE", path: "/v1/scheduled-calls/" + justPast.Str("id"), key: kTest})
	// A window whose first opening after dial_at falls beyond the 30 days is refused.
	edge := now.Add(30*24*time.Hour - time.Hour).Truncate(time.Hour)
	late := w.fails(t, 422, fault.CodeValidationFailed, sched(kTest, "s3-window", map[string]any{"dial_at": edge.Format(time.RFC3339),
		"call_window": map[string]any{"timezone": "UTC", "start": edge.Add(-2 * time.Hour).Format("15:04"), "end": edge.Add(-time.Hour).Format("15:04")}}))
	if late.JSON["errors"].([]any)[0].(map[string]any)["pointer"] != "/call_window" {
		t.Fatalf("window past the limit: %s", late)
	}
	w.fails(t, 404, fault.CodeAgentNotFound, sched(kTest, "s4", map[string]any{"agent_id": "0190a6f0-0000-7000-8000-000000000000"}))
	w.st.AddDoNotCall(ctx, w.org.ID, "+14155550199", "")
	w.fails(t, 409, fault.CodeDoNotCall, sched(kTest, "s5", map[string]any{"to_number": "+14155550199"}))
	w.fails(t, 400, fault.CodeIdempotencyMissing, req{method: "POST", path: "/v1/scheduled-calls", key: kTest, body: map[string]any{"agent_id": agent, "to_number": "+14155550100"}})
	// Checked again when dialled: this one goes on the do-not-call list meanwhile.
	blocked := w.must(t, http.StatusCreated, sched(kTest, "s6", map[string]any{"to_number": "+14155550177"}))
	w.st.AddDoNotCall(ctx, w.org.ID, "+14155550177", "")
	placed, err := w.api.Calls.DialDue(ctx, "worker-1")
	if err != nil || placed != 1 {
		t.Fatalf("DialDue = %d, %v", placed, err)
	}
	got := w.must(t, 200, req{method: "GET", path: "/v1/scheduled-calls/" + due.Str("id"), key: kTest})
	if got.Str("status") != "placed" || got.Str("conversation_id") == "" || got.JSON["placed_at"] == nil {
		t.Fatalf("placed %s", got)
	}
	if c := w.waitStatus(t, kTest, got.Str("conversation_id"), "ended"); c.Str("end_reason") != "caller_hung_up" {
		t.Fatalf("its conversation %s", c)
	}
	failed := w.must(t, 200, req{method: "GET", path: "/v1/scheduled-calls/" + blocked.Str("id"), key: kTest})
	if failed.Str("status") != "failed" || failed.Str("failure_code") != fault.CodeDoNotCall {
		t.Fatalf("dialled onto the do-not-call list: %s", failed)
	}
	// issue 14: each outcome is an event carrying the scheduled call.
	for typ, id := range map[string]string{"scheduled_call.placed": got.Str("id"), "scheduled_call.failed": blocked.Str("id")} {
		ev := w.must(t, 200, req{method: "GET", path: "/v1/events?type=" + typ, key: kTest})
		data := ev.JSON["data"].([]any)
		if len(data) != 1 || data[0].(map[string]any)["data"].(map[string]any)["id"] != id {
			t.Fatalf("%s events: %s", typ, ev)
		}
	}
	// Cancelling: a waiting call, then a placed one (409).
	cancelled := w.must(t, 200, req{method: "DELETE", path: "/v1/scheduled-calls/" + later.Str("id"), key: kTest})
	if cancelled.Str("status") != "cancelled" || cancelled.JSON["cancelled_at"] == nil {
		t.Fatalf("cancelled %s", cancelled)
	}
	w.fails(t, 409, fault.CodeScheduledNotCancelable, req{method: "DELETE", path: "/v1/scheduled-calls/" + due.Str("id"), key: kTest})
	w.fails(t, 404, fault.CodeScheduledCallNotFound, req{method: "GET", path: "/v1/scheduled-calls/" + due.Str("id"), key: kLive})
	w.fails(t, 404, fault.CodeScheduledCallNotFound, req{method: "DELETE", path: "/v1/scheduled-calls/0190a6f0-0000-7000-8000-000000000000", key: kTest})
	list := w.must(t, 200, req{method: "GET", path: "/v1/scheduled-calls?status=placed", key: kTest})
	if d := list.JSON["data"].([]any); len(d) != 1 || d[0].(map[string]any)["id"] != due.Str("id") {
		t.Fatalf("placed list %s", list)
	}
	page := w.must(t, 200, req{method: "GET", path: "/v1/scheduled-calls?limit=2&agent_id=" + agent, key: kTest})
	if page.JSON["has_more"] != true {
		t.Fatalf("first page %s", page)
	}
	w.must(t, 200, req{method: "GET", path: "/v1/scheduled-calls?limit=2&agent_id=" + agent + "&cursor=" + page.Str("next_cursor"), key: kTest})
	// A live key: the credit is checked when the call is scheduled.
	w.fails(t, 402, fault.CodeCreditExhausted, sched(kLive, "live-1", nil))
}

// testScheduledCallsTwoWorkers: two workers dialling at once place every due call exactly once.
func testScheduledCallsTwoWorkers(t *testing.T, e engine) {
	w := newWorld(t, e.open(t), worldOpts{conv: &convOpts{pace: time.Millisecond}})
	ctx := context.Background()
	agent := w.outboundAgent(t, "+14155550001")
	const n = 12
	for i := range n {
		w.must(t, http.StatusCreated, req{method: "POST", path: "/v1/scheduled-calls", key: kTest, header: idem(fmt.Sprint("k", i)),
			body: map[string]any{"agent_id": agent, "to_number": fmt.Sprintf("+1415555%04d", i), "variables": map[string]any{"customer": "Ada"}}})
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	total := 0
	for _, worker := range []string{"w1", "w2"} {
		wg.Go(func() {
			for {
				placed, err := w.api.Calls.DialDue(ctx, worker)
				if err != nil {
					t.Errorf("%s: %v", worker, err)
					return
				}
				mu.Lock()
				total += placed
				mu.Unlock()
				if placed == 0 {
					return
				}
			}
		})
	}
	wg.Wait()
	if total != n {
		t.Fatalf("%d calls placed, want %d", total, n)
	}
	convs, err := w.st.ListConversations(ctx, store.ConversationFilter{OrgID: w.org.ID, Mode: store.ModeTest, Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, c := range convs {
		if seen[c.ToNumber] {
			t.Fatalf("%s was called twice", c.ToNumber)
		}
		seen[c.ToNumber] = true
	}
	if len(seen) != n {
		t.Fatalf("%d numbers called, want %d", len(seen), n)
	}
}

func testWebCalls(t *testing.T, e engine) {
	w := newWorld(t, e.open(t), worldOpts{conv: &convOpts{webCallsPerDay: 4, maxCalls: 2}})
	agent := w.outboundAgent(t, "+14155550001")
	body := map[string]any{"agent_id": agent, "variables": map[string]any{"customer": "Ada"}, "participant_name": "Ada Lovelace"}
	w.fails(t, 403, fault.CodeLiveKeyRequired, req{method: "POST", path: "/v1/web-calls", key: kTest, body: body})
	w.fails(t, 402, fault.CodeCreditExhausted, req{method: "POST", path: "/v1/web-calls", key: kLive, body: body})
	w.credit(t, 10)
	phoneOnly := w.publishedAgent(t, w.p1.ID, "Phone only", "outbound", channels("phone"))
	w.fails(t, 409, fault.CodeChannelDisabled, req{method: "POST", path: "/v1/web-calls", key: kLive, body: map[string]any{"agent_id": phoneOnly, "variables": map[string]any{"customer": "A"}}})
	r := w.must(t, http.StatusCreated, req{method: "POST", path: "/v1/web-calls", key: kLive, header: idem("web-1"), body: body})
	if r.Str("url") != "https://voice.example.test/call/wc1" || r.Str("token") == "" || r.Str("participant_name") != "Ada Lovelace" {
		t.Fatalf("web call %s", r)
	}
	if again := w.must(t, http.StatusCreated, req{method: "POST", path: "/v1/web-calls", key: kLive, header: idem("web-1"), body: body}); again.Str("conversation_id") != r.Str("conversation_id") {
		t.Fatalf("a retry made another call: %s", again)
	}
	id := r.Str("conversation_id")
	if c := w.conv(t, kLive, id); c.Str("status") != "pending" || c.Str("channel") != "voice" {
		t.Fatalf("before the page joins: %s", c)
	}
	// The page joins: the service starts the conversation.
	start := w.web.last()
	if start.ParticipantName != "Ada Lovelace" || start.ConversationID != id {
		t.Fatalf("request %+v", start)
	}
	conv, err := start.Start(context.Background(), &fakePort{}, start.Sink)
	if err != nil {
		t.Fatal(err)
	}
	w.waitStatus(t, kLive, id, "in_progress")
	// Too many calls at once (2), then the day's limit (4).
	second := w.must(t, http.StatusCreated, req{method: "POST", path: "/v1/web-calls", key: kLive, body: body})
	w.fails(t, 429, fault.CodeTooManyCalls, req{method: "POST", path: "/v1/web-calls", key: kLive, body: body})
	w.must(t, 202, req{method: "POST", path: "/v1/conversations/" + second.Str("conversation_id") + "/end", key: kLive})
	w.waitStatus(t, kLive, second.Str("conversation_id"), "ended")
	w.web.mu.Lock()
	w.web.fail = fmt.Errorf("the WebRTC service is closed")
	w.web.mu.Unlock()
	w.fails(t, 502, fault.CodeUpstreamUnreachable, req{method: "POST", path: "/v1/web-calls", key: kLive, body: body})
	w.fails(t, 429, fault.CodeDailyLimit, req{method: "POST", path: "/v1/web-calls", key: kLive, body: body})
	conv.End("ended_by_api")
	if c := w.waitStatus(t, kLive, id, "ended"); c.Str("end_reason") != "ended_by_api" {
		t.Fatalf("ended %s", c)
	}
}
