package api

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/parley-voice/parley/control/app/knowledge"
	"io"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/parley-voice/parley/control/runtime"
	"github.com/parley-voice/parley/control/store"
	"github.com/parley-voice/parley/media"
	"github.com/parley-voice/parley/session"
	"github.com/parley-voice/parley/webrtc"
)

// convOpts configure the conversation runtime of a world.
type convOpts struct {
	noMedia        bool // the node runs no media role and knows no media node
	noProviders    bool // live conversations have no providers (502 provider_unavailable)
	chatMaxTurns   int
	maxCalls       int
	webCallsPerDay int
	ringFor        time.Duration
	pace           time.Duration
	dialer         runtime.Dialer     // instead of the fake dialer (a real SIP server)
	webCalls       runtime.WebCalls   // instead of the fake browser calls (a real WebRTC service)
	pricing        *runtime.Pricing   // instead of the default price list
	tools          runtime.ToolSource // issue 17: the conversations' tools
}

// startRuntime gives the world a runtime with the fake providers, a fake dialer and fake
// browser calls.
func (w *world) startRuntime(t testing.TB, o convOpts) {
	t.Helper()
	tp, err := runtime.NewTestProviders(nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tp.Close() })
	w.tp, w.dialer, w.web = tp, &fakeDialer{trunks: map[string]bool{"": true}}, &fakeWebCalls{}
	w.dataDir = fmt.Sprint(t.TempDir())
	if o.pace == 0 {
		o.pace = 20 * time.Millisecond
	}
	if o.ringFor == 0 {
		o.ringFor = 5 * time.Millisecond
	}
	ro := runtime.Options{NodeID: "node-" + randHex(3), Store: w.st, Bus: w.bus, Providers: tp, TestProviders: tp, Media: !o.noMedia,
		Dialer: w.dialer, WebCalls: w.web, DataDir: w.dataDir, ChatMaxTurns: o.chatMaxTurns, CalleePace: o.pace, RingFor: o.ringFor,
		Log: w.api.Log, Pricing: o.pricing, Tools: o.tools}
	if o.noProviders {
		ro.Providers = nil
	}
	if w.api.Knowledge == nil { // issue 16: conversations retrieve from the API's knowledge bases
		w.api.Knowledge = &knowledge.Service{Store: w.st}
	}
	ro.Knowledge = w.api.Knowledge
	if o.dialer != nil {
		ro.Dialer = o.dialer
	}
	if o.webCalls != nil {
		ro.WebCalls = o.webCalls
	}
	rt, err := runtime.New(ro)
	if err != nil {
		t.Fatal(err)
	}
	if err := rt.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Close() })
	w.rt = rt
	w.api.Runtime, w.api.DataDir, w.api.MaxCalls, w.api.WebCallsPerDay = rt, w.dataDir, o.maxCalls, o.webCallsPerDay
}

// fakeDialer stands in for the SIP service: it records the calls it is asked for and answers
// them (or fails, or never answers) as told.
type fakeDialer struct {
	mu     sync.Mutex
	trunks map[string]bool
	calls  []runtime.DialRequest
	fail   *runtime.DialFailure // fail every call with this
	hold   bool                 // ring until the call is cancelled
	ports  []*fakePort
	// redirects are reported (OnRedirect) before the call rings (issue 21).
	redirects []runtime.Redirect
}

func (d *fakeDialer) HasTrunk(name string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.trunks[name]
}

func (d *fakeDialer) Dial(ctx context.Context, r runtime.DialRequest) error {
	d.mu.Lock()
	d.calls = append(d.calls, r)
	fail, hold, redirects := d.fail, d.hold, d.redirects
	d.mu.Unlock()
	for _, rd := range redirects {
		if r.OnRedirect != nil {
			r.OnRedirect(rd)
		}
	}
	if fail != nil {
		return fail
	}
	r.OnRinging()
	if hold {
		<-ctx.Done()
		return &runtime.DialFailure{Reason: session.EndNoAnswer, Detail: "cancelled"}
	}
	port := &fakePort{tap: r.Tap}
	conv, err := r.Conversation(ctx, port)
	if err != nil {
		return err
	}
	if err := conv.StartVoice(ctx, port); err != nil {
		return err
	}
	d.mu.Lock()
	d.ports = append(d.ports, port)
	d.mu.Unlock()
	return nil
}

func (d *fakeDialer) count() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.calls)
}

