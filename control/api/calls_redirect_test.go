package api

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/parley-voice/parley/control/runtime"
	"github.com/parley-voice/parley/control/store"
)

var _ = register(scenario{"CallRedirectRecorded", testCallRedirectRecorded})

// testCallRedirectRecorded (issue 21): the 3xx steps of a live call's dial are recorded on its
// conversation, as conversation.redirected events naming the conversation.
func testCallRedirectRecorded(t *testing.T, e engine) {
	w := newWorld(t, e.open(t), worldOpts{conv: &convOpts{}})
	w.credit(t, 10)
	w.dialer.set(func(d *fakeDialer) {
		d.redirects = []runtime.Redirect{
			{Status: 302, From: "sip:+14155550100@carrier", To: "sip:+14155550100@10.0.0.9", State: "refused", Reason: "destination not allowed"},
			{Status: 302, From: "sip:+14155550100@carrier", To: "sip:+14155550100@backup.carrier", State: "followed"},
		}
	})
	agent := w.outboundAgent(t, "+14155550001")
	r := w.must(t, 201, req{method: "POST", path: "/v1/calls", key: kLive, header: idem("redirected"),
		body: map[string]any{"agent_id": agent, "to_number": "+14155550100", "variables": map[string]any{"customer": "Ada"}}})
	id := r.Str("id")
	w.waitStatus(t, kLive, id, "in_progress")
	var got []map[string]any
	deadline := time.Now().Add(5 * time.Second)
	for len(got) < 2 && time.Now().Before(deadline) {
		evs, err := w.st.ListEvents(t.Context(), w.org.ID, store.ModeLive, "", 100)
		if err != nil {
			t.Fatal(err)
		}
		got = got[:0]
		for _, ev := range evs {
			if ev.Type == "conversation.redirected" && string(ev.ConversationID) == id {
				var d map[string]any
				json.Unmarshal(ev.Data, &d)
				got = append(got, d)
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	if len(got) != 2 {
		t.Fatalf("redirect events %v", got)
	}
	first, _ := got[0]["redirect"].(map[string]any)
	second, _ := got[1]["redirect"].(map[string]any)
	if first["state"] != "refused" || first["reason"] != "destination not allowed" || second["state"] != "followed" ||
		second["to_uri"] != "sip:+14155550100@backup.carrier" || second["sip_status"] != float64(302) {
		t.Fatalf("redirect events %v", got)
	}
}
