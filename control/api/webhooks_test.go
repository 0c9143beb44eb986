package api

import (
	"context"
	"fmt"
	"net/http"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/parley-voice/parley/control/store"
	"github.com/parley-voice/parley/internal/netguard"
)

// issue 14: events, webhook receivers and the analysis request over HTTP, on both stores,
// every answer checked against the document.
var _ = register(
	scenario{"WebhookReceivers", testWebhookReceivers},
	scenario{"WebhookDeliveriesResendTest", testWebhookDeliveriesResendTest},
	scenario{"EventsList", testEventsList},
)

// fakeDNS answers the test names without the network: *.example.com is public, private.
// example.com a private address, and nothing else resolves.
type fakeDNS struct{}

func (fakeDNS) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	switch {
	case host == "private.example.com":
		return []netip.Addr{netip.MustParseAddr("10.1.2.3")}, nil
	case host == "meta.example.com":
		return []netip.Addr{netip.MustParseAddr("93.184.216.34"), netip.MustParseAddr("169.254.169.254")}, nil
	case strings.HasSuffix(host, ".example.com"):
		return []netip.Addr{netip.MustParseAddr("93.184.216.34")}, nil
	}
	return nil, fmt.Errorf("no such host %s", host)
}

// testOutbound is the worlds' SSRF guard: the strict one, over fakeDNS.
var testOutbound = netguard.MustNew(netguard.Options{Resolver: fakeDNS{}})

func receiverBody(p store.ProjectID, url string, more map[string]any) map[string]any {
	b := map[string]any{"project_id": p, "url": url}
	for k, v := range more {
		b[k] = v
	}
	return b
}

