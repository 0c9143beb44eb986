package api

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/parley-voice/parley/control/app/calls"
	"github.com/parley-voice/parley/control/app/campaigns"
	"github.com/parley-voice/parley/control/fault"
	"github.com/parley-voice/parley/control/jobs"
	"github.com/parley-voice/parley/control/runtime"
	"github.com/parley-voice/parley/control/store"
	"github.com/parley-voice/parley/session"
)

// issue 15: contacts, the do-not-call list and campaigns, end to end on both stores.
var _ = register(
	scenario{"Contacts", testContacts},
	scenario{"ContactsImport", testContactsImport},
	scenario{"DoNotCall", testDoNotCall},
	scenario{"CampaignRules", testCampaignRules},
	scenario{"CampaignDialler", testCampaignDialler},
)

func testContacts(t *testing.T, e engine) {
	w := newWorld(t, e.open(t), worldOpts{})
	create := func(key string, body map[string]any) *resp {
		return w.do(t, req{method: "POST", path: "/v1/contacts", key: key, body: body})
	}
	r := create(kLive, map[string]any{"number": "+1 (415) 555-0100", "name": "Ada", "timezone": "America/New_York", "external_id": "crm-1",
		"variables": map[string]any{"plan": "gold"}})
	if r.Status != http.StatusCreated || r.Str("number") != "+14155550100" || r.Str("project_id") != string(w.p1.ID) ||
		r.Header.Get("Location") != "/v1/contacts/"+r.Str("id") {
		t.Fatalf("created %s", r)
	}
	id := r.Str("id")
	w.fails(t, 409, fault.CodeContactExists, req{method: "POST", path: "/v1/contacts", key: kLive, body: map[string]any{"number": "+14155550100"}})
	bad := w.fails(t, 422, fault.CodeValidationFailed, req{method: "POST", path: "/v1/contacts", key: kLive,
		body: map[string]any{"number": "+1415555", "timezone": "Mars/Olympus"}})
	if !strings.Contains(string(bad.Body), `"/number"`) || !strings.Contains(string(bad.Body), `"/timezone"`) {
		t.Fatalf("both places named: %s", bad)
	}
	w.must(t, http.StatusCreated, req{method: "POST", path: "/v1/do-not-call", key: kLive, body: map[string]any{"number": "+14155550199", "reason": "asked"}})
	w.fails(t, 409, fault.CodeDoNotCall, req{method: "POST", path: "/v1/contacts", key: kLive, body: map[string]any{"number": "+14155550199"}})
	// The narrow key reaches project one: the contact is there.
	w.must(t, http.StatusOK, req{method: "GET", path: "/v1/contacts/" + id, key: kNarrow})
	p := w.must(t, http.StatusOK, req{method: "PATCH", path: "/v1/contacts/" + id, key: kLive, body: map[string]any{"name": "Ada L.", "timezone": nil}})
	if p.Str("name") != "Ada L." || p.JSON["timezone"] != nil || p.Str("external_id") != "crm-1" {
		t.Fatalf("patched %s", p)
	}
	w.fails(t, 422, fault.CodeValidationFailed, req{method: "PATCH", path: "/v1/contacts/" + id, key: kLive, body: map[string]any{"timezone": "Nowhere/City"}})
	l := w.must(t, http.StatusOK, req{method: "GET", path: "/v1/contacts?number=%2B14155550100", key: kLive})
	if d, _ := l.JSON["data"].([]any); len(d) != 1 {
		t.Fatalf("list by number %s", l)
	}
	w.must(t, http.StatusOK, req{method: "DELETE", path: "/v1/contacts/" + id, key: kLive})
	w.fails(t, 404, fault.CodeContactNotFound, req{method: "GET", path: "/v1/contacts/" + id, key: kLive})
}

