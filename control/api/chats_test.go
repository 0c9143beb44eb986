package api

import (
	"bytes"
	"context"
	"encoding/json"
	"image"
	"image/color"
	"image/png"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/parley-voice/parley/control/app/chats"
	"github.com/parley-voice/parley/control/fault"

	"github.com/parley-voice/parley/control/store"
)

var _ = register(
	scenario{"Chats", testChats},
	scenario{"ChatStreaming", testChatStreaming},
	scenario{"ChatAttachments", testChatAttachments},
	scenario{"ChatProviderMissing", testChatProviderMissing},
	scenario{"DeleteConversations", testDeleteConversations},
)

// waitLine waits until the conversation's transcript holds a line with text.
func (w *world) waitLine(t *testing.T, key, id, text string) {
	t.Helper()
	waitFor(t, 5*time.Second, "the line "+text, func() bool {
		r := w.must(t, 200, req{method: "GET", path: "/v1/conversations/" + id + "/transcript", key: key})
		for _, l := range r.JSON["lines"].([]any) {
			if l.(map[string]any)["text"] == text {
				return true
			}
		}
		return false
	})
}

// waitAnswering waits until the fake LLM has been asked more than before times: a message is
// being answered. (The message's line is kept only once its reply is complete.)
func (w *world) waitAnswering(t *testing.T, before int) {
	t.Helper()
	waitFor(t, 5*time.Second, "the message being answered", func() bool { return len(w.tp.Fakes.Chat.Requests()) > before })
}

// chat starts a chat with a fresh agent and returns its id.
func (w *world) chat(t *testing.T, key string) string {
	t.Helper()
	agent := w.publishedAgent(t, w.p1.ID, "Chat "+randHex(2), "inbound", channels("chat"))
	return w.must(t, http.StatusCreated, req{method: "POST", path: "/v1/chats", key: key,
		body: map[string]any{"agent_id": agent, "variables": map[string]any{"customer": "Ada"}}}).Str("id")
}

