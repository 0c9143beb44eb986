package api

// issue 19: the messaging-app channel end to end, through the fake Graph API of `parley fakes`
// (Meta's wire shapes), real HTTP webhooks signed with X-Hub-Signature-256, the job queue and
// the chat engine, on SQLite and PostgreSQL.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/parley-voice/parley/control/app/whatsapp"
	wagraph "github.com/parley-voice/parley/control/channels/whatsapp"
	"github.com/parley-voice/parley/control/fault"
	"github.com/parley-voice/parley/control/jobs"
	"github.com/parley-voice/parley/control/runtime"
	"github.com/parley-voice/parley/control/store"
	"github.com/parley-voice/parley/media"
	"github.com/parley-voice/parley/session/fakes"
)

var _ = register(
	scenario{"WhatsAppInbound", testWhatsAppInbound},
	scenario{"WhatsAppTemplateWindow", testWhatsAppTemplateWindow},
	scenario{"WhatsAppSenders", testWhatsAppSenders},
	scenario{"WhatsAppRestart", testWhatsAppRestart},
)

// waWorld is a world running the channel: the Graph fake, a vault with the number's token and
// app secret, a worker on the job queue and the webhook endpoint on a real listener.
type waWorld struct {
	*world
	fake   *fakes.WhatsAppFake
	hooks  string // URL of /hooks/whatsapp
	agent  string
	sender string
	token  string // the vault secret of the access token
	app    string // the vault secret of the app secret
	stop   func() // stops the node's channel: its worker and webhook endpoint
}

const (
	waPhoneID   = "106540352242922"
	waWABA      = "102290129340398"
	waToken     = "EAAG-test-token"
	waAppSecret = "0123456789abcdef-app-secret"
	waVerify    = "verify-me-please"
)

func newWAWorld(t *testing.T, e engine) *waWorld {
	t.Helper()
	w := newWorld(t, e.open(t), worldOpts{conv: &convOpts{}})
	w.credit(t, 10)
	ww := &waWorld{world: w, fake: w.tp.Fakes.WhatsApp}
	ww.fake.SetToken(waToken)
	// The access token and the app secret in the project's vault (issue 17).
	secret := func(name, value string) string {
		return w.must(t, http.StatusCreated, req{method: "POST", path: "/v1/vault/secrets", key: kLive,
			body: map[string]any{"project_id": w.p1.ID, "name": name, "type": "bearer", "value": value}}).Str("id")
	}
	ww.token, ww.app = secret("WhatsApp token", waToken), secret("WhatsApp app secret", waAppSecret)
	ww.startChannel(t)
	ww.agent = w.publishedAgent(t, w.p1.ID, "WhatsApp helper "+randHex(2), "inbound", func(a map[string]any) {
		a["channels"] = []any{"whatsapp", "chat"}
		a["system_prompt"] = "You help people over WhatsApp."
	})
	ww.sender = w.must(t, http.StatusCreated, req{method: "POST", path: "/v1/whatsapp/senders", key: kLive, body: map[string]any{
		"project_id": w.p1.ID, "agent_id": ww.agent, "phone_number_id": waPhoneID, "business_account_id": waWABA,
		"display_number": "+1 555 0100", "access_token_secret_id": ww.token, "app_secret_secret_id": ww.app, "verify_token": waVerify}}).Str("id")
	return ww
}

// startChannel composes the channel on the world's API and runtime, as a node does: the Graph
// client, a worker on the job queue and the webhook endpoint on a real listener.
func (w *waWorld) startChannel(t *testing.T) {
	w.api.WhatsApp = nil
	w.api.WhatsAppGraph = wagraph.New(wagraph.Options{BaseURL: w.tp.URL(), Backoff: time.Millisecond})
	wk := jobs.NewWorker(jobs.Options{Store: w.st, Bus: w.bus, Owner: "wa-test-" + randHex(2), PollInterval: 20 * time.Millisecond,
		Backoff: &jobs.Backoff{Base: 20 * time.Millisecond, Max: 100 * time.Millisecond}})
	w.api.JobWaker = wk.Queue()
	w.api.Services()
	whatsapp.RegisterJobs(wk, w.api.WhatsApp)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = wk.Run(ctx) }()
	srv := httptest.NewServer(w.api.WhatsAppHooks())
	var once sync.Once
	w.stop = func() { once.Do(func() { srv.Close(); cancel(); <-done }) }
	t.Cleanup(w.stop)
	w.hooks = srv.URL
}

// post posts a webhook body signed with secret and returns Parley's status.
func (w *waWorld) post(t *testing.T, secret string, body []byte) int {
	t.Helper()
	status, err := w.fake.PostWebhook(t.Context(), w.hooks, secret, body)
	if err != nil {
		t.Fatal(err)
	}
	return status
}