func testContactsImport(t *testing.T, e engine) {
	w := newWorld(t, e.open(t), worldOpts{})
	imp := func(ctype string, body []byte) *resp {
		return w.do(t, req{method: "POST", path: "/v1/contacts/import", key: kLive, body: body, header: map[string]string{"Content-Type": ctype}})
	}
	// A byte-order mark, CRLF lines, a quoted comma, a bad zone, a bad number, a repeated number.
	csv := "\xef\xbb\xbfnumber,name,timezone,external_id,var.plan\r\n" +
		"+14155550100,\"Lovelace, Ada\",Europe/London,crm-1,gold\r\n" +
		"+14155550101,Bob,Mars/Olympus,crm-2,\r\n" +
		"not a number,Carol,,,\r\n" +
		"+14155550103,Dan,America/Chicago,,silver\r\n" +
		"+14155550100,Eve,,,\r\n"
	r := w.must(t, http.StatusOK, req{method: "POST", path: "/v1/contacts/import", key: kLive, body: []byte(csv), header: map[string]string{"Content-Type": "text/csv"}})
	if r.JSON["rows"] != 5.0 || r.JSON["created"] != 2.0 || r.JSON["refused"] != 3.0 {
		t.Fatalf("import %s", r)
	}
	for _, want := range []string{`"row":2,"field":"timezone","code":"invalid_value"`, `"row":3,"field":"number"`, `"row":5,"field":"number","code":"duplicate"`} {
		if !strings.Contains(string(r.Body), want) {
			t.Errorf("errors lack %s: %s", want, r.Body)
		}
	}
	for _, e := range r.JSON["errors"].([]any) {
		if typ := e.(map[string]any)["type"]; typ != "https://parley.dev/problems/validation_failed" {
			t.Errorf("a refused row's problem type: %v", e)
		}
	}
	// A file whose every row is refused (bad time zones, a bad number) is a 422 naming each row
	// and field, never a 200 that stored nothing.
	allBad := "number,name,timezone\n+14155550110,Gus,Mars/Olympus\n+14155550111,Hal,Europe/Atlantis\nnope,Ivy,\n"
	rb := w.fails(t, 422, fault.CodeValidationFailed, req{method: "POST", path: "/v1/contacts/import", key: kLive, body: []byte(allBad), header: map[string]string{"Content-Type": "text/csv"}})
	for _, want := range []string{`"pointer":"/rows/1/timezone","code":"invalid_value"`, `"pointer":"/rows/2/timezone"`, `"pointer":"/rows/3/number"`, `"refused":3`, `"rows":3`} {
		if !strings.Contains(string(rb.Body), want) {
			t.Errorf("the all-refused import lacks %s: %s", want, rb.Body)
		}
	}
	if l := w.must(t, http.StatusOK, req{method: "GET", path: "/v1/contacts?number=%2B14155550110", key: kLive}); len(l.JSON["data"].([]any)) != 0 {
		t.Fatalf("a refused row was stored: %s", l)
	}
	// Only numbers on the do-not-call list: refused, 422 too, each row named with its own code.
	w.must(t, http.StatusCreated, req{method: "POST", path: "/v1/do-not-call", key: kLive, body: map[string]any{"number": "+14155550120"}})
	rb = w.fails(t, 422, fault.CodeValidationFailed, req{method: "POST", path: "/v1/contacts/import", key: kLive, body: []byte("number\n+14155550120\n"), header: map[string]string{"Content-Type": "text/csv"}})
	if !strings.Contains(string(rb.Body), `"pointer":"/rows/1/number","code":"number_on_do_not_call_list"`) {
		t.Errorf("the do-not-call row: %s", rb.Body)
	}
	l := w.must(t, http.StatusOK, req{method: "GET", path: "/v1/contacts?external_id=crm-1", key: kLive})
	if d, _ := l.JSON["data"].([]any); len(d) != 1 || d[0].(map[string]any)["name"] != "Lovelace, Ada" {
		t.Fatalf("quoted comma: %s", l)
	}
	// Again: nothing new, two updated.
	r = imp("text/csv", []byte(csv))
	if r.JSON["created"] != 0.0 || r.JSON["updated"] != 2.0 {
		t.Fatalf("import again %s", r)
	}
	// JSON lines, by multipart, with a malformed line.
	body, ct := multipartBody(t, "file", "more.jsonl", []byte(`{"number":"+14155550104","name":"Fay","timezone":"Asia/Tokyo"}`+"\n"+`{"number":`+"\n"))
	r = imp(ct, body)
	if r.JSON["created"] != 1.0 || r.JSON["refused"] != 1.0 || !strings.Contains(string(r.Body), `"row":2`) {
		t.Fatalf("jsonl %s", r)
	}
	w.fails(t, 422, fault.CodeUnreadableImport, req{method: "POST", path: "/v1/contacts/import", key: kLive, body: []byte("\x89PNG\r\n\x1a\n\x00\x00\x00"), header: map[string]string{"Content-Type": "text/csv"}})
	w.fails(t, 415, fault.CodeUnsupportedMediaType, req{method: "POST", path: "/v1/contacts/import", key: kLive, body: []byte("{}")})
	// 10,001 rows: 10,000 kept, the last refused and named.
	var b strings.Builder
	b.WriteString("number\n")
	for i := range campaigns.MaxImportRows + 1 {
		fmt.Fprintf(&b, "+1415600%04d\n", i)
	}
	r = imp("text/csv", []byte(b.String()))
	if r.JSON["created"] != 10000.0 || r.JSON["refused"] != 1.0 || !strings.Contains(string(r.Body), `"row":10001`) {
		t.Fatalf("10,001 rows: created %v refused %v", r.JSON["created"], r.JSON["refused"])
	}
}

