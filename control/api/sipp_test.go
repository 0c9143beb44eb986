package api

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	voicechannels "github.com/parley-voice/parley/control/channels"

	"github.com/parley-voice/parley/sip/siptest"

	"github.com/parley-voice/parley/control/store"
	"github.com/parley-voice/parley/internal/testenv"
	"github.com/parley-voice/parley/media"
	"github.com/parley-voice/parley/sip"
)

// sippTransferee answers Parley's call with PCMU, then accepts a REFER (202), reports the
// transfer done with a NOTIFY sipfrag of 200 (RFC 3515 §2.4.4), and takes Parley's BYE.
var sippTransferee = siptest.SippCallee(`
  <recv request="REFER">
    <action>
      <ereg regexp="&lt;([^&gt;]*)&gt;" search_in="hdr" header="Contact:" check_it="true" assign_to="contact,uri"/>
      <ereg regexp="[^ ].*" search_in="hdr" header="From:" check_it="true" assign_to="parley"/>
      <ereg regexp="[^ ].*" search_in="hdr" header="To:" check_it="true" assign_to="callee"/>
    </action>
  </recv>
  <Reference variables="contact"/>
  <send>
    <![CDATA[

      SIP/2.0 202 Accepted
      [last_Via:]
      [last_From:]
      [last_To:]
      [last_Call-ID:]
      [last_CSeq:]
      Contact: <sip:sipp@[local_ip]:[local_port];transport=[transport]>
      Content-Length: 0

    ]]>
  </send>
  <send retrans="500">
    <![CDATA[

      NOTIFY [$uri] SIP/2.0
      Via: SIP/2.0/[transport] [local_ip]:[local_port];branch=[branch]
      From: [$callee]
      To: [$parley]
      Call-ID: [call_id]
      CSeq: 1 NOTIFY
      Contact: <sip:sipp@[local_ip]:[local_port];transport=[transport]>
      Max-Forwards: 70
      Event: refer
      Subscription-State: terminated;reason=noresource
      Content-Type: message/sipfrag;version=2.0
      Content-Length: [len]

      SIP/2.0 200 OK

    ]]>
  </send>
  <recv response="200"/>`)

