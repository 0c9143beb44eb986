package api

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/parley-voice/parley/control/fault"

	"github.com/parley-voice/parley/control/runtime"
	"github.com/parley-voice/parley/control/store"
	"github.com/parley-voice/parley/session"
)

var _ = register(
	scenario{"TestKeyCall", testTestKeyCall},
	scenario{"CallChecks", testCallChecks},
	scenario{"CallIdempotency", testCallIdempotency},
	scenario{"CallWithoutMedia", testCallWithoutMedia},
	scenario{"LiveCallFakeTrunk", testLiveCallFakeTrunk},
	scenario{"TestInboundCalls", testTestInboundCalls},
)

// outboundAgent is a published outbound agent with the phone and chat channels and a number.
func (w *world) outboundAgent(t *testing.T, number string) string {
	t.Helper()
	id := w.publishedAgent(t, w.p1.ID, "Caller "+randHex(2), "outbound", channels("phone", "chat", "voice"))
	w.number(t, w.p1.ID, id, number)
	return id
}

// testTestKeyCall places a call with a test key: it rings nobody, runs against the simulated
// callee, and goes through the real statuses, transcript, steering, live transcript and events.
func testTestKeyCall(t *testing.T, e engine) {
	w := newWorld(t, e.open(t), worldOpts{conv: &convOpts{pace: 150 * time.Millisecond}})
	agent := w.outboundAgent(t, "+14155550001")
	r := w.must(t, http.StatusCreated, req{method: "POST", path: "/v1/calls", key: kTest, header: idem("call-1"),
		body: map[string]any{"agent_id": agent, "to_number": "+14155550100", "variables": map[string]any{"customer": "Ada"},
			"metadata": map[string]any{"crm": "42"}, "external_id": "ext-1"}})
	id := r.Str("id")
	if r.Str("status") != "pending" || r.Str("mode") != "test" || r.Str("from_number") != "+14155550001" || r.Header.Get("Location") != "/v1/conversations/"+id {
		t.Fatalf("created %s", r)
	}
	if w.dialer.count() != 0 {
		t.Fatal("a test call reached the dialer")
	}
	// A live key does not see test conversations.
	w.fails(t, 404, fault.CodeConversationNotFound, req{method: "GET", path: "/v1/conversations/" + id, key: kLive})
	w.waitStatus(t, kTest, id, "in_progress")
	say := w.must(t, http.StatusAccepted, req{method: "POST", path: "/v1/conversations/" + id + "/say", key: kTest, body: map[string]any{"text": "A word from the supervisor."}})
	note := w.must(t, http.StatusAccepted, req{method: "POST", path: "/v1/conversations/" + id + "/notes", key: kTest, body: map[string]any{"text": "VIP", "visible_to_agent": true}})
	for _, c := range []*resp{say, note} {
		cmd := c.Str("id")
		waitFor(t, 5*time.Second, "command done", func() bool {
			g := w.must(t, 200, req{method: "GET", path: "/v1/conversations/" + id + "/commands/" + cmd, key: kTest})
			return g.Str("status") == "done"
		})
	}
	w.fails(t, 404, fault.CodeCommandNotFound, req{method: "GET", path: "/v1/conversations/" + id + "/commands/" + agent, key: kTest})
	lines := w.liveLines(t, kTest, id)
	all := strings.Join(lineTexts(lines), "\n")
	for _, want := range []string{"agent: Hello Ada, how can I help?", "user: Hello?", "agent: You said: Hello?", "agent: A word from the supervisor.", "note: VIP", "user: Thank you, goodbye."} {
		if !strings.Contains(all, want) {
			t.Fatalf("live transcript lacks %q:\n%s", want, all)
		}
	}
	got := w.waitStatus(t, kTest, id, "ended")
	if got.Str("end_reason") != "caller_hung_up" || got.JSON["ringing_at"] == nil || got.JSON["started_at"] == nil || got.JSON["duration_seconds"] == nil {
		t.Fatalf("ended %s", got)
	}
	// Reading it afterwards: the transcript, include=transcript and cost, filters.
	tr := w.must(t, 200, req{method: "GET", path: "/v1/conversations/" + id + "/transcript", key: kTest})
	if n := len(tr.JSON["lines"].([]any)); n != len(lines) || tr.JSON["ended"] != true {
		t.Fatalf("transcript has %d lines, live had %d", n, len(lines))
	}
	full := w.must(t, 200, req{method: "GET", path: "/v1/conversations/" + id + "?include=transcript&include=cost", key: kTest})
	if full.JSON["transcript"] == nil || full.Str("cost.object") != "conversation_cost" || full.JSON["cost"].(map[string]any)["charged"] != false {
		t.Fatalf("with includes %s", full)
	}
	ctx := context.Background()
	_, narrow, _ := w.st.CreateKey(ctx, store.NewKey{OrgID: w.org.ID, Name: "no-transcripts", Test: true, Scopes: []string{"conversations:read"}, AllProjects: true})
	w.keys["no-transcripts"] = narrow
	w.fails(t, 403, fault.CodeMissingPermission, req{method: "GET", path: "/v1/conversations/" + id + "?include=transcript", key: "no-transcripts"})
	w.fails(t, 403, fault.CodeMissingPermission, req{method: "GET", path: "/v1/conversations/" + id + "?include=cost", key: "no-transcripts"})
	w.fails(t, 422, fault.CodeInvalidParameter, req{method: "GET", path: "/v1/conversations/" + id + "?include=everything", key: kTest})
	for _, q := range []string{"?channel=phone&direction=outbound&status=ended", "?external_id=ext-1", "?agent_id=" + agent, "?created_after=2000-01-01T00:00:00Z&created_before=2100-01-01T00:00:00Z", "?project_id=" + string(w.p1.ID)} {
		l := w.must(t, 200, req{method: "GET", path: "/v1/conversations" + q, key: kTest})
		if d := l.JSON["data"].([]any); len(d) != 1 || d[0].(map[string]any)["id"] != id {
			t.Fatalf("list %s: %s", q, l)
		}
	}
	if l := w.must(t, 200, req{method: "GET", path: "/v1/conversations?channel=chat", key: kTest}); len(l.JSON["data"].([]any)) != 0 {
		t.Fatalf("chats: %s", l)
	}
	if l := w.must(t, 200, req{method: "GET", path: "/v1/conversations", key: kLive}); len(l.JSON["data"].([]any)) != 0 {
		t.Fatalf("the live key lists test conversations: %s", l)
	}
	w.fails(t, 422, fault.CodeInvalidParameter, req{method: "GET", path: "/v1/conversations?created_after=yesterday", key: kTest})
	w.fails(t, 422, fault.CodeInvalidParameter, req{method: "GET", path: "/v1/conversations/" + id + "/live?wait=31", key: kTest})
	w.fails(t, 422, fault.CodeInvalidParameter, req{method: "GET", path: "/v1/conversations/" + id + "/live?after=-1", key: kTest})
	// Ended: steering is refused; the live transcript answers at once, ended.
	w.fails(t, 409, fault.CodeConversationEnded, req{method: "POST", path: "/v1/conversations/" + id + "/say", key: kTest, body: map[string]any{"text": "late"}})
	w.fails(t, 409, fault.CodeConversationEnded, req{method: "POST", path: "/v1/conversations/" + id + "/end", key: kTest})
	if l := w.must(t, 200, req{method: "GET", path: "/v1/conversations/" + id + "/live?after=" + fmt.Sprint(len(lines)) + "&wait=30", key: kTest}); l.JSON["ended"] != true || len(l.JSON["lines"].([]any)) != 0 {
		t.Fatalf("live after the end: %s", l)
	}
	w.fails(t, 404, fault.CodeRecordingNotFound, req{method: "GET", path: "/v1/conversations/" + id + "/recording", key: kTest})
	evs, _ := w.st.ListEvents(ctx, w.org.ID, store.ModeTest, "", 20)
	var kinds []string // issue 14: answered, then the transcript in batches, the end and the whole transcript
	for _, e := range evs {
		if e.Type != "conversation.transcript" {
			kinds = append(kinds, e.Type)
		}
	}
	if strings.Join(kinds, ",") != "conversation.started,conversation.ended" {
		t.Fatalf("events %v", kinds)
	}
	// Transfer and end on other calls.
	for _, step := range []struct{ path, reason string }{{"/transfer", "transferred"}, {"/end", "ended_by_api"}} {
		r := w.must(t, http.StatusCreated, req{method: "POST", path: "/v1/calls", key: kTest, header: idem("call-" + step.path),
			body: map[string]any{"agent_id": agent, "to_number": "+14155550100", "variables": map[string]any{"customer": "Bo"}}})
		cid := r.Str("id")
		w.waitStatus(t, kTest, cid, "in_progress")
		var body any
		if step.path == "/transfer" {
			w.fails(t, 422, fault.CodeValidationFailed, req{method: "POST", path: "/v1/conversations/" + cid + "/transfer", key: kTest, body: map[string]any{"destination": "the desk"}})
			body = map[string]any{"destination": "sip:desk@pbx.example.com", "mode": "cold"}
		}
		w.must(t, http.StatusAccepted, req{method: "POST", path: "/v1/conversations/" + cid + step.path, key: kTest, body: body})
		if got := w.waitStatus(t, kTest, cid, "ended"); got.Str("end_reason") != step.reason {
			t.Fatalf("%s: ended %s", step.path, got.Str("end_reason"))
		}
	}
}