func testDoNotCall(t *testing.T, e engine) {
	w := newWorld(t, e.open(t), worldOpts{})
	r := w.must(t, http.StatusCreated, req{method: "POST", path: "/v1/do-not-call", key: kLive, body: map[string]any{"number": "+14155550100", "reason": "asked", "source": "caller_request"}})
	if r.Str("source") != "caller_request" || r.Str("number") != "+14155550100" {
		t.Fatalf("added %s", r)
	}
	again := w.must(t, http.StatusCreated, req{method: "POST", path: "/v1/do-not-call", key: kLive, body: map[string]any{"number": "+14155550100", "reason": "other"}})
	if again.Str("reason") != "asked" {
		t.Fatalf("kept as it was: %s", again)
	}
	w.fails(t, 422, fault.CodeValidationFailed, req{method: "POST", path: "/v1/do-not-call", key: kLive, body: map[string]any{"number": "555"}})
	w.must(t, http.StatusCreated, req{method: "POST", path: "/v1/do-not-call", key: kNarrow, body: map[string]any{"number": "+14155550101"}})
	l := w.must(t, http.StatusOK, req{method: "GET", path: "/v1/do-not-call?limit=1", key: kLive})
	if d, _ := l.JSON["data"].([]any); len(d) != 1 || l.JSON["has_more"] != true {
		t.Fatalf("list %s", l)
	}
	next := w.must(t, http.StatusOK, req{method: "GET", path: "/v1/do-not-call?limit=1&cursor=" + l.Str("next_cursor"), key: kLive})
	if d, _ := next.JSON["data"].([]any); len(d) != 1 || d[0].(map[string]any)["number"] != "+14155550101" {
		t.Fatalf("page 2 %s", next)
	}
	w.fails(t, 403, fault.CodeAllProjectsRequired, req{method: "GET", path: "/v1/do-not-call", key: kNarrow})
	w.must(t, http.StatusOK, req{method: "DELETE", path: "/v1/do-not-call/+14155550100", key: kLive})
	w.fails(t, 404, fault.CodeDoNotCallNotFound, req{method: "DELETE", path: "/v1/do-not-call/+14155550100", key: kLive})
}

func campaignBody(agent string, numbers ...string) map[string]any {
	cs := make([]any, len(numbers))
	for i, n := range numbers {
		cs[i] = map[string]any{"to_number": n, "variables": map[string]any{"customer": "Ada"}}
	}
	return map[string]any{"agent_id": agent, "name": "Reminders", "contacts": cs}
}