// inbound posts a signed inbound message and requires 200.
func (w *waWorld) inbound(t *testing.T, in fakes.WhatsAppInbound) []byte {
	t.Helper()
	if in.PhoneNumberID == "" {
		in.PhoneNumberID = waPhoneID
	}
	body := w.fake.InboundPayload(in)
	if st := w.post(t, waAppSecret, body); st != http.StatusOK {
		t.Fatalf("webhook answered %d", st)
	}
	return body
}

// waitSent waits until the fake was asked to send a message for which match holds.
func (w *waWorld) waitSent(t *testing.T, what string, match func(fakes.WhatsAppFakeSent) bool) fakes.WhatsAppFakeSent {
	t.Helper()
	var got fakes.WhatsAppFakeSent
	waitFor(t, 15*time.Second, what, func() bool {
		for _, s := range w.fake.Sent() {
			if match(s) {
				got = s
				return true
			}
		}
		return false
	})
	return got
}

func (w *waWorld) countSent(match func(fakes.WhatsAppFakeSent) bool) int {
	n := 0
	for _, s := range w.fake.Sent() {
		if match(s) {
			n++
		}
	}
	return n
}

// messages lists a conversation's messages.
func (w *waWorld) messages(t *testing.T, conv string) []map[string]any {
	t.Helper()
	r := w.must(t, http.StatusOK, req{method: "GET", path: "/v1/whatsapp/conversations/" + conv + "/messages?limit=100", key: kLive})
	var out []map[string]any
	for _, m := range r.JSON["data"].([]any) {
		out = append(out, m.(map[string]any))
	}
	return out
}

// whatsappConversations lists the organization's whatsapp conversations, newest first.
func (w *waWorld) whatsappConversations(t *testing.T) []map[string]any {
	t.Helper()
	r := w.must(t, http.StatusOK, req{method: "GET", path: "/v1/conversations?channel=whatsapp", key: kLive})
	var out []map[string]any
	for _, c := range r.JSON["data"].([]any) {
		out = append(out, c.(map[string]any))
	}
	return out
}

func textTo(user, text string) func(fakes.WhatsAppFakeSent) bool {
	return func(s fakes.WhatsAppFakeSent) bool { return s.To == user && s.Type == "text" && s.Text == text }
}

