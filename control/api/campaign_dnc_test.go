package api

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	voicechannels "github.com/parley-voice/parley/control/channels"
	"github.com/parley-voice/parley/control/fault"
	"github.com/parley-voice/parley/control/runtime"
	"github.com/parley-voice/parley/control/store"
	"github.com/parley-voice/parley/internal/testenv"
	"github.com/parley-voice/parley/media"
	"github.com/parley-voice/parley/media/mediatest"
	"github.com/parley-voice/parley/session"
	"github.com/parley-voice/parley/session/fakes"
	"github.com/parley-voice/parley/sip"
	"github.com/parley-voice/parley/sip/siptest"
)

// issue 15: the agent's built-in add_to_do_not_call tool, end to end. A real SIP server of
// Parley dials a sipp UAS that answers and says "Please stop calling me"; the fake STT hears it,
// the fake LLM (scripted) calls add_to_do_not_call and then end_call, and Parley hangs up. The
// number is then on the organization's list with source caller_request (the store row, on both
// engines), the transcript records the tool call, a second campaign made before the call skips
// the number (skipped_dnc) and a new campaign naming it is refused (409). sipp's own log shows
// the number was sent exactly one INVITE.
func TestCampaignDoNotCallTool(t *testing.T) {
	sippBin := testenv.NeedCommand(t, "sipp")
	forEachStore(t, func(t *testing.T, e engine) { testCampaignDoNotCallTool(t, e, sippBin) })
}

// sippPerson answers (siptest's callee scenario), plays person.pcap, and waits for Parley's BYE.
var sippPerson = siptest.SippCallee(`
  <nop><action><exec play_pcap_audio="person.pcap"/></action></nop>`)

// onePlace sends every call to the trunk "person".
type onePlace struct{ *voicechannels.SIPDialer }

func (d onePlace) Dial(ctx context.Context, r runtime.DialRequest) error {
	r.Trunk = "person"
	return d.SIPDialer.Dial(ctx, r)
}