func testCampaignRules(t *testing.T, e engine) {
	w := newWorld(t, e.open(t), worldOpts{conv: &convOpts{}})
	w.credit(t, 10)
	agent := w.outboundAgent(t, "+14155550001")
	create := func(key string, body map[string]any) *resp {
		return w.do(t, req{method: "POST", path: "/v1/campaigns", key: key, header: idem(randHex(6)), body: body})
	}
	if r := create(kTest, campaignBody(agent, "+14155550100")); r.Status != 403 || r.Code() != fault.CodeLiveKeyRequired {
		t.Fatalf("test key: %s", r)
	}
	w.fails(t, 400, fault.CodeIdempotencyMissing, req{method: "POST", path: "/v1/campaigns", key: kLive, body: campaignBody(agent, "+14155550100")})
	inbound := w.publishedAgent(t, w.p1.ID, "Desk "+randHex(2), "inbound", channels("phone"))
	if r := create(kLive, campaignBody(inbound, "+14155550100")); r.Status != 409 || r.Code() != fault.CodeAgentNotOutbound {
		t.Fatalf("inbound agent: %s", r)
	}
	noNumber := w.publishedAgent(t, w.p1.ID, "Bare "+randHex(2), "outbound", channels("phone"))
	if r := create(kLive, campaignBody(noNumber, "+14155550100")); r.Status != 409 || r.Code() != fault.CodeNoNumberToCallFrom {
		t.Fatalf("no number: %s", r)
	}
	past := campaignBody(agent, "+14155550100")
	past["start_at"] = time.Now().Add(-time.Minute).UTC().Format(time.RFC3339)
	if r := create(kLive, past); r.Status != 422 || !strings.Contains(string(r.Body), "/start_at") {
		t.Fatalf("start_at past: %s", r)
	}
	bad := campaignBody(agent, "+14155550100", "12345", "+14155550102")
	bad["contacts"].([]any)[2].(map[string]any)["timezone"] = "Europe/Atlantis"
	if r := create(kLive, bad); r.Status != 422 || !strings.Contains(string(r.Body), "/contacts/1/to_number") || !strings.Contains(string(r.Body), "/contacts/2/timezone") {
		t.Fatalf("bad contacts: %s", r)
	}
	w.must(t, http.StatusCreated, req{method: "POST", path: "/v1/do-not-call", key: kLive, body: map[string]any{"number": "+14155550199"}})
	if r := create(kLive, campaignBody(agent, "+14155550100", "+14155550199")); r.Status != 409 || r.Code() != fault.CodeDoNotCall {
		t.Fatalf("do-not-call: %s", r)
	}
	// A draft; the statuses and their 409s.
	r := create(kLive, campaignBody(agent, "+14155550100", "+14155550101"))
	if r.Status != 201 || r.Str("status") != "draft" || r.JSON["contacts"].(map[string]any)["queued"] != 2.0 {
		t.Fatalf("draft %s", r)
	}
	id := r.Str("id")
	move := func(op string) *resp {
		return w.do(t, req{method: "POST", path: "/v1/campaigns/" + id + "/" + op, key: kLive})
	}
	if r := move("resume"); r.Status != 409 || r.Code() != fault.CodeCampaignState {
		t.Fatalf("resume a draft: %s", r)
	}
	add := w.must(t, http.StatusOK, req{method: "POST", path: "/v1/campaigns/" + id + "/contacts", key: kLive,
		body: map[string]any{"contacts": []any{map[string]any{"to_number": "+14155550101", "variables": map[string]any{"customer": "Ada"}}, map[string]any{"to_number": "+14155550102", "variables": map[string]any{"customer": "Bo"}}}}})
	if add.JSON["added"] != 1.0 || add.JSON["skipped"] != 1.0 {
		t.Fatalf("add %s", add)
	}
	// A bad time zone among added contacts: 422 naming it, and nothing added.
	before := fmt.Sprint(w.must(t, http.StatusOK, req{method: "GET", path: "/v1/campaigns/" + id, key: kLive}).JSON["contacts"])
	if r := w.do(t, req{method: "POST", path: "/v1/campaigns/" + id + "/contacts", key: kLive, body: map[string]any{"contacts": []any{
		map[string]any{"to_number": "+14155550103", "variables": map[string]any{"customer": "Cy"}},
		map[string]any{"to_number": "+14155550104", "timezone": "Europe/Atlantis", "variables": map[string]any{"customer": "Di"}}}}}); r.Status != 422 ||
		r.Code() != fault.CodeValidationFailed || !strings.Contains(string(r.Body), `"/contacts/1/timezone"`) {
		t.Fatalf("a bad zone among added contacts: %s", r)
	}
	if c := w.must(t, http.StatusOK, req{method: "GET", path: "/v1/campaigns/" + id, key: kLive}); fmt.Sprint(c.JSON["contacts"]) != before {
		t.Fatalf("after a refused add: %v", c.JSON["contacts"])
	}
	if r := move("pause"); r.Status != 409 {
		t.Fatalf("pause a draft: %s", r)
	}
	sched := campaignBody(agent, "+14155550100")
	sched["start_at"] = time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
	if r := create(kLive, sched); r.Str("status") != "scheduled" {
		t.Fatalf("scheduled %s", r)
	}
	// The test key lists none and reaches none.
	if l := w.must(t, http.StatusOK, req{method: "GET", path: "/v1/campaigns", key: kTest}); len(l.JSON["data"].([]any)) != 0 {
		t.Fatalf("test key lists %s", l)
	}
	if l := w.must(t, http.StatusOK, req{method: "GET", path: "/v1/campaigns?status=draft", key: kLive}); len(l.JSON["data"].([]any)) != 1 {
		t.Fatalf("drafts %s", l)
	}
	w.fails(t, 403, fault.CodeLiveKeyRequired, req{method: "POST", path: "/v1/campaigns/" + id + "/cancel", key: kTest})
	if r := move("cancel"); r.Status != 200 || r.Str("status") != "cancelled" || r.JSON["contacts"].(map[string]any)["cancelled"] != 3.0 {
		t.Fatalf("cancel %s", r)
	}
	for _, op := range []string{"pause", "start", "resume", "cancel"} {
		if r := move(op); r.Status != 409 || r.Code() != fault.CodeCampaignState {
			t.Fatalf("%s a cancelled campaign: %s", op, r)
		}
	}
	if r := w.do(t, req{method: "POST", path: "/v1/campaigns/" + id + "/contacts", key: kLive, body: map[string]any{"contacts": []any{map[string]any{"to_number": "+14155550109"}}}}); r.Status != 409 {
		t.Fatalf("add to a cancelled campaign: %s", r)
	}
	l := w.must(t, http.StatusOK, req{method: "GET", path: "/v1/campaigns/" + id + "/contacts?state=cancelled", key: kLive})
	if d := l.JSON["data"].([]any); len(d) != 3 {
		t.Fatalf("contacts %s", l)
	}
}

// outcomeDialer answers phone calls by the number's last digit: 0 answers (the call goes on
// until it is ended), 1 is busy, 2 never answers, 3 is a voicemail; it counts the dials per
// conversation id and the calls going at once.
type outcomeDialer struct {
	mu      sync.Mutex
	dials   map[string]int // conversation id → dials
	toOf    map[string]string
	going   int
	maxGone int
	reqs    []runtime.DialRequest
}