// testWhatsAppInbound: the verification challenge; an inbound text gets the agent's reply
// (marked read first); a duplicate delivery is ignored; a bad signature stores nothing; a
// status update for a failed message is stored with Meta's code and recorded as an event; a
// voice note is transcribed and answered; a picture reaches the LLM; a sticker gets the polite
// answer; Meta failing for good is shown on the message; a payload for an unknown number is
// noted and dropped.
func testWhatsAppInbound(t *testing.T, e engine) {
	w := newWAWorld(t, e)
	ctx := t.Context()

	// Meta's subscription challenge.
	get := func(token string) (int, string) {
		resp, err := http.Get(w.hooks + "?hub.mode=subscribe&hub.challenge=1158201444&hub.verify_token=" + token)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var b bytes.Buffer
		_, _ = b.ReadFrom(resp.Body)
		return resp.StatusCode, b.String()
	}
	if st, body := get(waVerify); st != 200 || body != "1158201444" {
		t.Fatalf("challenge with the verify token: %d %q", st, body)
	}
	if st, _ := get("wrong-token-here"); st != http.StatusForbidden {
		t.Fatalf("challenge with a wrong token: %d", st)
	}

	// An inbound text gets the agent's reply, and the message is marked read.
	const user = "16505551234"
	first := w.inbound(t, fakes.WhatsAppInbound{From: user, Name: "Ada", Text: "Where is my order?", WAMID: "wamid.IN-1"})
	reply := w.waitSent(t, "the agent's reply", textTo(user, "You said: Where is my order?"))
	if reads := w.fake.Reads(); len(reads) == 0 || reads[0] != "wamid.IN-1" {
		t.Fatalf("marked read: %v", reads)
	}
	convs := w.whatsappConversations(t)
	if len(convs) != 1 || convs[0]["channel"] != "whatsapp" || convs[0]["direction"] != "inbound" || convs[0]["status"] != "in_progress" || convs[0]["from_number"] != "+"+user {
		t.Fatalf("conversations: %v", convs)
	}
	conv := convs[0]["id"].(string)
	w.waitLine(t, kLive, conv, "You said: Where is my order?")
	w.fails(t, http.StatusConflict, fault.CodeNoLiveTranscript, req{method: "GET", path: "/v1/conversations/" + conv + "/live", key: kLive})

	// The same delivery again (Meta retries), then another message: one reply each.
	if st := w.post(t, waAppSecret, first); st != 200 {
		t.Fatalf("duplicate delivery answered %d", st)
	}
	w.inbound(t, fakes.WhatsAppInbound{From: user, Text: "Thanks", WAMID: "wamid.IN-2"})
	w.waitSent(t, "the second reply", textTo(user, "You said: Thanks"))
	if n := w.countSent(textTo(user, "You said: Where is my order?")); n != 1 {
		t.Fatalf("the duplicate was answered: %d replies", n)
	}
	ms := w.messages(t, conv)
	if len(ms) != 4 || ms[0]["wamid"] != "wamid.IN-1" || ms[0]["status"] != "answered" || ms[1]["direction"] != "outbound" ||
		ms[1]["wamid"] != reply.WAMID || ms[1]["status"] != "accepted" || ms[1]["text"] != "You said: Where is my order?" {
		t.Fatalf("messages: %v", ms)
	}

	// A bad signature is refused and stores nothing; so is a missing one.
	jobsBefore := countJobs(t, w.st, whatsapp.KindWebhook)
	bad := w.fake.InboundPayload(fakes.WhatsAppInbound{PhoneNumberID: waPhoneID, From: user, Text: "forged", WAMID: "wamid.FORGED"})
	if st := w.post(t, "not-the-app-secret", bad); st != http.StatusUnauthorized {
		t.Fatalf("a bad signature answered %d", st)
	}
	resp, err := http.Post(w.hooks, "application/json", bytes.NewReader(bad))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("no signature answered %d", resp.StatusCode)
	}
	if n := countJobs(t, w.st, whatsapp.KindWebhook); n != jobsBefore {
		t.Fatalf("a refused webhook queued work: %d jobs, were %d", n, jobsBefore)
	}
	if got, err := w.st.Queries.GetWhatsAppMessage(ctx, "00000000-0000-0000-0000-000000000000"); err == nil {
		t.Fatalf("unexpected %v", got)
	}

	// A failed status update: stored on the message with Meta's code, and an event.
	if st := w.post(t, waAppSecret, w.fake.StatusPayload(waPhoneID, reply.WAMID, "delivered", user, 0, "")); st != 200 {
		t.Fatal(st)
	}
	if st := w.post(t, waAppSecret, w.fake.StatusPayload(waPhoneID, reply.WAMID, "failed", user, 131026, "Message undeliverable")); st != 200 {
		t.Fatal(st)
	}
	waitFor(t, 10*time.Second, "the failed status", func() bool {
		m := w.messages(t, conv)[1]
		return m["status"] == "failed" && m["error_code"] == float64(131026) && m["error_title"] == "Message undeliverable"
	})
	waitFor(t, 5*time.Second, "the failed event", func() bool { return hasEvent(t, w.st, w.org.ID, "whatsapp.message.failed", conv) })

	// A voice note (Ogg/Opus) is transcribed through the agent's STT (the Deepgram fake hears
	// its first scripted line) and answered.
	pcm := make([]int16, 16000)
	for i := range pcm {
		pcm[i] = int16(9000 * math.Sin(2*math.Pi*300*float64(i)/16000))
	}
	ogg, err := media.EncodeOggOpus(pcm, 16000)
	if err != nil {
		t.Fatal(err)
	}
	w.inbound(t, fakes.WhatsAppInbound{From: user, Type: "audio", MediaID: w.fake.AddMedia(ogg, "audio/ogg; codecs=opus"), WAMID: "wamid.VOICE"})
	w.waitSent(t, "the voice note's answer", textTo(user, "You said: (voice note, transcribed) hello there"))
	w.waitLine(t, kLive, conv, "(voice note, transcribed) hello there")

	// A picture goes to the LLM as an attachment of the message.
	w.inbound(t, fakes.WhatsAppInbound{From: user, Type: "image", Text: "Is this broken?", MediaID: w.fake.AddMedia(pngBytes(t), "image/png"), WAMID: "wamid.PIC"})
	w.waitSent(t, "the picture's answer", textTo(user, "You said: Is this broken?"))
	if reqs := w.tp.Fakes.Chat.Requests(); !strings.Contains(string(reqs[len(reqs)-1].Raw), "image/png;base64,") {
		t.Fatalf("the picture did not reach the LLM")
	}

	// A sticker: the polite answer, and a note on the message.
	w.inbound(t, fakes.WhatsAppInbound{From: user, Type: "sticker", MediaID: "123", WAMID: "wamid.STICKER"})
	w.waitSent(t, "the polite answer", textTo(user, "I can only read text, pictures and voice notes here."))
	waitFor(t, 5*time.Second, "the sticker's note", func() bool {
		for _, m := range w.messages(t, conv) {
			if m["wamid"] == "wamid.STICKER" {
				return m["status"] == "noted" && m["note"] == "a sticker message is not handled"
			}
		}
		return false
	})

	// Meta failing for good (a 400 with its code): the failure is shown on the message.
	w.fake.FailNext(1, 400, 131026, "Message undeliverable")
	w.inbound(t, fakes.WhatsAppInbound{From: user, Text: "Are you there?", WAMID: "wamid.IN-3"})
	waitFor(t, 10*time.Second, "the reply's failure", func() bool {
		for _, m := range w.messages(t, conv) {
			if m["direction"] == "outbound" && m["text"] == "You said: Are you there?" {
				return m["status"] == "failed" && m["error_code"] == float64(131026)
			}
		}
		return false
	})
	// A 503 twice is retried (by the client, then the job) and the reply goes out.
	w.fake.FailNext(4, 503, 131016, "Service unavailable")
	w.inbound(t, fakes.WhatsAppInbound{From: user, Text: "Hello again", WAMID: "wamid.IN-4"})
	w.waitSent(t, "the reply after 503s", textTo(user, "You said: Hello again"))

	// A user known only by a business-scoped user id (no phone number): another conversation,
	// answered through "recipient".
	const bsuid = "US.13491208655302741918"
	w.inbound(t, fakes.WhatsAppInbound{UserID: bsuid, Text: "Hi from a username", WAMID: "wamid.BSUID"})
	w.waitSent(t, "the answer to a business-scoped user", textTo(bsuid, "You said: Hi from a username"))
	if sent := w.waitSent(t, "the same", textTo(bsuid, "You said: Hi from a username")); !strings.Contains(string(sent.Body), `"recipient":"`+bsuid+`"`) {
		t.Fatalf("sent to a business-scoped user with %s", sent.Body)
	}

	// A delivery for a number nobody connected is noted (a dead job) and stores nothing.
	deadBefore := countDead(t, w.st, whatsapp.KindWebhook)
	w.inbound(t, fakes.WhatsAppInbound{PhoneNumberID: "999999", From: user, Text: "hi", WAMID: "wamid.NOBODY"})
	waitFor(t, 5*time.Second, "the note of an unknown number", func() bool { return countDead(t, w.st, whatsapp.KindWebhook) > deadBefore })
	for _, m := range w.messages(t, conv) {
		if m["wamid"] == "wamid.NOBODY" {
			t.Fatalf("a message of an unknown number was stored")
		}
	}
	if cs := w.whatsappConversations(t); len(cs) != 2 || cs[0]["from_number"] != nil {
		t.Fatalf("conversations: %v", cs)
	}
	// Two messages of a new user arriving together start one conversation, and both are answered.
	const eager = "16505559999"
	var wg sync.WaitGroup
	for i := range 2 {
		wg.Go(func() {
			body := w.fake.InboundPayload(fakes.WhatsAppInbound{PhoneNumberID: waPhoneID, From: eager, Text: fmt.Sprintf("Part %d", i), WAMID: fmt.Sprintf("wamid.EAGER-%d", i)})
			if st, err := w.fake.PostWebhook(context.Background(), w.hooks, waAppSecret, body); err != nil || st != 200 {
				t.Errorf("webhook: %d %v", st, err)
			}
		})
	}
	wg.Wait()
	w.waitSent(t, "the first part's answer", textTo(eager, "You said: Part 0"))
	w.waitSent(t, "the second part's answer", textTo(eager, "You said: Part 1"))
	n := 0
	for _, c := range w.whatsappConversations(t) {
		if c["from_number"] == "+"+eager {
			n++
		}
	}
	if n != 1 {
		t.Fatalf("%d conversations for one user", n)
	}
	// Signed, but not JSON: noted (a dead job), nothing stored.
	deadBefore = countDead(t, w.st, whatsapp.KindWebhook)
	if st := w.post(t, waAppSecret, []byte("{not json")); st != 200 {
		t.Fatalf("signed garbage answered %d", st)
	}
	waitFor(t, 5*time.Second, "the note of malformed JSON", func() bool { return countDead(t, w.st, whatsapp.KindWebhook) > deadBefore })

	// Ended, the conversation is charged with the voice note's speech-to-text.
	w.must(t, http.StatusAccepted, req{method: "POST", path: "/v1/conversations/" + conv + "/end", key: kLive})
	w.waitStatus(t, kLive, conv, "ended")
	cost := w.must(t, http.StatusOK, req{method: "GET", path: "/v1/conversations/" + conv + "?include=cost", key: kLive}).JSON["cost"].(map[string]any)
	if s := cost["stt_seconds"].(float64); s < 0.9 || s > 1.1 || cost["final"] != true || cost["total_micros"].(float64) <= 0 {
		t.Fatalf("cost: %v", cost)
	}
}