// testCallChecks answers every refusal of POST /v1/calls.
func testCallChecks(t *testing.T, e engine) {
	w := newWorld(t, e.open(t), worldOpts{conv: &convOpts{maxCalls: 1}})
	ctx := context.Background()
	agent := w.outboundAgent(t, "+14155550001")
	other := w.number(t, w.p1.ID, agent, "+14155550002")
	call := func(key, idemKey string, body map[string]any) req {
		b := map[string]any{"agent_id": agent, "to_number": "+14155550100", "variables": map[string]any{"customer": "Ada"}}
		for k, v := range body {
			if v == nil {
				delete(b, k)
			} else {
				b[k] = v
			}
		}
		return req{method: "POST", path: "/v1/calls", key: key, header: idem(idemKey), body: b}
	}
	w.fails(t, 400, fault.CodeIdempotencyMissing, req{method: "POST", path: "/v1/calls", key: kLive, body: map[string]any{"agent_id": agent, "to_number": "+14155550100"}})
	w.fails(t, 402, fault.CodeCreditExhausted, call(kLive, "k1", nil))
	w.credit(t, 10)
	w.fails(t, 404, fault.CodeAgentNotFound, call(kLive, "k2", map[string]any{"agent_id": "0190a6f0-0000-7000-8000-000000000000"}))
	inbound := w.publishedAgent(t, w.p1.ID, "Answerer", "inbound", channels("phone"))
	w.fails(t, 409, fault.CodeAgentNotOutbound, call(kLive, "k3", map[string]any{"agent_id": inbound}))
	draft := w.must(t, 201, req{method: "POST", path: "/v1/agents", key: kLive, body: map[string]any{"project_id": w.p1.ID, "definition": definition("Draft", "custom", "outbound", channels("phone"))}}).Str("id")
	w.fails(t, 409, fault.CodeAgentNotPublished, call(kLive, "k4", map[string]any{"agent_id": draft}))
	chatOnly := w.publishedAgent(t, w.p1.ID, "Chatty", "outbound", channels("chat"))
	w.fails(t, 409, fault.CodeChannelDisabled, call(kLive, "k5", map[string]any{"agent_id": chatOnly}))
	noNumber := w.publishedAgent(t, w.p1.ID, "Numberless", "outbound", channels("phone"))
	w.fails(t, 409, fault.CodeNoNumberToCallFrom, call(kLive, "k6", map[string]any{"agent_id": noNumber}))
	w.st.AddDoNotCall(ctx, w.org.ID, "+14155550199", "asked")
	w.fails(t, 409, fault.CodeDoNotCall, call(kLive, "k7", map[string]any{"to_number": "+14155550199"}))
	// 422: each place that does not fit is named.
	checks := []struct {
		body  map[string]any
		place string
	}{
		{map[string]any{"to_number": "555-0100"}, "/to_number"},
		{map[string]any{"from_number": "+14155550001", "phone_number_id": string(other.ID)}, "/phone_number_id"},
		{map[string]any{"from_number": "+19995550000"}, "/from_number"},
		{map[string]any{"phone_number_id": "0190a6f0-0000-7000-8000-000000000000"}, "/phone_number_id"},
		{map[string]any{"language": "fr"}, "/language"},
		{map[string]any{"variables": map[string]any{}}, "/variables/customer"},
		{map[string]any{"variables": map[string]any{"customer": "Ada", "colour": "red"}}, "/variables/colour"},
		{map[string]any{"variables": map[string]any{"customer": "{{x}}"}}, "/variables/customer"},
		{map[string]any{"agent_version": 7}, "/agent_version"},
		{map[string]any{"call_window": map[string]any{"timezone": "Mars/Base", "start": "09:00", "end": "17:00"}}, "/call_window/timezone"},
		{map[string]any{"call_window": map[string]any{"start": "9", "end": "17:00"}}, "/call_window/start"},
	}
	for i, c := range checks {
		r := w.do(t, call(kLive, fmt.Sprintf("v%d", i), c.body))
		if r.Status != 422 || !slices.ContainsFunc(r.errorPointers(), func(s string) bool { return strings.HasPrefix(s, c.place+" ") }) {
			t.Fatalf("%v: %s, want 422 naming %s", c.body, r, c.place)
		}
	}
	// Outside the call window: 422 outside_call_window, naming when it opens.
	now := time.Now().UTC()
	start := now.Add(2 * time.Hour)
	win := map[string]any{"timezone": "UTC", "start": start.Format("15:04"), "end": start.Add(time.Hour).Format("15:04")}
	r := w.fails(t, 422, fault.CodeOutsideCallWindow, call(kLive, "w1", map[string]any{"call_window": win}))
	opens, err := time.Parse(time.RFC3339, r.Str("opens_at"))
	if err != nil || opens.Sub(now) < time.Hour || opens.Sub(now) > 3*time.Hour || !strings.Contains(r.Str("detail"), "opens") {
		t.Fatalf("outside window: %s", r)
	}
	// The frozen project, and a body over 64 KB.
	w.fails(t, 413, fault.CodeBodyTooLarge, call(kLive, "big", map[string]any{"metadata": map[string]any{"x": strings.Repeat("a", 70<<10)}}))
	w.st.SetProjectFrozen(ctx, w.p1.ID, true)
	w.fails(t, 409, fault.CodeProjectFrozen, call(kLive, "frozen", nil))
	w.st.SetProjectFrozen(ctx, w.p1.ID, false)
	// The concurrent-call limit (1): a call that rings holds the slot.
	w.dialer.set(func(d *fakeDialer) { d.hold = true })
	held := w.must(t, 201, call(kLive, "hold", map[string]any{"agent_version": 1}))
	if held.JSON["agent_version"] != float64(1) {
		t.Fatalf("pinned version: %s", held)
	}
	w.waitStatus(t, kLive, held.Str("id"), "ringing")
	w.fails(t, 429, fault.CodeTooManyCalls, call(kLive, "second", nil))
	// It cannot be steered before it is answered; ending it cancels the dial and frees the slot.
	w.fails(t, 409, fault.CodeConversationNotLive, req{method: "POST", path: "/v1/conversations/" + held.Str("id") + "/say", key: kLive, body: map[string]any{"text": "hi"}})
	w.fails(t, 409, fault.CodeConversationNotLive, req{method: "POST", path: "/v1/conversations/" + held.Str("id") + "/listen", key: kLive})
	w.fails(t, 409, fault.CodeCallInProgress, req{method: "DELETE", path: "/v1/conversations/" + held.Str("id"), key: kLive})
	w.must(t, 202, req{method: "POST", path: "/v1/conversations/" + held.Str("id") + "/end", key: kLive})
	w.waitStatus(t, kLive, held.Str("id"), "ended")
	// The trunk cannot be reached: 502, and the attempt is recorded as failed.
	w.dialer.set(func(d *fakeDialer) {
		d.hold, d.fail = false, &runtime.DialFailure{Reason: session.EndFailed, Unreachable: true, Detail: "connection refused"}
	})
	w.fails(t, 502, fault.CodeUpstreamUnreachable, call(kLive, "down", nil))
	// No trunk on the media node: 501.
	w.dialer.set(func(d *fakeDialer) { d.fail, d.trunks = nil, map[string]bool{} })
	w.fails(t, 501, fault.CodePhoneUnavailable, call(kLive, "notrunk", nil))
}