// TestCallToSipp places a live call through the API and the real SIP server to sipp as the
// callee: it is answered, the greeting and a say command are played (RTP flows), the transfer
// sends a REFER that sipp accepts, and afterwards the transcript and the recording are there,
// and the recording plays in sox.
func TestCallToSipp(t *testing.T) {
	sippBin := testenv.NeedCommand(t, "sipp")
	soxBin := testenv.NeedCommand(t, "sox")
	t.Parallel()
	base := testenv.RTPBase(99)
	srv, err := sip.New(sip.Options{Addr: "127.0.0.1:0", RTPPorts: media.PortRange{Min: base, Max: base + 99},
		RTPIP: netip.MustParseAddr("127.0.0.1"), Trunks: sip.NewStaticTrunks(), Logger: quietLog()})
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- srv.Run(runCtx) }()
	t.Cleanup(func() { stop(); <-served })

	port := testenv.FreeUDPPort(t, false)
	trunk := sip.Trunk{Name: "sipp", URI: fmt.Sprintf("sip:127.0.0.1:%d", port), Transport: sip.UDP,
		AllowedSources: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}}
	trunks := sip.NewStaticTrunks(trunk)
	dialer := &voicechannels.SIPDialer{Server: srv, Trunks: trunks.Lookup}
	w := newWorld(t, migrate(t, storeOptions(t)), worldOpts{conv: &convOpts{dialer: dialer}})
	w.credit(t, 10)
	agent := w.publishedAgent(t, w.p1.ID, "Reminder", "outbound", channels("phone"))
	n, err := w.st.CreatePhoneNumber(context.Background(), storeNumber(w, agent, "+14155550001", "sipp"))
	if err != nil {
		t.Fatal(err)
	}
	_ = n

	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "uas.xml"), []byte(sippTransferee), 0o644)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	sippDone := make(chan string, 1)
	go func() {
		cmd := exec.CommandContext(ctx, sippBin, "-sf", "uas.xml", "-m", "1", "-i", "127.0.0.1", "-p", fmt.Sprint(port),
			"-mp", fmt.Sprint(testenv.FreeUDPPort(t, true)), "-nostdin", "-timeout", "45s", "-timeout_error", "-trace_msg", "-message_file", "msgs.log")
		cmd.Dir, cmd.Env, cmd.WaitDelay = dir, append(os.Environ(), "TERM=dumb"), 5*time.Second
		out, err := cmd.CombinedOutput()
		if err != nil {
			sippDone <- fmt.Sprintf("sipp failed: %v\n%s", err, out)
			return
		}
		sippDone <- ""
	}()
	// sipp needs a moment to bind: a call refused at once (502) is placed again.
	var id string
	waitFor(t, 15*time.Second, "the call placed", func() bool {
		r := w.do(t, req{method: "POST", path: "/v1/calls", key: kLive, header: idem("sipp-" + randHex(4)),
			body: map[string]any{"agent_id": agent, "to_number": "+14155550123", "variables": map[string]any{"customer": "Ada"}}})
		if r.Status == http.StatusCreated {
			id = r.Str("id")
			return true
		}
		return false
	})
	w.waitStatus(t, kLive, id, "in_progress")
	waitFor(t, 10*time.Second, "RTP to sipp", func() bool {
		calls := srv.ActiveCalls()
		return len(calls) == 1 && calls[0].Stats().PacketsSent > 25
	})
	say := w.must(t, 202, req{method: "POST", path: "/v1/conversations/" + id + "/say", key: kLive, body: map[string]any{"text": "Your appointment is at ten."}})
	waitFor(t, 20*time.Second, "the say played", func() bool {
		return w.must(t, 200, req{method: "GET", path: "/v1/conversations/" + id + "/commands/" + say.Str("id"), key: kLive}).Str("status") == "done"
	})
	tr := w.must(t, 202, req{method: "POST", path: "/v1/conversations/" + id + "/transfer", key: kLive, body: map[string]any{"destination": "+14155550199"}})
	t.Cleanup(func() {
		if t.Failed() {
			msgs, _ := os.ReadFile(filepath.Join(dir, "msgs.log"))
			t.Logf("sipp messages:\n%s", msgs)
			t.Logf("transfer: %s", w.must(t, 200, req{method: "GET", path: "/v1/conversations/" + id + "/commands/" + tr.Str("id"), key: kLive}))
		}
	})
	lines := w.liveLines(t, kLive, id)
	got := strings.Join(lineTexts(lines), "\n")
	for _, want := range []string{"agent: Hello Ada, how can I help?", "agent: Your appointment is at ten."} {
		if !strings.Contains(got, want) {
			t.Fatalf("the transcript lacks %q:\n%s", want, got)
		}
	}
	if c := w.waitStatus(t, kLive, id, "ended"); c.Str("end_reason") != "transferred" {
		t.Fatalf("ended %s", c)
	}
	if c := w.must(t, 200, req{method: "GET", path: "/v1/conversations/" + id + "/commands/" + tr.Str("id"), key: kLive}); c.Str("status") != "done" {
		t.Fatalf("transfer %s", c)
	}
	if msg := <-sippDone; msg != "" {
		t.Fatal(msg)
	}
	msgs, _ := os.ReadFile(filepath.Join(dir, "msgs.log"))
	if !strings.Contains(string(msgs), "REFER sip:") || !strings.Contains(string(msgs), "Refer-To: <sip:+14155550199@127.0.0.1:") {
		t.Fatalf("no REFER reached sipp:\n%s", msgs)
	}
	if strings.Count(string(msgs), "INVITE sip:") != 1 {
		t.Fatalf("sipp saw %d INVITEs", strings.Count(string(msgs), "INVITE sip:"))
	}
	waitFor(t, 10*time.Second, "the recording", func() bool { return w.conv(t, kLive, id).JSON["has_recording"] == true })
	rec := w.must(t, 200, req{method: "GET", path: "/v1/conversations/" + id + "/recording", key: kLive})
	file := filepath.Join(t.TempDir(), "call.wav")
	os.WriteFile(file, rec.Body, 0o644)
	out, err := exec.Command(soxBin, file, "-n", "stat").CombinedOutput()
	if err != nil {
		t.Fatalf("sox cannot play the recording: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "Length (seconds)") {
		t.Fatalf("sox stat: %s", out)
	}
}

func quietLog() *slog.Logger { return slog.New(slog.DiscardHandler) }

// storeOptions is a fresh SQLite store of t.
func storeOptions(t *testing.T) store.Options { return store.Options{DataDir: t.TempDir()} }

// storeNumber is a number of the world's first project reached through trunk, assigned to agent.
func storeNumber(w *world, agent, number, trunk string) store.NewPhoneNumber {
	return store.NewPhoneNumber{OrgID: w.org.ID, ProjectID: w.p1.ID, Number: number, Trunk: trunk, AgentID: store.AgentID(agent)}
}