// testWhatsAppTemplateWindow: the templates of the business account (every page, approved
// only, cached); a conversation started with a template; the 24-hour window with an injected
// clock: closed before the user writes, open after, closed again a day later.
func testWhatsAppTemplateWindow(t *testing.T, e engine) {
	w := newWAWorld(t, e)
	tpls := w.must(t, http.StatusOK, req{method: "GET", path: "/v1/whatsapp/senders/" + w.sender + "/templates", key: kLive}).JSON["data"].([]any)
	if len(tpls) != 2 {
		t.Fatalf("approved templates: %v", tpls)
	}
	ou := tpls[0].(map[string]any)
	if ou["name"] != "order_update" || ou["parameter_format"] != "positional" || len(ou["parameters"].([]any)) != 2 ||
		ou["parameters"].([]any)[0].(map[string]any)["example"] != "Ada" || tpls[1].(map[string]any)["parameter_format"] != "named" {
		t.Fatalf("order_update: %v", tpls)
	}
	w.must(t, http.StatusOK, req{method: "GET", path: "/v1/whatsapp/senders/" + w.sender + "/templates?refresh=true", key: kLive})

	const user = "16505550000"
	start := func(tpl string, params []any) *resp {
		use := map[string]any{"name": tpl, "language": "en_US"}
		if params != nil {
			use["parameters"] = params
		}
		return w.do(t, req{method: "POST", path: "/v1/whatsapp/conversations", key: kLive, body: map[string]any{
			"sender_id": w.sender, "to": "+" + user, "template": use}})
	}
	if r := start("spring_sale", nil); r.Status != 422 || r.Code() != fault.CodeWhatsAppTemplateNotFound {
		t.Fatalf("a template pending review: %s", r)
	}
	if r := start("order_update", []any{"Ada"}); r.Status != 422 || r.Code() != fault.CodeWhatsAppTemplateNotFound {
		t.Fatalf("a parameter missing: %s", r)
	}
	w.fails(t, http.StatusForbidden, fault.CodeLiveKeyRequired, req{method: "POST", path: "/v1/whatsapp/conversations", key: kTest, body: map[string]any{
		"sender_id": w.sender, "to": user, "template": map[string]any{"name": "order_update", "language": "en_US"}}})
	r := start("order_update", []any{"Ada", "#1234"})
	if r.Status != http.StatusCreated {
		t.Fatalf("start: %s", r)
	}
	conv := r.Str("id")
	tr := r.JSON["transcript"].([]any)
	opener := "Your order\n\nHello Ada, your order #1234 has shipped. Reply here with any question.\n\nAcme Shop"
	if r.Str("channel") != "whatsapp" || r.Str("direction") != "outbound" || len(tr) != 1 || tr[0].(map[string]any)["text"] != opener {
		t.Fatalf("started: %s", r)
	}
	sent := w.waitSent(t, "the template", func(s fakes.WhatsAppFakeSent) bool { return s.Template == "order_update" && s.To == user })
	if len(sent.Params) != 2 || sent.Params[1] != "#1234" {
		t.Fatalf("template sent: %+v", sent)
	}

	// A template with named parameters, to another user.
	r = w.do(t, req{method: "POST", path: "/v1/whatsapp/conversations", key: kLive, body: map[string]any{"sender_id": w.sender, "to": "16505550002",
		"template": map[string]any{"name": "welcome", "language": "en_US", "named_parameters": map[string]any{"first_name": "Bo"}}}})
	if r.Status != http.StatusCreated || r.JSON["transcript"].([]any)[0].(map[string]any)["text"] != "Hi Bo, thanks for joining!" {
		t.Fatalf("a named template: %s", r)
	}
	named := w.waitSent(t, "the named template", func(s fakes.WhatsAppFakeSent) bool { return s.Template == "welcome" })
	if !strings.Contains(string(named.Body), `"parameter_name":"first_name"`) || len(named.Params) != 1 || named.Params[0] != "Bo" {
		t.Fatalf("named template sent: %s", named.Body)
	}

	// Before the user writes, only templates: 409 with no closing time.
	say := func(text string) *resp {
		return w.do(t, req{method: "POST", path: "/v1/whatsapp/conversations/" + conv + "/messages", key: kLive, body: map[string]any{"text": text}})
	}
	if r := say("Any news?"); r.Status != http.StatusConflict || r.Code() != fault.CodeWhatsAppWindowClosed || r.JSON["closed_at"] != nil {
		t.Fatalf("before the user wrote: %s", r)
	}
	// The user answers: the agent replies with the template in its history; the window is open.
	now := time.Now()
	w.inbound(t, fakes.WhatsAppInbound{From: user, Text: "When will it arrive?", At: now})
	w.waitSent(t, "the agent's reply", textTo(user, "You said: When will it arrive?"))
	if reqs := w.tp.Fakes.Chat.Requests(); !strings.Contains(string(reqs[len(reqs)-1].Raw), "your order #1234 has shipped") {
		t.Fatalf("the template is not in the agent's history")
	}
	// The specification's say command writes in the conversation too, within the window.
	w.must(t, http.StatusAccepted, req{method: "POST", path: "/v1/conversations/" + conv + "/say", key: kLive, body: map[string]any{"text": "A person will call you."}})
	w.waitSent(t, "the said text", textTo(user, "A person will call you."))
	w.waitLine(t, kLive, conv, "A person will call you.")
	long := strings.Repeat("This sentence is part of a long answer. ", 150) // 6,000 characters
	if r := say(long); r.Status != http.StatusAccepted || len(r.JSON["data"].([]any)) != 2 {
		t.Fatalf("a long message in the window: %s", r)
	}
	isPart := func(s fakes.WhatsAppFakeSent) bool { return s.To == user && strings.HasPrefix(s.Text, "This sentence") }
	waitFor(t, 15*time.Second, "both parts", func() bool { return w.countSent(isPart) == 2 })
	var parts []string
	for _, s := range w.fake.Sent() {
		if isPart(s) {
			if len([]rune(s.Text)) > 4096 || !strings.HasSuffix(s.Text, "long answer.") {
				t.Fatalf("a part over 4,096 characters, or not cut at a sentence end: %d", len(s.Text))
			}
			parts = append(parts, s.Text)
		}
	}
	if strings.Join(parts, " ") != strings.TrimSpace(long) {
		t.Fatalf("the parts do not make the message")
	}
	// A day and a minute later (the injected clock): closed, saying when.
	later := now.Add(24*time.Hour + time.Minute)
	w.now.Store(&later)
	r = say("Still there?")
	if r.Status != http.StatusConflict || r.Code() != fault.CodeWhatsAppWindowClosed {
		t.Fatalf("after the window: %s", r)
	}
	if closed, _ := time.Parse(time.RFC3339, r.JSON["closed_at"].(string)); closed.Unix() != now.Add(24*time.Hour).Unix() {
		t.Fatalf("closed_at %v, want %v", r.JSON["closed_at"], now.Add(24*time.Hour))
	}
	w.fails(t, http.StatusConflict, fault.CodeWhatsAppWindowClosed, req{method: "POST", path: "/v1/conversations/" + conv + "/say", key: kLive, body: map[string]any{"text": "Hello?"}})
	// The idle conversation is ended by the worker's periodic job.
	if n, err := w.api.WhatsApp.EndIdle(t.Context()); err != nil || n != 2 {
		t.Fatalf("EndIdle: %d %v", n, err)
	}
	w.waitStatus(t, kLive, conv, "ended")
	waitFor(t, 5*time.Second, "conversation.ended", func() bool { return hasEvent(t, w.st, w.org.ID, "conversation.ended", conv) })
	es, _ := w.st.ListEvents(t.Context(), w.org.ID, store.ModeLive, "", 100)
	for _, ev := range es {
		var d map[string]any
		if ev.Type == "conversation.ended" && string(ev.ConversationID) == conv && (json.Unmarshal(ev.Data, &d) != nil || d["channel"] != "whatsapp") {
			t.Fatalf("conversation.ended: %s", ev.Data)
		}
	}
	w.fails(t, http.StatusConflict, fault.CodeConversationEnded, req{method: "POST", path: "/v1/whatsapp/conversations/" + conv + "/messages", key: kLive, body: map[string]any{"text": "x"}})
}