// testCallIdempotency: the same key returns the same conversation and dials once.
func testCallIdempotency(t *testing.T, e engine) {
	w := newWorld(t, e.open(t), worldOpts{conv: &convOpts{}})
	w.credit(t, 10)
	agent := w.outboundAgent(t, "+14155550001")
	w.dialer.set(func(d *fakeDialer) { d.hold = true })
	body := map[string]any{"agent_id": agent, "to_number": "+14155550100", "variables": map[string]any{"customer": "Ada"}}
	first := w.must(t, 201, req{method: "POST", path: "/v1/calls", key: kLive, header: idem("same"), body: body})
	again := w.must(t, 201, req{method: "POST", path: "/v1/calls", key: kLive, header: idem("same"), body: body})
	if again.Str("id") != first.Str("id") || again.Header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("replay %s, first %s", again, first)
	}
	if n := w.dialer.count(); n != 1 {
		t.Fatalf("dialled %d times", n)
	}
	body["to_number"] = "+14155550101"
	w.fails(t, 422, fault.CodeIdempotencyReused, req{method: "POST", path: "/v1/calls", key: kLive, header: idem("same"), body: body})
	w.must(t, 202, req{method: "POST", path: "/v1/conversations/" + first.Str("id") + "/end", key: kLive})
	if got := w.waitStatus(t, kLive, first.Str("id"), "ended"); got.Str("end_reason") != "ended_by_api" {
		t.Fatalf("ended %s", got)
	}
}