func testChats(t *testing.T, e engine) {
	w := newWorld(t, e.open(t), worldOpts{conv: &convOpts{chatMaxTurns: 3}})
	agent := w.publishedAgent(t, w.p1.ID, "Helper", "inbound", channels("chat"))
	body := map[string]any{"agent_id": agent, "variables": map[string]any{"customer": "Ada"}, "metadata": map[string]any{"ticket": 7}}
	w.fails(t, 402, fault.CodeCreditExhausted, req{method: "POST", path: "/v1/chats", key: kLive, body: body})
	w.credit(t, 10)
	r := w.must(t, 201, req{method: "POST", path: "/v1/chats", key: kLive, header: idem("chat-1"), body: body})
	id := r.Str("id")
	tr := r.JSON["transcript"].([]any)
	if r.Str("status") != "in_progress" || r.Str("channel") != "chat" || len(tr) != 1 || tr[0].(map[string]any)["text"] != "Hello Ada, how can I help?" {
		t.Fatalf("created %s", r)
	}
	// Transcript lines name their object, and times have one precision (microseconds) however
	// they were made.
	if l := tr[0].(map[string]any); l["object"] != "transcript_line" || !regexp.MustCompile(`^[^.]+(\.\d{1,6})?Z$`).MatchString(l["started_at"].(string)) || l["ended_at"] == nil || l["ended_at"].(string) < l["started_at"].(string) {
		t.Fatalf("transcript line %v", l)
	}
	if again := w.must(t, 201, req{method: "POST", path: "/v1/chats", key: kLive, header: idem("chat-1"), body: body}); again.Str("id") != id {
		t.Fatalf("a replayed chat is another: %s", again)
	}
	send := func(msg, key string) *resp {
		h := map[string]string{}
		if key != "" {
			h["Idempotency-Key"] = key
		}
		return w.do(t, req{method: "POST", path: "/v1/conversations/" + id + "/messages", key: kLive, header: h, body: map[string]any{"message": msg}})
	}
	turn := send("What are your hours?", "m1")
	if turn.Status != 200 || turn.Str("agent.text") != "You said: What are your hours?" || turn.Str("user.text") != "What are your hours?" || turn.JSON["ended"] != false {
		t.Fatalf("turn %s", turn)
	}
	replay := send("What are your hours?", "m1")
	if replay.Str("agent.text") != turn.Str("agent.text") || replay.Header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("replay %s", replay)
	}
	if r := send("Something else", "m1"); r.Status != 422 || r.Code() != fault.CodeIdempotencyReused {
		t.Fatalf("a reused key: %s", r)
	}
	// The chat's length is three messages.
	send("Two", "")
	send("Three", "")
	if r := send("Four", ""); r.Status != 409 || r.Code() != fault.CodeChatLengthReached {
		t.Fatalf("past the length: %s", r)
	}
	// Other refusals: not a chat, a chat not started through the API, an unknown chat.
	call := w.must(t, 201, req{method: "POST", path: "/v1/test/inbound-calls", key: kTest, body: map[string]any{"agent_id": w.publishedAgent(t, w.p1.ID, "Desk", "inbound", channels("phone")), "lines": []any{"Hi"}, "variables": map[string]any{"customer": "X"}}})
	w.fails(t, 409, fault.CodeNotAChat, req{method: "POST", path: "/v1/conversations/" + call.Str("id") + "/messages", key: kTest, body: map[string]any{"message": "hi"}})
	w.fails(t, 409, fault.CodeNoLiveTranscript, req{method: "GET", path: "/v1/conversations/" + id + "/live", key: kLive})
	internal, err := w.st.CreateConversation(context.Background(), store.Conversation{OrgID: w.org.ID, ProjectID: w.p1.ID, AgentID: store.AgentID(agent),
		Channel: store.ChannelChat, Direction: "inbound", Mode: store.ModeLive, Status: store.ConvInProgress, Language: "en"})
	if err != nil {
		t.Fatal(err)
	}
	w.fails(t, 404, fault.CodeConversationNotFound, req{method: "POST", path: "/v1/conversations/" + string(internal.ID) + "/messages", key: kLive, body: map[string]any{"message": "hi"}})
	w.fails(t, 404, fault.CodeConversationNotFound, req{method: "POST", path: "/v1/conversations/0190a6f0-0000-7000-8000-000000000000/messages", key: kLive, body: map[string]any{"message": "hi"}})
	// An agent without the chat channel; ending a chat; a message after the end.
	phoneOnly := w.publishedAgent(t, w.p1.ID, "Phone only", "inbound", channels("phone"))
	w.fails(t, 409, fault.CodeChannelDisabled, req{method: "POST", path: "/v1/chats", key: kLive, body: map[string]any{"agent_id": phoneOnly, "variables": map[string]any{"customer": "A"}}})
	w.must(t, 202, req{method: "POST", path: "/v1/conversations/" + id + "/end", key: kLive})
	got := w.waitStatus(t, kLive, id, "ended")
	if got.Str("end_reason") != "ended_by_api" {
		t.Fatalf("ended %s", got)
	}
	w.fails(t, 409, fault.CodeConversationEnded, req{method: "POST", path: "/v1/conversations/" + id + "/messages", key: kLive, body: map[string]any{"message": "hi"}})
	lines := w.must(t, 200, req{method: "GET", path: "/v1/conversations/" + id + "/transcript", key: kLive}).JSON["lines"].([]any)
	if len(lines) != 7 {
		t.Fatalf("transcript has %d lines, want 7", len(lines))
	}
	// A chat costs what its tokens cost.
	full := w.must(t, 200, req{method: "GET", path: "/v1/conversations/" + id + "?include=cost", key: kLive})
	if c := full.JSON["cost"].(map[string]any); c["charged"] != true || c["llm_input_tokens"].(float64) <= 0 {
		t.Fatalf("cost %v", c)
	}
}