// testWhatsAppSenders: the sender extensions, the 404 of another's number, 409 without a
// connection, 501 without the vault, and the messages of a chat refused.
func testWhatsAppSenders(t *testing.T, e engine) {
	w := newWAWorld(t, e)
	path := "/v1/whatsapp/senders/" + w.sender
	list := w.must(t, http.StatusOK, req{method: "GET", path: "/v1/whatsapp/senders", key: kLive}).JSON["data"].([]any)
	if len(list) != 1 || list[0].(map[string]any)["connected"] != true || list[0].(map[string]any)["verify_token_set"] != true {
		t.Fatalf("senders: %v", list)
	}
	if r := w.must(t, http.StatusOK, req{method: "GET", path: path, key: kLive}); strings.Contains(string(r.Body), waVerify) || strings.Contains(string(r.Body), waToken) {
		t.Fatalf("a secret in the answer: %s", r)
	}
	w.fails(t, http.StatusConflict, fault.CodeWhatsAppSenderTaken, req{method: "POST", path: "/v1/whatsapp/senders", key: kLive,
		body: map[string]any{"project_id": w.p1.ID, "phone_number_id": waPhoneID}})
	w.fails(t, http.StatusNotFound, fault.CodeSecretNotFound, req{method: "POST", path: "/v1/whatsapp/senders", key: kLive,
		body: map[string]any{"project_id": w.p1.ID, "phone_number_id": "42", "access_token_secret_id": randomID()}})
	// A secret of another project is not the sender's.
	other := w.must(t, http.StatusCreated, req{method: "POST", path: "/v1/vault/secrets", key: kLive,
		body: map[string]any{"project_id": w.p2.ID, "name": "elsewhere", "type": "bearer", "value": "x"}}).Str("id")
	w.fails(t, http.StatusNotFound, fault.CodeSecretNotFound, req{method: "POST", path: "/v1/whatsapp/senders", key: kLive,
		body: map[string]any{"project_id": w.p1.ID, "phone_number_id": "43", "app_secret_secret_id": other}})
	// The vault knows the sender uses its secrets: they cannot be deleted.
	w.fails(t, http.StatusConflict, fault.CodeSecretInUse, req{method: "DELETE", path: "/v1/vault/secrets/" + w.app, key: kLive})
	w.fails(t, http.StatusNotFound, fault.CodeWhatsAppSenderNotFound, req{method: "GET", path: "/v1/whatsapp/senders/" + randomID(), key: kLive})
	// No agent: a start is refused.
	w.must(t, http.StatusOK, req{method: "PATCH", path: path, key: kLive, body: map[string]any{"agent_id": nil}})
	w.fails(t, http.StatusConflict, fault.CodeWhatsAppNoAgent, req{method: "POST", path: "/v1/whatsapp/conversations", key: kLive,
		body: map[string]any{"sender_id": w.sender, "to": "16505550001", "template": map[string]any{"name": "welcome", "language": "en_US"}}})
	// No access token: 409 not connected.
	ch := w.must(t, http.StatusOK, req{method: "PATCH", path: path, key: kLive, body: map[string]any{"access_token_secret_id": nil, "agent_id": w.agent}})
	if ch.JSON["connected"] != false || ch.JSON["access_token_secret_id"] != nil {
		t.Fatalf("after clearing the token: %s", ch)
	}
	w.fails(t, http.StatusConflict, fault.CodeWhatsAppNotConnected, req{method: "GET", path: path + "/templates", key: kLive})
	// Meta refusing the token: 502.
	w.must(t, http.StatusOK, req{method: "PATCH", path: path, key: kLive, body: map[string]any{"access_token_secret_id": w.token}})
	w.must(t, http.StatusOK, req{method: "PATCH", path: "/v1/vault/secrets/" + w.token, key: kLive, body: map[string]any{"value": "expired-token"}})
	w.fails(t, http.StatusBadGateway, fault.CodeWhatsAppUpstream, req{method: "GET", path: path + "/templates?refresh=true", key: kLive})
	// A chat is not a messaging-app conversation.
	chat := w.must(t, http.StatusCreated, req{method: "POST", path: "/v1/chats", key: kLive, body: map[string]any{"agent_id": w.agent}}).Str("id")
	w.fails(t, http.StatusConflict, fault.CodeNotWhatsApp, req{method: "GET", path: "/v1/whatsapp/conversations/" + chat + "/messages", key: kLive})
	// Without the vault the deployment does not run the channel.
	svc := w.api.WhatsApp
	w.api.WhatsApp = &whatsapp.Service{Store: w.st, Graph: svc.Graph, Engine: svc.Engine}
	w.fails(t, http.StatusNotImplemented, fault.CodeWhatsAppUnavailable, req{method: "GET", path: path + "/templates", key: kLive})
	w.api.WhatsApp = svc
	w.must(t, http.StatusOK, req{method: "DELETE", path: path, key: kLive})
	w.fails(t, http.StatusNotFound, fault.CodeWhatsAppSenderNotFound, req{method: "DELETE", path: path, key: kLive})
	w.must(t, http.StatusOK, req{method: "DELETE", path: "/v1/vault/secrets/" + w.app, key: kLive}) // in use no more
	// A disconnected number's webhooks are refused.
	if st := w.post(t, waAppSecret, w.fake.InboundPayload(fakes.WhatsAppInbound{PhoneNumberID: waPhoneID, From: "1", Text: "x"})); st != http.StatusUnauthorized {
		t.Fatalf("a webhook after disconnecting: %d", st)
	}
}