func (d *outcomeDialer) HasTrunk(string) bool { return true }

func (d *outcomeDialer) Dial(ctx context.Context, r runtime.DialRequest) error {
	d.mu.Lock()
	d.dials[r.ID]++
	d.toOf[r.ID] = r.To
	d.reqs = append(d.reqs, r)
	d.going++
	d.maxGone = max(d.maxGone, d.going)
	d.mu.Unlock()
	done := func() { d.mu.Lock(); d.going--; d.mu.Unlock() }
	switch r.To[len(r.To)-1] {
	case '1':
		done()
		return &runtime.DialFailure{Reason: session.EndBusy, Detail: "486 Busy Here"}
	case '2':
		done()
		return &runtime.DialFailure{Reason: session.EndNoAnswer, Detail: "ring timeout"}
	case '3':
		done()
		return &runtime.DialFailure{Reason: session.EndVoicemail, Detail: "machine"}
	case '9': // the trunk never answers
		done()
		return &runtime.DialFailure{Reason: session.EndFailed, Unreachable: true, Detail: "no answer from the trunk"}
	}
	r.OnRinging()
	port := &fakePort{tap: r.Tap}
	conv, err := r.Conversation(ctx, port)
	if err != nil {
		done()
		return err
	}
	if err := conv.StartVoice(ctx, port); err != nil {
		done()
		return err
	}
	go func() { <-conv.Done(); done() }()
	return nil
}

// runDialler runs the campaign workers of a world until stop: the tick every 50 ms and a job
// worker for the attempts.
func runDialler(t *testing.T, w *world) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	jw := jobs.NewWorker(jobs.Options{Store: w.st, Owner: "test", PollInterval: 20 * time.Millisecond, Concurrency: 8})
	jw.Register(campaigns.KindAttempt, w.api.Campaigns.RunAttempt)
	var wg sync.WaitGroup
	wg.Go(func() { _ = jw.Run(ctx) })
	wg.Go(func() {
		tk := time.NewTicker(50 * time.Millisecond)
		defer tk.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tk.C:
				if _, err := w.api.Campaigns.Tick(ctx); err != nil && ctx.Err() == nil {
					t.Logf("tick: %v", err)
				}
			}
		}
	})
	return func() { cancel(); wg.Wait() }
}