func testCampaignDoNotCallTool(t *testing.T, e engine, sippBin string) {
	dir := t.TempDir()
	// A short "Hello?" (a human to the answering-machine detection), then the request.
	speech := append(append(make([]int16, 400), mediatest.Speech(t, "Hello?", 8000)...), make([]int16, 8000*2)...)
	speech = append(append(speech, mediatest.Speech(t, "Please stop calling me.", 8000)...), make([]int16, 8000*20)...)
	if err := writeRTPPcapFile(filepath.Join(dir, "person.pcap"), speech); err != nil {
		t.Fatal(err)
	}
	base := testenv.RTPBase(39)
	srv, err := sip.New(sip.Options{Addr: "127.0.0.1:0", RTPPorts: media.PortRange{Min: base, Max: base + 39},
		RTPIP: netip.MustParseAddr("127.0.0.1"), Trunks: sip.NewStaticTrunks(), Logger: quietLog()})
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stopSIP := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- srv.Run(runCtx) }()
	t.Cleanup(func() { stopSIP(); <-served })

	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Second)
	defer cancel()
	port := testenv.FreeUDPPort(t, false)
	if err := os.WriteFile(filepath.Join(dir, "person.xml"), []byte(sippPerson), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(ctx, sippBin, "-sf", "person.xml", "-i", "127.0.0.1", "-p", fmt.Sprint(port),
		"-mp", fmt.Sprint(testenv.FreeUDPPort(t, true)), "-nostdin", "-trace_msg", "-message_file", "person.msgs", "-timeout", "95s")
	cmd.Dir, cmd.Env, cmd.WaitDelay = dir, append(os.Environ(), "TERM=dumb"), 5*time.Second
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var sipps sync.WaitGroup
	sipps.Go(func() { _ = cmd.Wait() })
	t.Cleanup(func() { cancel(); sipps.Wait() })
	trunks := sip.NewStaticTrunks(sip.Trunk{Name: "person", URI: fmt.Sprintf("sip:127.0.0.1:%d", port), Transport: sip.UDP,
		AllowedSources: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}})
	dialer := onePlace{&voicechannels.SIPDialer{Server: srv, Trunks: trunks.Lookup}}

	w := newWorld(t, e.open(t), worldOpts{conv: &convOpts{dialer: dialer, maxCalls: 5}})
	w.credit(t, 100)
	// Every utterance the fake STT hears is the person's request; the fake LLM answers the
	// first with add_to_do_not_call, the second round with end_call, and anything after with
	// text (the post-call analysis, which is not this test's subject).
	w.tp.Fakes.Deepgram.SetOptions(fakes.DeepgramFakeOptions{Script: []string{"please stop calling me"}})
	w.tp.Fakes.Transcribe.SetOptions(fakes.OpenAISTTFakeOptions{Script: []string{"please stop calling me"}})
	var rounds atomic.Int32
	var heard sync.Map
	w.tp.Fakes.Chat.Script().SetFallback(func(last string) fakes.ScriptTurn {
		heard.Store(rounds.Load(), last)
		switch rounds.Add(1) {
		case 1:
			return fakes.ScriptTurn{ToolCalls: []fakes.ScriptToolCall{{Name: runtime.ToolDoNotCall, Args: json.RawMessage(`{"reason":"asked us to stop calling"}`)}}}
		case 2:
			return fakes.ScriptTurn{ToolCalls: []fakes.ScriptToolCall{{Name: session.ToolEndCall, Args: json.RawMessage(`{"reason":"do not call"}`)}}}
		}
		return fakes.ScriptTurn{Text: "Goodbye."}
	})

	agent := w.publishedAgent(t, w.p1.ID, "Reminder", "outbound", channels("phone"))
	if _, err := w.st.CreatePhoneNumber(context.Background(), storeNumber(w, agent, "+14155550001", "person")); err != nil {
		t.Fatal(err)
	}
	const number = "+14156019990"
	// A second campaign naming the number is made (a draft) before the call: the check at its
	// creation passes; the check at dial time must skip the number.
	later := w.must(t, http.StatusCreated, req{method: "POST", path: "/v1/campaigns", key: kLive, header: idem("dnc-later"),
		body: campaignBody(agent, number)}).Str("id")
	body := campaignBody(agent, number)
	body["start"] = true
	first := w.must(t, http.StatusCreated, req{method: "POST", path: "/v1/campaigns", key: kLive, header: idem("dnc-first"), body: body}).Str("id")
	stop := runDialler(t, w)
	defer stop()
	contactOf := func(campaign string) map[string]any {
		l := w.must(t, http.StatusOK, req{method: "GET", path: "/v1/campaigns/" + campaign + "/contacts", key: kLive})
		data := l.JSON["data"].([]any)
		if len(data) != 1 {
			t.Fatalf("campaign %s lists %d contacts", campaign, len(data))
		}
		return data[0].(map[string]any)
	}
	waitFor(t, 80*time.Second, "the first campaign completed", func() bool {
		return w.must(t, http.StatusOK, req{method: "GET", path: "/v1/campaigns/" + first, key: kLive}).Str("status") == "completed"
	})
	cc := contactOf(first)
	if cc["state"] != "completed" || cc["attempts"] != 1.0 {
		t.Fatalf("the person's contact: %v", cc)
	}
	if got, _ := heard.Load(int32(0)); !strings.Contains(fmt.Sprint(got), "please stop calling me") {
		t.Errorf("the model's first round heard %q", got)
	}

	// The store row, with the source the interface names for a person's own request.
	d, err := w.st.DoNotCallList().Get(context.Background(), store.OrgScope(w.org.ID), number)
	if err != nil {
		t.Fatalf("the number is not on the do-not-call list: %v", err)
	}
	conv := cc["conversation_ids"].([]any)[0].(string)
	if d.Source != store.DNCSourceCaller || !strings.Contains(d.Reason, conv) || !strings.Contains(d.Reason, "asked us to stop calling") {
		t.Errorf("the do-not-call entry: %+v", d)
	}
	l := w.must(t, http.StatusOK, req{method: "GET", path: "/v1/do-not-call", key: kLive})
	if data := l.JSON["data"].([]any); len(data) != 1 || data[0].(map[string]any)["source"] != "caller_request" || data[0].(map[string]any)["number"] != number {
		t.Errorf("GET /v1/do-not-call: %s", l.Body)
	}
	// The transcript records the tool call and its result.
	var tr *resp
	waitFor(t, 10*time.Second, "the tool call in the transcript", func() bool {
		tr = w.must(t, http.StatusOK, req{method: "GET", path: "/v1/conversations/" + conv + "/transcript", key: kLive})
		return strings.Contains(string(tr.Body), runtime.ToolDoNotCall+"(")
	})
	if !strings.Contains(string(tr.Body), `\"added\":true`) {
		t.Errorf("the transcript's tool line does not say the number was added: %s", tr.Body)
	}

	// The draft made before the call: dialled now, the number is skipped.
	w.must(t, http.StatusOK, req{method: "POST", path: "/v1/campaigns/" + later + "/start", key: kLive})
	waitFor(t, 30*time.Second, "the second campaign completed", func() bool {
		return w.must(t, http.StatusOK, req{method: "GET", path: "/v1/campaigns/" + later, key: kLive}).Str("status") == "completed"
	})
	if cc := contactOf(later); cc["state"] != "skipped_dnc" || cc["attempts"] != 0.0 {
		t.Errorf("the number in the later campaign: %v", cc)
	}
	// A new campaign naming it is refused.
	w.fails(t, http.StatusConflict, fault.CodeDoNotCall, req{method: "POST", path: "/v1/campaigns", key: kLive, header: idem("dnc-new"), body: campaignBody(agent, number)})
	stop()

	// sipp saw one call, to the number.
	cancel()
	sipps.Wait()
	_, _, to := readSippLog(t, filepath.Join(dir, "person.msgs"))
	calls := 0
	for _, n := range to {
		if n != number {
			t.Errorf("sipp was called for %s", n)
		}
		calls++
	}
	if calls != 1 {
		t.Errorf("sipp saw %d calls to %s, want 1", calls, number)
	}
}