func randomID() string {
	return "0190a6f0-0000-7000-8000-" + fmt.Sprintf("%012d", time.Now().UnixNano()%1e12)
}

// countJobs counts the queue's jobs of a kind.
func countJobs(t *testing.T, st *store.Store, kind string) int {
	t.Helper()
	js, err := st.ListJobs(t.Context(), store.JobFilter{Kind: kind, Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	return len(js)
}

// countDead counts the dead jobs of a kind (a noted delivery).
func countDead(t *testing.T, st *store.Store, kind string) int {
	t.Helper()
	js, err := st.ListJobs(t.Context(), store.JobFilter{Kind: kind, State: store.JobDead, Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	return len(js)
}

// hasEvent reports whether the organization has an event of a type for a conversation.
func hasEvent(t *testing.T, st *store.Store, org store.OrgID, typ, conv string) bool {
	t.Helper()
	es, err := st.ListEvents(t.Context(), org, store.ModeLive, "", 100)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range es {
		if e.Type == typ && string(e.ConversationID) == conv {
			return true
		}
	}
	return false
}

// testWhatsAppRestart: a WhatsApp conversation is a durable chat. Its node stops (the runtime
// closed, the worker and the webhook endpoint gone); a new composition on the same store (a
// new runtime of another node id, new services, a new worker) answers the user's next message
// in the same conversation, the LLM given its whole history; the voice note's speech-to-text
// charged before the restart is still charged when it ends.
func testWhatsAppRestart(t *testing.T, e engine) {
	w := newWAWorld(t, e)
	const user = "16505557777"
	w.inbound(t, fakes.WhatsAppInbound{From: user, Text: "My name is Ada.", WAMID: "wamid.R-1"})
	w.waitSent(t, "the first answer", textTo(user, "You said: My name is Ada."))
	pcm := make([]int16, 16000) // a second of voice
	for i := range pcm {
		pcm[i] = int16(9000 * math.Sin(2*math.Pi*300*float64(i)/16000))
	}
	ogg, err := media.EncodeOggOpus(pcm, 16000)
	if err != nil {
		t.Fatal(err)
	}
	w.inbound(t, fakes.WhatsAppInbound{From: user, Type: "audio", MediaID: w.fake.AddMedia(ogg, "audio/ogg; codecs=opus"), WAMID: "wamid.R-2"})
	w.waitSent(t, "the voice note's answer", func(s fakes.WhatsAppFakeSent) bool {
		return s.To == user && s.Type == "text" && strings.HasPrefix(s.Text, "You said: (voice note, transcribed)")
	})
	convs := w.whatsappConversations(t)
	if len(convs) != 1 {
		t.Fatalf("conversations before the restart: %v", convs)
	}
	conv := convs[0]["id"].(string)

	// The node stops: nothing of the conversation is kept in memory anywhere.
	w.stop()
	if err := w.rt.Close(); err != nil {
		t.Fatal(err)
	}
	if c := w.conv(t, kLive, conv); c.Str("status") != "in_progress" || c.JSON["end_reason"] != nil {
		t.Fatalf("after its node stopped the conversation is %s", c)
	}
	// Another node, on the same store.
	rt, err := runtime.New(runtime.Options{NodeID: "node-" + randHex(3), Store: w.st, Bus: w.bus, Providers: w.tp, TestProviders: w.tp,
		Media: true, Dialer: w.dialer, WebCalls: w.web, DataDir: w.dataDir, CalleePace: 20 * time.Millisecond, RingFor: 5 * time.Millisecond, Log: w.api.Log})
	if err != nil {
		t.Fatal(err)
	}
	if err := rt.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Close() })
	w.rt, w.api.Runtime = rt, rt
	w.api.Conversations, w.api.Calls, w.api.Chats = nil, nil, nil
	w.startChannel(t)

	w.inbound(t, fakes.WhatsAppInbound{From: user, Text: "What is my name?", WAMID: "wamid.R-3"})
	w.waitSent(t, "the answer after the restart", textTo(user, "You said: What is my name?"))
	if convs := w.whatsappConversations(t); len(convs) != 1 || convs[0]["id"] != conv {
		t.Fatalf("conversations after the restart: %v", convs)
	}
	reqs := w.tp.Fakes.Chat.Requests()
	var got []string
	for _, m := range reqs[len(reqs)-1].Body["messages"].([]any) {
		mm := m.(map[string]any)
		if mm["role"] == "system" {
			continue
		}
		got = append(got, fmt.Sprintf("%s: %v", mm["role"], mm["content"]))
	}
	if len(got) != 5 || got[0] != "user: My name is Ada." || got[1] != "assistant: You said: My name is Ada." ||
		!strings.HasPrefix(got[2], "user: (voice note, transcribed)") || got[4] != "user: What is my name?" {
		t.Fatalf("after the restart the LLM was asked %q", got)
	}
	tr := w.must(t, http.StatusOK, req{method: "GET", path: "/v1/conversations/" + conv + "/transcript", key: kLive})
	if lines := tr.JSON["lines"].([]any); len(lines) != 6 {
		t.Fatalf("transcript after the restart: %v", lines)
	}
	w.must(t, http.StatusAccepted, req{method: "POST", path: "/v1/conversations/" + conv + "/end", key: kLive})
	w.waitStatus(t, kLive, conv, "ended")
	cost := w.must(t, http.StatusOK, req{method: "GET", path: "/v1/conversations/" + conv + "?include=cost", key: kLive}).JSON["cost"].(map[string]any)
	if s := cost["stt_seconds"].(float64); s < 0.9 || s > 1.1 {
		t.Fatalf("cost after the restart: %v", cost)
	}
}
