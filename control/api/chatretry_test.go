package api

import (
	"net/http"
	"testing"

	"github.com/parley-voice/parley/control/fault"
)

var _ = register(scenario{"ChatMessageRetry", testChatMessageRetry})

// testChatMessageRetry: a message whose reply fails (502) leaves nothing behind, so its retry
// with the same Idempotency-Key makes one user line and one reply.
func testChatMessageRetry(t *testing.T, e engine) {
	w := newWorld(t, e.open(t), worldOpts{conv: &convOpts{}})
	id := w.chat(t, kTest)
	w.tp.Fakes.Chat.FailNext(8, 500, 0) // every attempt of the adapter, and its retry
	msg := req{method: "POST", path: "/v1/conversations/" + id + "/messages", key: kTest, header: idem("m-1"),
		body: map[string]any{"message": "When do you open?"}}
	w.fails(t, http.StatusBadGateway, fault.CodeProviderUnavailable, msg)
	w.tp.Fakes.Chat.FailNext(0, 0, 0)
	var ok *resp
	for range 8 { // the faults left are used up by retries; each leaves nothing behind
		if r := w.do(t, msg); r.Status == http.StatusOK {
			ok = r
			break
		}
	}
	if ok == nil {
		t.Fatal("the retried message never went through")
	}
	w.waitLine(t, kTest, id, ok.Str("agent.text")) // lines are stored behind the answer
	tr := w.must(t, http.StatusOK, req{method: "GET", path: "/v1/conversations/" + id + "/transcript", key: kTest})
	users := 0
	for _, l := range tr.JSON["lines"].([]any) {
		if l.(map[string]any)["role"] == "user" {
			users++
		}
	}
	if users != 1 {
		t.Fatalf("the transcript holds %d user lines after a failed message and its retry: %s", users, tr)
	}
}