// testCampaignDialler runs a campaign against a dialler that answers, is busy, never answers
// or reaches a machine: every contact ends in the state its outcome and the retry rules give,
// each attempt is dialled once, pacing and the organization's call limit hold, a number put
// on the do-not-call list meanwhile is skipped, and pause, resume and cancel behave.
func testCampaignDialler(t *testing.T, e engine) {
	d := &outcomeDialer{dials: map[string]int{}, toOf: map[string]string{}}
	w := newWorld(t, e.open(t), worldOpts{conv: &convOpts{dialer: d, maxCalls: 3}})
	w.credit(t, 100)
	agent := w.outboundAgent(t, "+14155550001")
	var numbers []string
	for i := range 20 {
		numbers = append(numbers, fmt.Sprintf("+1415555%03d%d", 100+i/4, i%4)) // last digits 0..3
	}
	numbers = append(numbers, "+14155559990") // put on the do-not-call list while the campaign runs
	body := campaignBody(agent, numbers...)
	body["pacing"] = map[string]any{"max_concurrent": 5, "starts_per_minute": 600}
	body["callbacks"] = map[string]any{"max_attempts": 2, "retry_on": []any{"no_answer"}, "delay_seconds": 1}
	body["voicemail"] = map[string]any{"action": "leave_message", "message": "Hello {{customer}}, call us back."}
	r := w.must(t, http.StatusCreated, req{method: "POST", path: "/v1/campaigns", key: kLive, header: idem("c1"), body: body})
	id := r.Str("id")
	get := func() *resp {
		return w.must(t, http.StatusOK, req{method: "GET", path: "/v1/campaigns/" + id, key: kLive})
	}
	counts := func() map[string]any { return get().JSON["contacts"].(map[string]any) }
	stop := runDialler(t, w)
	defer stop()
	// Draft: nothing is dialled.
	time.Sleep(200 * time.Millisecond) // a negative check: the ticks run every 50 ms
	if d.count() != 0 {
		t.Fatalf("a draft dialled %d", d.count())
	}
	w.must(t, http.StatusCreated, req{method: "POST", path: "/v1/do-not-call", key: kLive, body: map[string]any{"number": "+14155559990"}})
	w.must(t, http.StatusOK, req{method: "POST", path: "/v1/campaigns/" + id + "/start", key: kLive})
	// The answered calls stay in_call until ended; end each as it comes.
	deadline := time.Now().Add(60 * time.Second)
	ended := map[string]bool{}
	for time.Now().Before(deadline) {
		l := w.must(t, http.StatusOK, req{method: "GET", path: "/v1/campaigns/" + id + "/contacts?state=in_call&limit=100", key: kLive})
		for _, x := range l.JSON["data"].([]any) {
			ids := x.(map[string]any)["conversation_ids"].([]any)
			cid := ids[len(ids)-1].(string)
			if !ended[cid] {
				ended[cid] = true
				w.must(t, http.StatusAccepted, req{method: "POST", path: "/v1/conversations/" + cid + "/end", key: kLive})
			}
		}
		if get().Str("status") == "completed" {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	c := counts()
	if get().Str("status") != "completed" || c["completed"] != 5.0 || c["busy"] != 5.0 || c["no_answer"] != 5.0 || c["voicemail"] != 5.0 || c["skipped_dnc"] != 1.0 {
		t.Fatalf("campaign %s", get())
	}
	// Attempts: no_answer twice (the retry), the others once; each attempt dialled once.
	l := w.must(t, http.StatusOK, req{method: "GET", path: "/v1/campaigns/" + id + "/contacts?limit=100", key: kLive})
	perNumber := map[string]int{}
	d.mu.Lock()
	for cid, n := range d.dials {
		if n != 1 {
			t.Errorf("conversation %s dialled %d times", cid, n)
		}
		perNumber[d.toOf[cid]]++
	}
	maxGone := d.maxGone
	var rt time.Duration
	var amd *runtime.AMD
	if len(d.reqs) > 0 {
		rt, amd = d.reqs[0].RingTimeout, d.reqs[0].AMD
	}
	d.mu.Unlock()
	for _, x := range l.JSON["data"].([]any) {
		cc := x.(map[string]any)
		want := 1
		switch {
		case cc["state"] == "no_answer":
			want = 2
		case cc["state"] == "skipped_dnc":
			want = 0
		}
		if cc["attempts"] != float64(want) || perNumber[cc["to_number"].(string)] != want || len(cc["conversation_ids"].([]any)) != want {
			t.Errorf("contact %v %v: attempts %v, dialled %d, want %d", cc["to_number"], cc["state"], cc["attempts"], perNumber[cc["to_number"].(string)], want)
		}
	}
	if maxGone > 3 {
		t.Errorf("%d calls at once; the organization's limit is 3", maxGone)
	}
	if rt != 30*time.Second || amd == nil || !amd.LeaveMessage || amd.Message != "Hello Ada, call us back." {
		t.Errorf("ring timeout %v, AMD %+v", rt, amd)
	}
	if n, err := w.rt.CallSlots(context.Background(), w.org.ID); err != nil || n != 0 {
		t.Errorf("%d call slots held after the campaign (%v)", n, err)
	}
	// The events of the campaign.
	evs, err := w.st.ListEvents(context.Background(), w.org.ID, store.ModeLive, "", 500)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	for _, ev := range evs {
		seen[ev.Type]++
	}
	if seen["campaign.started"] != 1 || seen["campaign.completed"] != 1 || seen["campaign.contact_finished"] != 21 {
		t.Errorf("events %v", seen)
	}

	// Pause, resume, cancel: nothing is dialled while paused; cancel dials nothing new.
	before := d.count()
	body = campaignBody(agent, "+14155552000", "+14155552010", "+14155552020")
	body["start"] = true
	r = w.must(t, http.StatusCreated, req{method: "POST", path: "/v1/campaigns", key: kLive, header: idem("c2"), body: body})
	id2 := r.Str("id")
	w.must(t, http.StatusOK, req{method: "POST", path: "/v1/campaigns/" + id2 + "/pause", key: kLive})
	// An attempt placed before the pause committed may still be ringing out: wait until the
	// dials settle, then nothing more may come.
	settled := func() int {
		prev := -1
		for range 20 {
			n := d.count()
			if n == prev {
				return n
			}
			prev = n
			time.Sleep(100 * time.Millisecond) // sampling the count until it stops moving
		}
		t.Fatal("dials never settled after the pause")
		return 0
	}
	paused := settled()
	time.Sleep(300 * time.Millisecond) // a negative check: six ticks
	if d.count() != paused {
		t.Fatalf("dialled while paused: %d then %d", paused, d.count())
	}
	w.must(t, http.StatusOK, req{method: "POST", path: "/v1/campaigns/" + id2 + "/resume", key: kLive})
	waitFor(t, 10*time.Second, "the resumed campaign dials", func() bool { return d.count() >= before+3 })
	c2 := w.must(t, http.StatusOK, req{method: "POST", path: "/v1/campaigns/" + id2 + "/cancel", key: kLive})
	if c2.Str("status") != "cancelled" {
		t.Fatalf("cancel %s", c2)
	}
	n := d.count()
	time.Sleep(200 * time.Millisecond)
	if d.count() != n {
		t.Fatalf("dialled after cancel")
	}
}

func (d *outcomeDialer) count() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.reqs)
}