// testChatStreaming: with stream the reply comes as server-sent events, each delta flushed as
// the model writes it, before the turn completes; a second message meanwhile gets 409.
func testChatStreaming(t *testing.T, e engine) {
	w := newWorld(t, e.open(t), worldOpts{conv: &convOpts{}})
	w.tp.Fakes.Chat.SetLatency(100*time.Millisecond, 30) // the reply takes about half a second
	id := w.chat(t, kTest)
	type result struct {
		r      *resp
		events []event
	}
	done := make(chan result, 1)
	asked := len(w.tp.Fakes.Chat.Requests())
	go func() {
		r, evs := w.stream(t, req{method: "POST", path: "/v1/conversations/" + id + "/messages", key: kTest,
			header: map[string]string{"Accept": "text/event-stream", "Idempotency-Key": "s1"},
			body:   map[string]any{"message": "Tell me about the weather in Paris today please"}})
		done <- result{r, evs}
	}()
	w.waitAnswering(t, asked)
	w.fails(t, 409, fault.CodeAgentBusy, req{method: "POST", path: "/v1/conversations/" + id + "/messages", key: kTest, body: map[string]any{"message": "Hello?"}})
	res := <-done
	if res.r.Status != 200 || len(res.events) < 3 {
		t.Fatalf("stream %d with %d events", res.r.Status, len(res.events))
	}
	last := res.events[len(res.events)-1]
	if last.name != "done" {
		t.Fatalf("the stream ended with %q", last.name)
	}
	var text strings.Builder
	for _, ev := range res.events[:len(res.events)-1] {
		if ev.name != "delta" {
			t.Fatalf("event %q before done", ev.name)
		}
		var d map[string]string
		json.Unmarshal([]byte(ev.data), &d)
		text.WriteString(d["text"])
	}
	var turn map[string]any
	json.Unmarshal([]byte(last.data), &turn)
	if want := "You said: Tell me about the weather in Paris today please"; text.String() != want || turn["agent"].(map[string]any)["text"] != want {
		t.Fatalf("deltas %q, turn %v", text.String(), turn)
	}
	if gap := last.at.Sub(res.events[0].at); gap < 50*time.Millisecond {
		t.Fatalf("the first delta came %v before the turn completed: nothing streamed", gap)
	}
	// The same message with the same key replays the turn, as a stream of one done event.
	r, evs := w.stream(t, req{method: "POST", path: "/v1/conversations/" + id + "/messages", key: kTest,
		header: map[string]string{"Accept": "text/event-stream", "Idempotency-Key": "s1"},
		body:   map[string]any{"message": "Tell me about the weather in Paris today please"}})
	if r.Header.Get("Idempotent-Replayed") != "true" || len(evs) != 1 || evs[0].name != "done" {
		t.Fatalf("replay %d %v", r.Status, evs)
	}
	// stream: true in the body does the same; an error before the stream is a problem.
	r, evs = w.stream(t, req{method: "POST", path: "/v1/conversations/" + id + "/messages", key: kTest, body: map[string]any{"message": "Short", "stream": true}})
	if r.Status != 200 || evs[len(evs)-1].name != "done" {
		t.Fatalf("stream: true: %d %v", r.Status, evs)
	}
	w.must(t, 202, req{method: "POST", path: "/v1/conversations/" + id + "/end", key: kTest})
	w.waitStatus(t, kTest, id, "ended")
	r, _ = w.stream(t, req{method: "POST", path: "/v1/conversations/" + id + "/messages", key: kTest, body: map[string]any{"message": "Short", "stream": true}})
	if r.Status != 409 || r.Code() != fault.CodeConversationEnded {
		t.Fatalf("streaming to an ended chat: %s", r)
	}
}