func (d *fakeDialer) set(f func(d *fakeDialer)) {
	d.mu.Lock()
	defer d.mu.Unlock()
	f(d)
}

// fakePort is the callee's side of a fake call: it hears the agent (feeding the recording
// tap), and accepts transfers.
type fakePort struct {
	mu        sync.Mutex
	tap       func(bool, *media.Frame)
	frames    int
	transfers []session.TransferRequest
}

func (p *fakePort) SendFrame(f *media.Frame) {
	p.mu.Lock()
	p.frames++
	p.mu.Unlock()
	if p.tap != nil {
		p.tap(false, f)
	}
}
func (p *fakePort) SendDTMF(context.Context, string) error { return session.ErrNotSupported }
func (p *fakePort) Transfer(_ context.Context, t session.TransferRequest) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.transfers = append(p.transfers, t)
	return nil
}
func (p *fakePort) Hangup(context.Context, session.EndReason) error { return nil }

// fakeWebCalls stands in for the WebRTC service.
type fakeWebCalls struct {
	mu         sync.Mutex
	reqs       []runtime.BrowserCall
	registered map[string]*session.Conversation
	fail       error
}

func (f *fakeWebCalls) CreateWebCall(_ context.Context, req runtime.BrowserCall) (runtime.WebCall, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fail != nil {
		return runtime.WebCall{}, f.fail
	}
	f.reqs = append(f.reqs, req)
	id := fmt.Sprintf("wc%d", len(f.reqs))
	return runtime.WebCall{ID: id, URL: "https://voice.example.test/call/" + id, Token: "token-" + id, ExpiresAt: time.Now().Add(15 * time.Minute)}, nil
}

func (f *fakeWebCalls) CreateListenToken(_ context.Context, id string, mode string) (runtime.ListenToken, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.registered[id] == nil {
		return runtime.ListenToken{}, webrtc.ErrNotLive
	}
	if mode == "" {
		mode = string(webrtc.ModeListen)
	}
	return runtime.ListenToken{Mode: mode, URL: "https://voice.example.test/listen/" + id, Token: "listen-" + id, ExpiresAt: time.Now().Add(15 * time.Minute)}, nil
}

func (f *fakeWebCalls) Register(conv *session.Conversation) func() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.registered == nil {
		f.registered = map[string]*session.Conversation{}
	}
	f.registered[conv.ID()] = conv
	return func() {
		f.mu.Lock()
		defer f.mu.Unlock()
		delete(f.registered, conv.ID())
	}
}

func (f *fakeWebCalls) Sink(_ string, next session.Sink) session.Sink { return next }

func (f *fakeWebCalls) last() runtime.BrowserCall {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.reqs[len(f.reqs)-1]
}

// publishedAgent creates an agent with the live key and publishes it; mods change the
// definition's agent. It returns the agent's id.
func (w *world) publishedAgent(t *testing.T, project store.ProjectID, name, direction string, mods ...func(map[string]any)) string {
	t.Helper()
	r := w.must(t, http.StatusCreated, req{method: "POST", path: "/v1/agents", key: kLive,
		body: map[string]any{"project_id": project, "definition": definition(name, "custom", direction, mods...)}})
	id := r.Str("id")
	w.must(t, http.StatusCreated, req{method: "POST", path: "/v1/agents/" + id + "/publish", key: kLive})
	return id
}

// channels sets the definition's channels and a greeting.
func channels(cs ...string) func(map[string]any) {
	return func(a map[string]any) {
		list := make([]any, len(cs))
		for i, c := range cs {
			list[i] = c
		}
		a["channels"] = list
		a["first_message"] = "Hello {{customer}}, how can I help?"
	}
}