var _ = register(scenario{"CampaignCallingHours", testCampaignCallingHours})

// testCampaignCallingHours runs the dialler on an injected clock across New York's spring DST
// change, with contacts in New York, Paris and Tokyo and calling hours 9 to 17: each is dialled
// only inside its own wall-clock hours, and waits for their next opening otherwise.
func testCampaignCallingHours(t *testing.T, e engine) {
	d := &outcomeDialer{dials: map[string]int{}, toOf: map[string]string{}}
	w := newWorld(t, e.open(t), worldOpts{conv: &convOpts{dialer: d}})
	w.credit(t, 10)
	agent := w.outboundAgent(t, "+14155550001")
	at := func(s string) time.Time {
		v, err := time.Parse(time.RFC3339, s)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	now := at("2026-03-08T12:30:00Z") // NY 8:30 EDT (the clocks moved at 2:00), Paris 13:30 CET, Tokyo 21:30 JST
	w.now.Store(&now)
	body := map[string]any{"agent_id": agent, "name": "Hours", "calling_hours": map[string]any{"start_hour": 9, "end_hour": 17},
		"contacts": []any{
			map[string]any{"to_number": "+12125550101", "timezone": "America/New_York", "variables": map[string]any{"customer": "NY"}},
			map[string]any{"to_number": "+33155550101", "timezone": "Europe/Paris", "variables": map[string]any{"customer": "Paris"}},
			map[string]any{"to_number": "+81355550101", "timezone": "Asia/Tokyo", "variables": map[string]any{"customer": "Tokyo"}},
		}, "start": true}
	id := w.must(t, http.StatusCreated, req{method: "POST", path: "/v1/campaigns", key: kLive, header: idem("hours"), body: body}).Str("id")
	stop := runDialler(t, w)
	defer stop()
	byNumber := func() map[string]map[string]any {
		l := w.must(t, http.StatusOK, req{method: "GET", path: "/v1/campaigns/" + id + "/contacts", key: kLive})
		out := map[string]map[string]any{}
		for _, x := range l.JSON["data"].([]any) {
			out[x.(map[string]any)["to_number"].(string)] = x.(map[string]any)
		}
		return out
	}
	waitFor(t, 10*time.Second, "Paris dialled, New York and Tokyo waiting", func() bool {
		c := byNumber()
		return c["+33155550101"]["state"] == "busy" && c["+12125550101"]["next_attempt_at"] != nil && c["+81355550101"]["next_attempt_at"] != nil
	})
	c := byNumber()
	if c["+12125550101"]["next_attempt_at"] != "2026-03-08T13:00:00.000000Z" || c["+81355550101"]["next_attempt_at"] != "2026-03-09T00:00:00.000000Z" {
		t.Fatalf("next openings: NY %v, Tokyo %v", c["+12125550101"]["next_attempt_at"], c["+81355550101"]["next_attempt_at"])
	}
	if d.count() != 1 {
		t.Fatalf("%d dialled outside their hours", d.count()-1)
	}
	nine := at("2026-03-08T13:00:00Z") // 9:00 EDT
	w.now.Store(&nine)
	waitFor(t, 10*time.Second, "New York dialled at 9:00 EDT", func() bool { return byNumber()["+12125550101"]["state"] == "busy" })
	if d.count() != 2 || byNumber()["+81355550101"]["state"] != "queued" {
		t.Fatalf("Tokyo dialled at 22:00 JST")
	}
	tokyo := at("2026-03-09T00:00:00Z") // 9:00 JST
	w.now.Store(&tokyo)
	waitFor(t, 10*time.Second, "the campaign completed", func() bool {
		return w.must(t, http.StatusOK, req{method: "GET", path: "/v1/campaigns/" + id, key: kLive}).Str("status") == "completed"
	})
}

var _ = register(scenario{"CampaignCircuitBreaker", testCampaignCircuitBreaker})

// testCampaignCircuitBreaker: when the trunk is down, the campaign pauses itself after most of
// its recent calls failed for that one cause, with the reason and an event, instead of burning
// through the list; resumed, it goes on.
func testCampaignCircuitBreaker(t *testing.T, e engine) {
	d := &outcomeDialer{dials: map[string]int{}, toOf: map[string]string{}}
	w := newWorld(t, e.open(t), worldOpts{conv: &convOpts{dialer: d}})
	w.credit(t, 10)
	agent := w.outboundAgent(t, "+14155550001")
	var numbers []string
	for i := range 40 {
		numbers = append(numbers, fmt.Sprintf("+1415556%03d9", i))
	}
	body := campaignBody(agent, numbers...)
	body["start"] = true
	body["pacing"] = map[string]any{"max_concurrent": 2}
	id := w.must(t, http.StatusCreated, req{method: "POST", path: "/v1/campaigns", key: kLive, header: idem("breaker"), body: body}).Str("id")
	stop := runDialler(t, w)
	defer stop()
	var c *resp
	waitFor(t, 30*time.Second, "the campaign paused by the breaker", func() bool {
		c = w.must(t, http.StatusOK, req{method: "GET", path: "/v1/campaigns/" + id, key: kLive})
		return c.Str("status") == "paused"
	})
	if c.Str("paused_code") != fault.CodeUpstreamUnreachable || !strings.Contains(c.Str("paused_reason"), "of the last 10 calls failed") {
		t.Fatalf("paused %s", c)
	}
	failed := c.JSON["contacts"].(map[string]any)["failed"].(float64)
	if failed < 8 || failed > 14 {
		t.Fatalf("%v contacts failed before the breaker tripped", failed)
	}
	dialled := d.count()
	time.Sleep(300 * time.Millisecond) // a negative check: six ticks while paused
	if d.count() != dialled {
		t.Fatalf("dialled while paused by the breaker")
	}
	evs, err := w.st.ListEvents(context.Background(), w.org.ID, store.ModeLive, "", 500)
	if err != nil {
		t.Fatal(err)
	}
	paused := 0
	for _, ev := range evs {
		if ev.Type == "campaign.paused" && strings.Contains(string(ev.Data), "circuit_breaker") {
			paused++
		}
	}
	if paused != 1 {
		t.Fatalf("%d breaker pause events", paused)
	}
}

var _ = register(scenario{"CampaignAttemptRunAgain", testCampaignAttemptRunAgain})

// slotMedia places nothing and counts the call slots taken and given back.
type slotMedia struct {
	benchMedia
	acquired, released, placed int
}

func (m *slotMedia) Place(context.Context, store.Mode, calls.Placement) error { m.placed++; return nil }
func (m *slotMedia) AcquireCallSlot(context.Context, store.OrgID, store.ConversationID, int) error {
	m.acquired++
	return nil
}
func (m *slotMedia) ReleaseCallSlot(context.Context, store.OrgID, store.ConversationID) { m.released++ }

// testCampaignAttemptRunAgain: an attempt job's first run, just after its tick, dials from the
// tick's read and takes the call's slot; the same job run again (its second attempt, with the
// same payload) finds the attempt placed before it takes a slot: it dials nothing and leaves
// the slot of the call going on alone.
func testCampaignAttemptRunAgain(t *testing.T, e engine) {
	w := newWorld(t, e.open(t), worldOpts{conv: &convOpts{}})
	w.credit(t, 10)
	agent := w.outboundAgent(t, "+14155550001")
	body := campaignBody(agent, "+14155558801")
	body["start"] = true
	w.must(t, http.StatusCreated, req{method: "POST", path: "/v1/campaigns", key: kLive, header: idem("again"), body: body})
	m := &slotMedia{}
	svc := &campaigns.Service{Store: w.st, Calls: &calls.Service{Store: w.st, Rules: w.api.Calls.Rules, Media: m}}
	ctx := context.Background()
	if res, err := svc.Tick(ctx); err != nil || res.Leased != 1 {
		t.Fatalf("tick: %+v %v", res, err)
	}
	js, err := w.st.ListJobs(ctx, store.JobFilter{State: store.JobQueued, Kind: campaigns.KindAttempt, Limit: 10})
	if err != nil || len(js) != 1 {
		t.Fatalf("jobs %d %v", len(js), err)
	}
	var p campaigns.AttemptPayload
	if err := json.Unmarshal(js[0].Payload, &p); err != nil || p.Dial == nil {
		t.Fatalf("payload %s: %v (want the tick's read in it)", js[0].Payload, err)
	}
	j := &jobs.Job{ID: js[0].ID, Kind: js[0].Kind, Payload: js[0].Payload, Attempt: 1, MaxAttempts: js[0].MaxAttempts}
	if err := svc.RunAttempt(ctx, j); err != nil {
		t.Fatal(err)
	}
	if a, err := w.st.GetCampaignAttempt(ctx, p.ConversationID); err != nil || a.State != store.AttemptPlaced || m.placed != 1 || m.acquired != 1 || m.released != 0 {
		t.Fatalf("first run: attempt %+v %v; placed %d, slots taken %d, given back %d", a, err, m.placed, m.acquired, m.released)
	}
	j.Attempt = 2
	if err := svc.RunAttempt(ctx, j); err != nil {
		t.Fatal(err)
	}
	if m.placed != 1 || m.acquired != 1 || m.released != 0 {
		t.Fatalf("run again: placed %d, slots taken %d, given back %d (want 1, 1, 0)", m.placed, m.acquired, m.released)
	}
}