// testCallWithoutMedia: a deployment without the media role places no live calls (501); test
// calls still run.
func testCallWithoutMedia(t *testing.T, e engine) {
	w := newWorld(t, e.open(t), worldOpts{conv: &convOpts{noMedia: true}})
	w.credit(t, 10)
	agent := w.outboundAgent(t, "+14155550001")
	body := map[string]any{"agent_id": agent, "to_number": "+14155550100", "variables": map[string]any{"customer": "Ada"}}
	w.fails(t, 501, fault.CodePhoneUnavailable, req{method: "POST", path: "/v1/calls", key: kLive, header: idem("a"), body: body})
	w.fails(t, 501, fault.CodePhoneUnavailable, req{method: "POST", path: "/v1/scheduled-calls", key: kLive, header: idem("b"), body: body})
	w.fails(t, 501, fault.CodeVoiceUnavailable, req{method: "POST", path: "/v1/web-calls", key: kLive, body: map[string]any{"agent_id": agent, "variables": map[string]any{"customer": "Ada"}}})
	r := w.must(t, 201, req{method: "POST", path: "/v1/calls", key: kTest, header: idem("c"), body: body})
	w.waitStatus(t, kTest, r.Str("id"), "ended")
}

// testLiveCallFakeTrunk places a live call through the fake trunk: it is answered, steered,
// transferred, charged, and its recording is served with Range.
func testLiveCallFakeTrunk(t *testing.T, e engine) {
	w := newWorld(t, e.open(t), worldOpts{conv: &convOpts{}})
	w.credit(t, 10)
	agent := w.outboundAgent(t, "+14155550001")
	r := w.must(t, 201, req{method: "POST", path: "/v1/calls", key: kLive, header: idem("live"),
		body: map[string]any{"agent_id": agent, "to_number": "+14155550100", "variables": map[string]any{"customer": "Ada"}}})
	id := r.Str("id")
	w.waitStatus(t, kLive, id, "in_progress")
	li := w.must(t, 201, req{method: "POST", path: "/v1/conversations/" + id + "/listen", key: kLive, body: map[string]any{"mode": "takeover"}})
	if li.Str("mode") != "takeover" || !strings.HasPrefix(li.Str("url"), "https://voice.example.test/listen/") {
		t.Fatalf("listener %s", li)
	}
	w.fails(t, 409, fault.CodeNotTransferable, req{method: "POST", path: "/v1/conversations/" + w.chat(t, kLive) + "/transfer", key: kLive, body: map[string]any{"destination": "+14155550111"}})
	say := w.must(t, 202, req{method: "POST", path: "/v1/conversations/" + id + "/say", key: kLive, body: map[string]any{"text": "One moment please.", "interrupt": true}})
	waitFor(t, 15*time.Second, "the say spoken", func() bool {
		return w.must(t, 200, req{method: "GET", path: "/v1/conversations/" + id + "/commands/" + say.Str("id"), key: kLive}).Str("status") != "pending"
	})
	tr := w.must(t, 202, req{method: "POST", path: "/v1/conversations/" + id + "/transfer", key: kLive, body: map[string]any{"destination": "+14155550111", "mode": "cold"}})
	got := w.waitStatus(t, kLive, id, "ended")
	if got.Str("end_reason") != "transferred" {
		t.Fatalf("ended %s", got)
	}
	// The command that caused the end is recorded before the end is stored: seen ended, it
	// reads done.
	if c := w.must(t, 200, req{method: "GET", path: "/v1/conversations/" + id + "/commands/" + tr.Str("id"), key: kLive}); c.Str("status") != "done" {
		t.Fatalf("transfer command %s", c)
	}
	full := w.must(t, 200, req{method: "GET", path: "/v1/conversations/" + id + "?include=cost", key: kLive})
	if full.JSON["cost"].(map[string]any)["charged"] != true {
		t.Fatalf("a live call was not charged: %s", full)
	}
	// The recording is named once it is complete.
	waitFor(t, 5*time.Second, "the recording", func() bool { return w.conv(t, kLive, id).JSON["has_recording"] == true })
	rec := w.must(t, 200, req{method: "GET", path: "/v1/conversations/" + id + "/recording", key: kLive})
	if rec.Header.Get("Content-Type") != "audio/wav" || string(rec.Body[:4]) != "RIFF" || string(rec.Body[8:12]) != "WAVE" {
		t.Fatalf("recording: %d %q %q", rec.Status, rec.Header.Get("Content-Type"), rec.Body[:12])
	}
	part := w.must(t, 206, req{method: "GET", path: "/v1/conversations/" + id + "/recording", key: kLive, header: map[string]string{"Range": "bytes=0-11"}})
	if string(part.Body) != string(rec.Body[:12]) || part.Header.Get("Content-Range") != fmt.Sprintf("bytes 0-11/%d", len(rec.Body)) {
		t.Fatalf("range: %q %q", part.Body, part.Header.Get("Content-Range"))
	}
	w.fails(t, 416, fault.CodeRangeNotSatisfiable, req{method: "GET", path: "/v1/conversations/" + id + "/recording", key: kLive, header: map[string]string{"Range": fmt.Sprintf("bytes=%d-", len(rec.Body)+10)}})
	// Deleting it removes the recording.
	w.must(t, 200, req{method: "DELETE", path: "/v1/conversations/" + id, key: kLive})
	w.fails(t, 404, fault.CodeConversationNotFound, req{method: "GET", path: "/v1/conversations/" + id + "/recording", key: kLive})
}