func testWebhookReceivers(t *testing.T, e engine) {
	w := newWorld(t, e.open(t), worldOpts{})
	agent := w.publishedAgent(t, w.p1.ID, "Hooks", "outbound")
	otherAgent := w.publishedAgent(t, w.p2.ID, "Elsewhere", "outbound")

	// Create: the secret once, the default events, live for a live key.
	r := w.must(t, http.StatusCreated, req{method: "POST", path: "/v1/webhooks", key: kLive,
		body: receiverBody(w.p1.ID, "https://hooks.example.com/parley", map[string]any{"agent_ids": []string{agent}})})
	id, secret := r.Str("id"), r.Str("secret")
	if !strings.HasPrefix(secret, "whsec_") || r.Str("mode") != "live" || r.JSON["default_events"] != true || r.JSON["include_values"] != true {
		t.Fatalf("created %s", r)
	}
	evs := r.JSON["events"].([]any)
	if slices.Contains(evs, any("conversation.transcript")) || slices.Contains(evs, any("form.abandoned")) || !slices.Contains(evs, any("conversation.ended")) || slices.Contains(evs, any("webhook.test")) {
		t.Fatalf("default events %v", evs)
	}
	got := w.must(t, http.StatusOK, req{method: "GET", path: "/v1/webhooks/" + id, key: kLive})
	if strings.Contains(string(got.Body), secret) || got.JSON["secret"] != nil {
		t.Fatalf("the secret is shown again: %s", got)
	}
	// The secret is stored sealed, not in clear.
	var sealed string
	if err := w.st.DB().QueryRow("SELECT secret_sealed FROM webhook_receivers WHERE id = '" + id + "'").Scan(&sealed); err == nil && strings.Contains(sealed, strings.TrimPrefix(secret, "whsec_")) {
		t.Fatal("the secret is stored in clear")
	}

	// Bad input: 422 naming the place; nothing is stored.
	for _, c := range []struct {
		body map[string]any
		code string
	}{
		{receiverBody(w.p1.ID, "http://hooks.example.com/x", nil), "invalid_webhook_url"},
		{receiverBody(w.p1.ID, "https://private.example.com/x", nil), "invalid_webhook_url"},
		{receiverBody(w.p1.ID, "https://meta.example.com/x", nil), "invalid_webhook_url"},
		{receiverBody(w.p1.ID, "https://127.0.0.1/x", nil), "invalid_webhook_url"},
		{receiverBody(w.p1.ID, "https://nowhere.invalid/x", nil), "invalid_webhook_url"},
		{receiverBody(w.p1.ID, "https://hooks.example.com/x", map[string]any{"events": []string{"conversation.ended", "call.exploded"}}), "unknown_event_type"},
		{receiverBody(w.p1.ID, "https://hooks.example.com/x", map[string]any{"events": []string{"webhook.test"}}), "unknown_event_type"},
		{receiverBody(w.p1.ID, "https://hooks.example.com/x", map[string]any{"agent_ids": []string{otherAgent}}), "webhook_agent_not_found"},
	} {
		p := w.fails(t, http.StatusUnprocessableEntity, c.code, req{method: "POST", path: "/v1/webhooks", key: kLive, body: c.body})
		if c.code == "unknown_event_type" && strings.Contains(fmt.Sprint(c.body["events"]), "call.exploded") && !strings.Contains(p.Str("detail"), "call.exploded") {
			t.Fatalf("the unknown type is not named: %s", p)
		}
	}
	w.fails(t, http.StatusNotFound, "project_not_found", req{method: "POST", path: "/v1/webhooks", key: kNarrow, body: receiverBody(w.p2.ID, "https://hooks.example.com/x", nil)})

	// Ten per project: the 11th is 422.
	for i := 1; i < 10; i++ {
		w.must(t, http.StatusCreated, req{method: "POST", path: "/v1/webhooks", key: kLive, body: receiverBody(w.p1.ID, fmt.Sprintf("https://h%d.example.com/", i), nil)})
	}
	w.fails(t, http.StatusUnprocessableEntity, "webhook_receiver_limit_reached", req{method: "POST", path: "/v1/webhooks", key: kLive, body: receiverBody(w.p1.ID, "https://h11.example.com/", nil)})
	list := w.must(t, http.StatusOK, req{method: "GET", path: "/v1/webhooks?project_id=" + string(w.p1.ID) + "&limit=4", key: kLive})
	if len(list.JSON["data"].([]any)) != 4 || list.JSON["has_more"] != true {
		t.Fatalf("list %s", list)
	}
	// A test key sees and makes test receivers only.
	if l := w.must(t, http.StatusOK, req{method: "GET", path: "/v1/webhooks", key: kTest}); len(l.JSON["data"].([]any)) != 0 {
		t.Fatalf("a test key lists live receivers: %s", l)
	}
	w.fails(t, http.StatusNotFound, "webhook_receiver_not_found", req{method: "GET", path: "/v1/webhooks/" + id, key: kTest})
	tr := w.must(t, http.StatusCreated, req{method: "POST", path: "/v1/webhooks", key: kTest, body: receiverBody(w.p2.ID, "https://t.example.com/", map[string]any{"events": nil})})
	if tr.Str("mode") != "test" {
		t.Fatalf("a test key's receiver %s", tr)
	}

	// PATCH: events, back to the default with null, include_values, enabled false refused.
	u := w.must(t, http.StatusOK, req{method: "PATCH", path: "/v1/webhooks/" + id, key: kLive,
		body: map[string]any{"events": []string{"conversation.transcript", "form.abandoned"}, "include_values": false, "agent_ids": []string{}}})
	if u.JSON["default_events"] != false || len(u.JSON["events"].([]any)) != 2 || u.JSON["include_values"] != false || len(u.JSON["agent_ids"].([]any)) != 0 {
		t.Fatalf("patched %s", u)
	}
	u = w.must(t, http.StatusOK, req{method: "PATCH", path: "/v1/webhooks/" + id, key: kLive, body: map[string]any{"events": nil}})
	if u.JSON["default_events"] != true {
		t.Fatalf("events null: %s", u)
	}
	w.fails(t, http.StatusUnprocessableEntity, "invalid_webhook_url", req{method: "PATCH", path: "/v1/webhooks/" + id, key: kLive, body: map[string]any{"url": "https://private.example.com/"}})
	w.fails(t, http.StatusUnprocessableEntity, "unknown_event_type", req{method: "PATCH", path: "/v1/webhooks/" + id, key: kLive, body: map[string]any{"events": []string{"nope.nope"}}})
	w.fails(t, http.StatusUnprocessableEntity, "webhook_agent_not_found", req{method: "PATCH", path: "/v1/webhooks/" + id, key: kLive, body: map[string]any{"agent_ids": []string{otherAgent}}})
	w.fails(t, http.StatusUnprocessableEntity, "validation_failed", req{method: "PATCH", path: "/v1/webhooks/" + id, key: kLive, body: map[string]any{}})

	// Rotate: a new secret, once; both sign for a day.
	rot := w.must(t, http.StatusOK, req{method: "POST", path: "/v1/webhooks/" + id + "/rotate-secret", key: kLive})
	if rot.Str("secret") == secret || !strings.HasPrefix(rot.Str("secret"), "whsec_") || rot.JSON["previous_secret_expires_at"] == nil {
		t.Fatalf("rotated %s", rot)
	}

	// A frozen project refuses changes.
	if err := w.st.SetProjectFrozen(context.Background(), w.p1.ID, true); err != nil {
		t.Fatal(err)
	}
	w.fails(t, http.StatusConflict, "project_frozen", req{method: "PATCH", path: "/v1/webhooks/" + id, key: kLive, body: map[string]any{"include_values": true}})
	w.fails(t, http.StatusConflict, "project_frozen", req{method: "POST", path: "/v1/webhooks", key: kLive, body: receiverBody(w.p1.ID, "https://h12.example.com/", nil)})
	if err := w.st.SetProjectFrozen(context.Background(), w.p1.ID, false); err != nil {
		t.Fatal(err)
	}

	// Delete.
	d := w.must(t, http.StatusOK, req{method: "DELETE", path: "/v1/webhooks/" + id, key: kLive})
	if d.JSON["deleted"] != true {
		t.Fatalf("deleted %s", d)
	}
	w.fails(t, http.StatusNotFound, "webhook_receiver_not_found", req{method: "GET", path: "/v1/webhooks/" + id, key: kLive})
	w.must(t, http.StatusCreated, req{method: "POST", path: "/v1/webhooks", key: kLive, body: receiverBody(w.p1.ID, "https://h10.example.com/", nil)})
}