// number adds a phone number to the project and assigns it to the agent.
func (w *world) number(t *testing.T, project store.ProjectID, agent, number string) store.PhoneNumber {
	t.Helper()
	n, err := w.st.CreatePhoneNumber(context.Background(), store.NewPhoneNumber{OrgID: w.org.ID, ProjectID: project, Number: number, AgentID: store.AgentID(agent)})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// credit adds credit to the world's organization.
func (w *world) credit(t *testing.T, usd int64) {
	t.Helper()
	if _, err := w.st.AddCredit(context.Background(), w.org.ID, usd*1_000_000, "test"); err != nil {
		t.Fatal(err)
	}
}

// conv reads a conversation with a key.
func (w *world) conv(t *testing.T, key, id string) *resp {
	t.Helper()
	return w.must(t, http.StatusOK, req{method: "GET", path: "/v1/conversations/" + id, key: key})
}

// waitStatus polls a conversation until it has status.
func (w *world) waitStatus(t *testing.T, key, id, status string) *resp {
	t.Helper()
	var r *resp
	waitFor(t, 10*time.Second, "conversation "+id+" "+status, func() bool {
		r = w.conv(t, key, id)
		return r.Str("status") == status
	})
	return r
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", d, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// idem is an Idempotency-Key header.
func idem(key string) map[string]string { return map[string]string{"Idempotency-Key": key} }

// multipartBody builds a multipart/form-data body with one part.
func multipartBody(t *testing.T, field, filename string, data []byte) ([]byte, string) {
	t.Helper()
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	fw, err := mw.CreateFormFile(field, filename)
	if err != nil {
		t.Fatal(err)
	}
	fw.Write(data)
	mw.Close()
	return buf.Bytes(), mw.FormDataContentType()
}

// event is one server-sent event and when it was read.
type event struct {
	name string
	data string
	at   time.Time
}

// stream sends q to a real server on the world's handler and reads the answer's server-sent
// events as they arrive; the whole exchange is then checked against the document.
func (w *world) stream(t *testing.T, q req) (*resp, []event) {
	t.Helper()
	srv := httptest.NewServer(w.h)
	defer srv.Close()
	body, _ := json.Marshal(q.body)
	hr, err := http.NewRequest(q.method, srv.URL+q.path, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	hr.Header.Set("Content-Type", "application/json")
	hr.Header.Set("Authorization", "Bearer "+w.keys[q.key])
	for k, v := range q.header {
		hr.Header.Set(k, v)
	}
	res, err := srv.Client().Do(hr)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	r := &resp{Status: res.StatusCode, Header: res.Header}
	var events []event
	var raw bytes.Buffer
	if strings.HasPrefix(res.Header.Get("Content-Type"), "text/event-stream") {
		br := bufio.NewReader(io.TeeReader(res.Body, &raw))
		var cur event
		for {
			line, err := br.ReadString('\n')
			line = strings.TrimRight(line, "\n")
			switch {
			case strings.HasPrefix(line, "event: "):
				cur = event{name: strings.TrimPrefix(line, "event: ")}
			case strings.HasPrefix(line, "data: "):
				cur.data, cur.at = strings.TrimPrefix(line, "data: "), time.Now()
			case line == "" && cur.name != "":
				events = append(events, cur)
				cur = event{}
			}
			if err != nil {
				break
			}
		}
	} else {
		raw.ReadFrom(res.Body)
	}
	r.Body = raw.Bytes()
	if strings.Contains(r.Header.Get("Content-Type"), "json") {
		json.Unmarshal(r.Body, &r.JSON)
	}
	check := httptest.NewRequest(q.method, q.path, bytes.NewReader(body))
	check.Header = hr.Header.Clone()
	w.check(t, check, body, r)
	return r, events
}

// liveLines follows the live transcript from the start until it ends and returns every line,
// checking that seq grows by one from 1 with none repeated.
func (w *world) liveLines(t *testing.T, key, id string) []map[string]any {
	t.Helper()
	var lines []map[string]any
	after := 0
	deadline := time.Now().Add(20 * time.Second)
	for {
		if time.Now().After(deadline) {
			t.Fatalf("the live transcript of %s did not end", id)
		}
		r := w.must(t, http.StatusOK, req{method: "GET", path: fmt.Sprintf("/v1/conversations/%s/live?after=%d&wait=5", id, after), key: key})
		for _, l := range r.JSON["lines"].([]any) {
			m := l.(map[string]any)
			if seq := int(m["seq"].(float64)); seq != len(lines)+1 {
				t.Fatalf("live line with seq %d after %d lines: skipped or repeated", seq, len(lines))
			}
			lines = append(lines, m)
		}
		after = int(r.JSON["next_after"].(float64))
		if r.JSON["ended"] == true {
			return lines
		}
	}
}

// texts renders lines as "role: text".
func lineTexts(lines []map[string]any) []string {
	var out []string
	for _, l := range lines {
		out = append(out, fmt.Sprintf("%s: %s", l["role"], l["text"]))
	}
	return out
}

var _ = errors.New