// testTestInboundCalls simulates inbound calls by agent and by number.
func testTestInboundCalls(t *testing.T, e engine) {
	w := newWorld(t, e.open(t), worldOpts{conv: &convOpts{}})
	agent := w.publishedAgent(t, w.p1.ID, "Desk", "inbound", channels("phone"))
	w.number(t, w.p1.ID, agent, "+14155550050")
	lines := []any{"Hi, I need help.", "With my bill.", "Thanks, bye."}
	r := w.must(t, 201, req{method: "POST", path: "/v1/test/inbound-calls", key: kLive,
		body: map[string]any{"to_number": "+14155550050", "from_number": "+14155550123", "lines": lines, "variables": map[string]any{"customer": "Cy"}}})
	id := r.Str("id")
	if r.Str("mode") != "test" || r.Str("direction") != "inbound" || r.Str("to_number") != "+14155550050" || r.Str("from_number") != "+14155550123" {
		t.Fatalf("created %s", r)
	}
	got := w.liveLines(t, kTest, id)
	want := []string{"agent: Hello Cy, how can I help?", "user: Hi, I need help.", "agent: You said: Hi, I need help.", "user: With my bill.",
		"agent: You said: With my bill.", "user: Thanks, bye.", "agent: You said: Thanks, bye."}
	if !slices.Equal(lineTexts(got), want) {
		t.Fatalf("transcript %q", lineTexts(got))
	}
	if g := w.waitStatus(t, kTest, id, "ended"); g.Str("end_reason") != "caller_hung_up" {
		t.Fatalf("ended %s", g)
	}
	w.must(t, 201, req{method: "POST", path: "/v1/test/inbound-calls", key: kTest, body: map[string]any{"agent_id": agent, "lines": []any{"Hi"}, "variables": map[string]any{"customer": "Di"}}})
	w.fails(t, 422, fault.CodeValidationFailed, req{method: "POST", path: "/v1/test/inbound-calls", key: kTest, body: map[string]any{"lines": []any{"Hi"}}})
	w.fails(t, 422, fault.CodeValidationFailed, req{method: "POST", path: "/v1/test/inbound-calls", key: kTest, body: map[string]any{"agent_id": agent, "to_number": "+14155550050", "lines": []any{"Hi"}}})
	w.fails(t, 422, fault.CodeValidationFailed, req{method: "POST", path: "/v1/test/inbound-calls", key: kTest, body: map[string]any{"agent_id": agent, "lines": []any{}}})
	w.fails(t, 404, fault.CodePhoneNumberNotFound, req{method: "POST", path: "/v1/test/inbound-calls", key: kTest, body: map[string]any{"to_number": "+14155559999", "lines": []any{"Hi"}}})
	out := w.outboundAgent(t, "+14155550051")
	w.fails(t, 409, fault.CodeAgentNotInbound, req{method: "POST", path: "/v1/test/inbound-calls", key: kTest, body: map[string]any{"agent_id": out, "lines": []any{"Hi"}, "variables": map[string]any{"customer": "E"}}})
	w.fails(t, 409, fault.CodeNoAudio, req{method: "POST", path: "/v1/conversations/" + id + "/listen", key: kTest})
}