func testWebhookDeliveriesResendTest(t *testing.T, e engine) {
	w := newWorld(t, e.open(t), worldOpts{})
	a := w.must(t, http.StatusCreated, req{method: "POST", path: "/v1/webhooks", key: kLive, body: receiverBody(w.p1.ID, "https://a.example.com/", nil)}).Str("id")
	b := w.must(t, http.StatusCreated, req{method: "POST", path: "/v1/webhooks", key: kLive, body: receiverBody(w.p1.ID, "https://b.example.com/", nil)}).Str("id")
	d := w.must(t, http.StatusAccepted, req{method: "POST", path: "/v1/webhooks/" + a + "/test", key: kLive})
	if d.Str("status") != "pending" || d.Str("event_type") != "webhook.test" || d.Str("receiver_id") != a {
		t.Fatalf("test delivery %s", d)
	}
	l := w.must(t, http.StatusOK, req{method: "GET", path: "/v1/webhooks/" + a + "/deliveries?status=pending", key: kLive})
	if data := l.JSON["data"].([]any); len(data) != 1 || data[0].(map[string]any)["id"] != d.Str("id") {
		t.Fatalf("deliveries %s", l)
	}
	if l := w.must(t, http.StatusOK, req{method: "GET", path: "/v1/webhooks/" + b + "/deliveries", key: kLive}); len(l.JSON["data"].([]any)) != 0 {
		t.Fatalf("the test event reached another receiver: %s", l)
	}
	if l := w.must(t, http.StatusOK, req{method: "GET", path: "/v1/webhooks/" + a + "/deliveries?status=delivered", key: kLive}); len(l.JSON["data"].([]any)) != 0 {
		t.Fatalf("delivered: %s", l)
	}
	re := w.must(t, http.StatusAccepted, req{method: "POST", path: "/v1/webhooks/" + a + "/deliveries/" + d.Str("id") + "/resend", key: kLive})
	if re.Str("id") != d.Str("id") {
		t.Fatalf("a resend changed the webhook-id: %s", re)
	}
	w.fails(t, http.StatusNotFound, "webhook_delivery_not_found", req{method: "POST", path: "/v1/webhooks/" + b + "/deliveries/" + d.Str("id") + "/resend", key: kLive})
	w.fails(t, http.StatusNotFound, "webhook_receiver_not_found", req{method: "GET", path: "/v1/webhooks/" + a + "/deliveries", key: kTest})
	// The test event is listed, and a test key does not see it.
	ev := w.must(t, http.StatusOK, req{method: "GET", path: "/v1/events?type=webhook.test", key: kLive})
	if len(ev.JSON["data"].([]any)) != 1 {
		t.Fatalf("events %s", ev)
	}
	if ev := w.must(t, http.StatusOK, req{method: "GET", path: "/v1/events", key: kTest}); len(ev.JSON["data"].([]any)) != 0 {
		t.Fatalf("a test key sees live events: %s", ev)
	}
}