// pngBytes is a small PNG picture.
func pngBytes(t *testing.T) []byte {
	t.Helper()
	img := image.NewRGBA(image.Rect(0, 0, 4, 4))
	img.Set(1, 1, color.RGBA{255, 0, 0, 255})
	var buf bytes.Buffer
	if err := png.Encode(&buf, img); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func testChatAttachments(t *testing.T, e engine) {
	w := newWorld(t, e.open(t), worldOpts{conv: &convOpts{}})
	upload := func(field string, data []byte) *resp {
		body, ctype := multipartBody(t, field, "pic.png", data)
		return w.do(t, req{method: "POST", path: "/v1/attachments", key: kTest, body: body, header: map[string]string{"Content-Type": ctype}})
	}
	r := upload("file", pngBytes(t))
	if r.Status != 201 || r.Str("mime_type") != "image/png" {
		t.Fatalf("upload %s", r)
	}
	att := r.Str("id")
	if r := upload("file", []byte("just some text, not a picture")); r.Status != 415 || r.Code() != fault.CodeUnsupportedImage {
		t.Fatalf("a text file: %s", r)
	}
	if r := upload("photo", pngBytes(t)); r.Status != 422 || r.Code() != fault.CodeValidationFailed {
		t.Fatalf("a part named photo: %s", r)
	}
	if r := upload("file", bytes.Repeat([]byte{0x89}, chats.MaxAttachment+10)); r.Status != 413 || r.Code() != fault.CodeBodyTooLarge {
		t.Fatalf("too large: %s", r)
	}
	w.fails(t, 415, fault.CodeUnsupportedMediaType, req{method: "POST", path: "/v1/attachments", key: kTest, body: `{"file": "x"}`})
	id := w.chat(t, kTest)
	turn := w.must(t, 200, req{method: "POST", path: "/v1/conversations/" + id + "/messages", key: kTest, body: map[string]any{"message": "What is in this picture?", "attachment_ids": []any{att}}})
	if turn.Str("agent.text") != "You said: What is in this picture?" {
		t.Fatalf("turn %s", turn)
	}
	reqs := w.tp.Fakes.Chat.Requests()
	if last := reqs[len(reqs)-1]; !strings.Contains(string(last.Raw), "data:image/png;base64,") {
		t.Fatalf("the LLM did not get the picture: %s", last.Raw)
	}
	// The next message, answered from the chat's stored state (issue 13), still shows the
	// model the picture: it is read back from its file, not kept in a node's memory.
	w.must(t, 200, req{method: "POST", path: "/v1/conversations/" + id + "/messages", key: kTest, body: map[string]any{"message": "And the colour?"}})
	reqs = w.tp.Fakes.Chat.Requests()
	if last := string(reqs[len(reqs)-1].Raw); !strings.Contains(last, "data:image/png;base64,") || !strings.Contains(last, "What is in this picture?") || !strings.Contains(last, "And the colour?") {
		t.Fatalf("the next message's request lost the picture or the history: %s", last)
	}
	w.fails(t, 422, fault.CodeValidationFailed, req{method: "POST", path: "/v1/conversations/" + id + "/messages", key: kTest, body: map[string]any{"message": "again", "attachment_ids": []any{"0190a6f0-0000-7000-8000-000000000000"}}})
	other := w.chat(t, kTest)
	w.fails(t, 422, fault.CodeValidationFailed, req{method: "POST", path: "/v1/conversations/" + other + "/messages", key: kTest, body: map[string]any{"message": "mine?", "attachment_ids": []any{att}}})
	// Deleting the chat deletes the picture.
	files, _ := filepath.Glob(filepath.Join(w.dataDir, "attachments", "*"))
	if len(files) != 1 {
		t.Fatalf("attachment files %v", files)
	}
	w.must(t, 200, req{method: "DELETE", path: "/v1/conversations/" + id, key: kTest})
	if _, err := os.Stat(files[0]); !os.IsNotExist(err) {
		t.Fatalf("the picture of a deleted chat is still there: %v", err)
	}
	if _, err := w.st.GetAttachment(context.Background(), store.AttachmentID(att)); err == nil {
		t.Fatal("the attachment row of a deleted chat is still there")
	}
}

// testChatProviderMissing: a live chat on a node without live providers gets 502.
func testChatProviderMissing(t *testing.T, e engine) {
	w := newWorld(t, e.open(t), worldOpts{conv: &convOpts{noProviders: true}})
	w.credit(t, 10)
	agent := w.publishedAgent(t, w.p1.ID, "Helper", "inbound", channels("chat"))
	w.fails(t, 502, fault.CodeProviderUnavailable, req{method: "POST", path: "/v1/chats", key: kLive, body: map[string]any{"agent_id": agent, "variables": map[string]any{"customer": "A"}}})
	list := w.must(t, 200, req{method: "GET", path: "/v1/conversations?status=ended", key: kLive})
	if d := list.JSON["data"].([]any); len(d) != 1 || d[0].(map[string]any)["end_reason"] != "provider_error" {
		t.Fatalf("the failed chat: %s", list)
	}
}

func testDeleteConversations(t *testing.T, e engine) {
	w := newWorld(t, e.open(t), worldOpts{conv: &convOpts{}})
	w.credit(t, 10)
	ctx := context.Background()
	// An open chat is charged, closed and deleted.
	id := w.chat(t, kLive)
	w.must(t, 200, req{method: "POST", path: "/v1/conversations/" + id + "/messages", key: kLive, body: map[string]any{"message": "Hi"}})
	before, _ := w.st.GetOrg(ctx, w.org.ID)
	del := w.must(t, 200, req{method: "DELETE", path: "/v1/conversations/" + id, key: kLive})
	if del.JSON["deleted"] != true || del.Str("id") != id {
		t.Fatalf("deleted %s", del)
	}
	after, _ := w.st.GetOrg(ctx, w.org.ID)
	if after.CreditMicros >= before.CreditMicros {
		t.Fatalf("the open chat was not charged: %d → %d", before.CreditMicros, after.CreditMicros)
	}
	w.fails(t, 404, fault.CodeConversationNotFound, req{method: "GET", path: "/v1/conversations/" + id, key: kLive})
	w.fails(t, 404, fault.CodeConversationNotFound, req{method: "DELETE", path: "/v1/conversations/" + id, key: kLive})
	gone := w.must(t, 200, req{method: "GET", path: "/v1/conversations/deleted", key: kLive})
	if d := gone.JSON["data"].([]any); len(d) != 1 || d[0].(map[string]any)["id"] != id {
		t.Fatalf("deleted list %s", gone)
	}
	w.must(t, 200, req{method: "GET", path: "/v1/conversations/deleted?project_id=" + string(w.p1.ID), key: kLive})
	evs, _ := w.st.ListEvents(ctx, w.org.ID, store.ModeLive, "", 10)
	var types []string
	for _, e := range evs {
		if e.Type != "conversation.transcript" && e.Type != "conversation.started" { // issue 14's types besides
			types = append(types, e.Type)
		}
	}
	if strings.Join(types, ",") != "conversation.ended,conversation.deleted" {
		t.Fatalf("events %v", types)
	}
	// A chat whose agent is answering is not deleted.
	w.tp.Fakes.Chat.SetLatency(300*time.Millisecond, 20)
	busy := w.chat(t, kLive)
	answered := make(chan struct{})
	asked := len(w.tp.Fakes.Chat.Requests())
	go func() {
		defer close(answered)
		w.stream(t, req{method: "POST", path: "/v1/conversations/" + busy + "/messages", key: kLive, body: map[string]any{"message": "A long question about many things", "stream": true}})
	}()
	defer func() { <-answered }()
	w.waitAnswering(t, asked)
	w.fails(t, 409, fault.CodeAgentBusy, req{method: "DELETE", path: "/v1/conversations/" + busy, key: kLive})
	w.st.SetProjectFrozen(ctx, w.p1.ID, true)
	w.fails(t, 409, fault.CodeProjectFrozen, req{method: "DELETE", path: "/v1/conversations/" + busy, key: kLive})
	w.st.SetProjectFrozen(ctx, w.p1.ID, false)
}