func testEventsList(t *testing.T, e engine) {
	w := newWorld(t, e.open(t), worldOpts{conv: &convOpts{}})
	w.credit(t, 10)
	agent := w.publishedAgent(t, w.p1.ID, "Events", "outbound", channels("chat"))
	chat := w.must(t, http.StatusCreated, req{method: "POST", path: "/v1/chats", key: kLive,
		body: map[string]any{"agent_id": agent, "variables": map[string]any{"customer": "Ada"}, "metadata": map[string]any{"crm": 7}}}).Str("id")
	w.fails(t, http.StatusConflict, "conversation_not_ended", req{method: "POST", path: "/v1/conversations/" + chat + "/analysis", key: kLive})
	w.must(t, http.StatusAccepted, req{method: "POST", path: "/v1/conversations/" + chat + "/end", key: kLive})
	w.waitStatus(t, kLive, chat, "ended")
	a := w.must(t, http.StatusAccepted, req{method: "POST", path: "/v1/conversations/" + chat + "/analysis", key: kLive})
	if a.Str("id") != chat || a.Str("status") != "ended" {
		t.Fatalf("analysis request answered %s", a)
	}
	w.fails(t, http.StatusNotFound, "conversation_not_found", req{method: "POST", path: "/v1/conversations/" + chat + "/analysis", key: kTest})

	var types []string
	waitFor(t, 10*time.Second, "the chat's events", func() bool {
		l := w.must(t, http.StatusOK, req{method: "GET", path: "/v1/events?conversation_id=" + chat, key: kLive})
		types = nil
		for _, x := range l.JSON["data"].([]any) {
			types = append(types, x.(map[string]any)["type"].(string))
		}
		return slices.Contains(types, "conversation.ended")
	})
	for _, want := range []string{"conversation.started", "conversation.ended", "conversation.transcript"} {
		if !slices.Contains(types, want) {
			t.Fatalf("events of the chat %v lack %s", types, want)
		}
	}
	l := w.must(t, http.StatusOK, req{method: "GET", path: "/v1/events?type=conversation.ended&conversation_id=" + chat, key: kLive})
	data := l.JSON["data"].([]any)
	if len(data) != 1 {
		t.Fatalf("ended events %s", l)
	}
	ev := data[0].(map[string]any)
	conv := ev["data"].(map[string]any)
	if ev["object"] != "event" || ev["conversation_id"] != chat || conv["id"] != chat || conv["status"] != "ended" || conv["metadata"].(map[string]any)["crm"] != float64(7) {
		t.Fatalf("the ended event %v", ev)
	}
	w.fails(t, http.StatusUnprocessableEntity, "unknown_event_type", req{method: "GET", path: "/v1/events?type=call.exploded", key: kLive})
	if l := w.must(t, http.StatusOK, req{method: "GET", path: "/v1/events?created_after=2999-01-01T00:00:00Z", key: kLive}); len(l.JSON["data"].([]any)) != 0 {
		t.Fatalf("events after 2999: %s", l)
	}
	page := w.must(t, http.StatusOK, req{method: "GET", path: "/v1/events?limit=1", key: kLive})
	if page.JSON["has_more"] != true {
		t.Fatalf("page %s", page)
	}
	w.must(t, http.StatusOK, req{method: "GET", path: "/v1/events?limit=1&cursor=" + page.Str("next_cursor"), key: kLive})
	if l := w.must(t, http.StatusOK, req{method: "GET", path: "/v1/events", key: kNarrow}); len(l.JSON["data"].([]any)) == 0 {
		t.Fatalf("the narrow key (project one) sees no event of project one: %s", l)
	}
}
