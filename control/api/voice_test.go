package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	voicechannels "github.com/parley-voice/parley/control/channels"
	"github.com/parley-voice/parley/control/fault"
	"github.com/parley-voice/parley/control/store"
	"github.com/parley-voice/parley/internal/testenv"
	"github.com/parley-voice/parley/media"
	"github.com/parley-voice/parley/sip"
	"github.com/parley-voice/parley/sip/siptest"
)

// sippBusy refuses Parley's INVITE with 486 and an RFC 3326 Reason carrying Q.850 cause 17,
// as a PSTN gateway does, then takes the ACK.
const sippBusy = `<?xml version="1.0" encoding="ISO-8859-1" ?>
<!DOCTYPE scenario SYSTEM "sipp.dtd">
<scenario name="busy callee">
  <recv request="INVITE" crlf="true"/>
  <send>
    <![CDATA[

      SIP/2.0 486 Busy Here
      [last_Via:]
      [last_From:]
      [last_To:];tag=[pid]SIPpTag01[call_number]
      [last_Call-ID:]
      [last_CSeq:]
      Reason: Q.850;cause=17;text="user busy"
      Content-Length: 0

    ]]>
  </send>
  <recv request="ACK"/>
</scenario>`

// sippHangsUp answers Parley's call, then hangs up itself after a second and a half with a
// BYE carrying an RFC 3326 Reason (Q.850 cause 16, normal call clearing).
var sippHangsUp = func() string {
	sc := siptest.SippCallee("")
	sc = strings.Replace(sc, `<recv request="ACK" rtd="true" crlf="true"/>`, `<recv request="ACK" rtd="true" crlf="true">
    <action>
      <ereg regexp="[^ ].*" search_in="hdr" header="From:" check_it="true" assign_to="parley"/>
      <ereg regexp="[^ ].*" search_in="hdr" header="To:" check_it="true" assign_to="callee"/>
    </action>
  </recv>
  <pause milliseconds="1500"/>
  <send retrans="500">
    <![CDATA[

      BYE sip:parley@[remote_ip]:[remote_port] SIP/2.0
      Via: SIP/2.0/[transport] [local_ip]:[local_port];branch=[branch]
      From: [$callee]
      To: [$parley]
      Call-ID: [call_id]
      CSeq: 2 BYE
      Max-Forwards: 70
      Reason: Q.850;cause=16;text="Normal call clearing"
      Content-Length: 0

    ]]>
  </send>
  <recv response="200"/>
</scenario>`, 1)
	return sc[:strings.Index(sc, "</scenario>")+len("</scenario>")] + "\n"
}()

// TestCallCalleeHangsUpEndDetail (issue 22 item 4, outbound): the callee of an answered call
// hangs up with a BYE carrying Reason: Q.850;cause=16; the conversation ends callee_hung_up
// and its end_detail says so.
func TestCallCalleeHangsUpEndDetail(t *testing.T) {
	sippBin := testenv.NeedCommand(t, "sipp")
	t.Parallel()
	srv, err := sip.New(sip.Options{Addr: "127.0.0.1:0", RTPPorts: media.PortRange{Min: 42000, Max: 42999},
		RTPIP: netip.MustParseAddr("127.0.0.1"), Trunks: sip.NewStaticTrunks(), Logger: quietLog()})
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- srv.Run(runCtx) }()
	t.Cleanup(func() { stop(); <-served })

	port := testenv.FreeUDPPort(t, false)
	trunks := sip.NewStaticTrunks(sip.Trunk{Name: "sipp", URI: fmt.Sprintf("sip:127.0.0.1:%d", port), Transport: sip.UDP,
		AllowedSources: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}})
	dialer := &voicechannels.SIPDialer{Server: srv, Trunks: trunks.Lookup}
	w := newWorld(t, migrate(t, storeOptions(t)), worldOpts{conv: &convOpts{dialer: dialer}})
	w.credit(t, 10)
	agent := w.publishedAgent(t, w.p1.ID, "Reminder", "outbound", channels("phone"))
	if _, err := w.st.CreatePhoneNumber(context.Background(), storeNumber(w, agent, "+14155550001", "sipp")); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "uas.xml"), []byte(sippHangsUp), 0o644)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	sippDone := make(chan string, 1)
	go func() {
		cmd := exec.CommandContext(ctx, sippBin, "-sf", "uas.xml", "-m", "1", "-i", "127.0.0.1", "-p", fmt.Sprint(port),
			"-mp", fmt.Sprint(testenv.FreeUDPPort(t, true)), "-nostdin", "-timeout", "30s", "-timeout_error")
		cmd.Dir, cmd.Env, cmd.WaitDelay = dir, append(os.Environ(), "TERM=dumb"), 5*time.Second
		if out, err := cmd.CombinedOutput(); err != nil {
			sippDone <- fmt.Sprintf("sipp failed: %v\n%s", err, out)
			return
		}
		sippDone <- ""
	}()
	var id string
	waitFor(t, 15*time.Second, "the call placed", func() bool {
		r := w.do(t, req{method: "POST", path: "/v1/calls", key: kLive, header: idem("hangs-up-" + randHex(4)),
			body: map[string]any{"agent_id": agent, "to_number": "+14155550123", "variables": map[string]any{"customer": "Ada"}}})
		if r.Status == http.StatusCreated {
			id = r.Str("id")
			return true
		}
		return false
	})
	if msg := <-sippDone; msg != "" {
		t.Fatal(msg)
	}
	c := w.waitStatus(t, kLive, id, "ended")
	if c.Str("end_reason") != "callee_hung_up" {
		t.Fatalf("ended %s", c)
	}
	d, _ := c.JSON["end_detail"].(map[string]any)
	if d == nil || d["q850_cause"] != float64(16) || d["text"] != "the callee hung up (BYE, Q.850 cause 16 normal call clearing)" {
		t.Fatalf("end_detail %v", c.JSON["end_detail"])
	}
}

// TestCallBusyEndDetail (issue 22 item 8): an outbound call refused by the callee's side ends
// busy, and the conversation says why: the SIP status, the Q.850 cause of the Reason header
// and a detail written for a person.
func TestCallBusyEndDetail(t *testing.T) {
	sippBin := testenv.NeedCommand(t, "sipp")
	t.Parallel()
	srv, err := sip.New(sip.Options{Addr: "127.0.0.1:0", RTPPorts: media.PortRange{Min: 41000, Max: 41999},
		RTPIP: netip.MustParseAddr("127.0.0.1"), Trunks: sip.NewStaticTrunks(), Logger: quietLog()})
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- srv.Run(runCtx) }()
	t.Cleanup(func() { stop(); <-served })

	port := testenv.FreeUDPPort(t, false)
	trunks := sip.NewStaticTrunks(sip.Trunk{Name: "sipp", URI: fmt.Sprintf("sip:127.0.0.1:%d", port), Transport: sip.UDP,
		AllowedSources: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}})
	dialer := &voicechannels.SIPDialer{Server: srv, Trunks: trunks.Lookup}
	w := newWorld(t, migrate(t, storeOptions(t)), worldOpts{conv: &convOpts{dialer: dialer}})
	w.credit(t, 10)
	agent := w.publishedAgent(t, w.p1.ID, "Reminder", "outbound", channels("phone"))
	if _, err := w.st.CreatePhoneNumber(context.Background(), storeNumber(w, agent, "+14155550001", "sipp")); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "uas.xml"), []byte(sippBusy), 0o644)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	sippDone := make(chan string, 1)
	go func() {
		cmd := exec.CommandContext(ctx, sippBin, "-sf", "uas.xml", "-m", "1", "-i", "127.0.0.1", "-p", fmt.Sprint(port),
			"-mp", fmt.Sprint(testenv.FreeUDPPort(t, true)), "-nostdin", "-timeout", "30s", "-timeout_error")
		cmd.Dir, cmd.Env, cmd.WaitDelay = dir, append(os.Environ(), "TERM=dumb"), 5*time.Second
		if out, err := cmd.CombinedOutput(); err != nil {
			sippDone <- fmt.Sprintf("sipp failed: %v\n%s", err, out)
			return
		}
		sippDone <- ""
	}()
	var id string
	waitFor(t, 15*time.Second, "the call placed", func() bool {
		r := w.do(t, req{method: "POST", path: "/v1/calls", key: kLive, header: idem("busy-" + randHex(4)),
			body: map[string]any{"agent_id": agent, "to_number": "+14155550123", "variables": map[string]any{"customer": "Ada"}}})
		if r.Status == http.StatusCreated {
			id = r.Str("id")
			return true
		}
		return false
	})
	c := w.waitStatus(t, kLive, id, "ended")
	if c.Str("end_reason") != "busy" {
		t.Fatalf("ended %s", c)
	}
	d, _ := c.JSON["end_detail"].(map[string]any)
	if d == nil || d["sip_status"] != float64(486) || d["q850_cause"] != float64(17) || d["text"] != "the trunk answered 486 Busy Here (Q.850 cause 17)" {
		t.Fatalf("end_detail %v", c.JSON["end_detail"])
	}
	if msg := <-sippDone; msg != "" {
		t.Fatal(msg)
	}
}

// testDeleteRemovesUnnamedRecording (issue 22 item 3): deleting a call removes its recording
// file even when the file was never named on the conversation (a call cut off by a crash).
func testDeleteRemovesUnnamedRecording(t *testing.T, e engine) {
	w := newWorld(t, e.open(t), worldOpts{conv: &convOpts{}})
	agent := w.publishedAgent(t, w.p1.ID, "Reminder", "outbound", channels("phone"))
	ctx := context.Background()
	c, err := w.st.CreateConversation(ctx, store.Conversation{OrgID: w.org.ID, ProjectID: w.p1.ID, AgentID: store.AgentID(agent),
		Channel: store.ChannelPhone, Direction: "outbound", Mode: store.ModeLive, Language: "en", ToNumber: "+14155550100"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.st.EndConversation(ctx, c.ID, store.ConversationEnd{Reason: "network_lost", At: time.Now()}); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(w.dataDir, "recordings", string(c.ID)+".wav")
	os.MkdirAll(filepath.Dir(path), 0o700)
	if err := os.WriteFile(path, []byte("RIFF"), 0o600); err != nil {
		t.Fatal(err)
	}
	if got := w.conv(t, kLive, string(c.ID)); got.JSON["has_recording"] != false {
		t.Fatalf("has_recording %v", got.JSON["has_recording"])
	}
	w.must(t, 200, req{method: "DELETE", path: "/v1/conversations/" + string(c.ID), key: kLive})
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the recording is still on disk: %v", err)
	}
}

var _ = register(
	scenario{"TransferDestinationChecked", testTransferDestinationChecked},
	scenario{"OrgTransferAllow", testOrgTransferAllow},
	scenario{"DeleteRemovesUnnamedRecording", testDeleteRemovesUnnamedRecording},
)

// testTransferDestinationChecked (issue 22 item 7): the API refuses, with 422
// transfer_destination_not_allowed, a transfer of a live call to a SIP URI on loopback or a
// private network, unless the call's trunk allows that network; numbers and public
// addresses pass.
func testTransferDestinationChecked(t *testing.T, e engine) {
	w := newWorld(t, e.open(t), worldOpts{conv: &convOpts{}})
	w.credit(t, 10)
	ctx := context.Background()
	tr, err := w.st.CreateTrunk(ctx, nil, store.NewTrunk{Name: "pbx", URI: "sip:pbx.example.test"})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.st.SetTrunkNetworks(ctx, tr.ID, store.TrunkNetworks{TransferAllow: []string{"10.1.0.0/16"}}); err != nil {
		t.Fatal(err)
	}
	agent := w.publishedAgent(t, w.p1.ID, "Reminder", "outbound", channels("phone"))
	if _, err := w.st.CreatePhoneNumber(ctx, storeNumber(w, agent, "+14155550001", "pbx")); err != nil {
		t.Fatal(err)
	}
	w.api.Conversations.TransferCheck = voicechannels.TransferChecker{Store: w.st}.Check
	w.dialer.mu.Lock()
	w.dialer.trunks["pbx"] = true
	w.dialer.mu.Unlock()
	r := w.must(t, 201, req{method: "POST", path: "/v1/calls", key: kLive, header: idem("xfer"),
		body: map[string]any{"agent_id": agent, "to_number": "+14155550100", "variables": map[string]any{"customer": "Ada"}}})
	id := r.Str("id")
	w.waitStatus(t, kLive, id, "in_progress")
	for _, dest := range []string{"sip:desk@127.0.0.1:5060", "sip:desk@10.2.0.1", "sip:desk@[::1]", "sip:desk@169.254.169.254"} {
		p := w.fails(t, 422, fault.CodeTransferNotAllowed, req{method: "POST", path: "/v1/conversations/" + id + "/transfer", key: kLive, body: map[string]any{"destination": dest}})
		if !strings.Contains(p.Str("detail"), "not allowed") {
			t.Errorf("%s: detail %q", dest, p.Str("detail"))
		}
	}
	// Inside the trunk's allow-list: accepted (the fake trunk carries it out).
	w.must(t, 202, req{method: "POST", path: "/v1/conversations/" + id + "/transfer", key: kLive, body: map[string]any{"destination": "sip:desk@10.1.2.3"}})
	w.waitStatus(t, kLive, id, "ended")
}

// testOrgTransferAllow (issue 22 item 7): the organization's transfer allow-list is what a
// call whose number has no trunk goes by: the API accepts a transfer into it and refuses, with
// 422 transfer_destination_not_allowed, one outside it; the runtime hands the list to the
// media node with the call (DialRequest.TransferAllow), which checks it again.
func testOrgTransferAllow(t *testing.T, e engine) {
	w := newWorld(t, e.open(t), worldOpts{conv: &convOpts{}})
	w.credit(t, 10)
	ctx := context.Background()
	if err := w.st.SetOrgTransferAllow(ctx, w.org.ID, []string{"192.168.50.0/24"}); err != nil {
		t.Fatal(err)
	}
	agent := w.publishedAgent(t, w.p1.ID, "Reminder", "outbound", channels("phone"))
	if _, err := w.st.CreatePhoneNumber(ctx, storeNumber(w, agent, "+14155550002", "")); err != nil {
		t.Fatal(err)
	}
	w.api.Conversations.TransferCheck = voicechannels.TransferChecker{Store: w.st}.Check
	w.dialer.mu.Lock()
	w.dialer.trunks[""] = true
	w.dialer.mu.Unlock()
	r := w.must(t, 201, req{method: "POST", path: "/v1/calls", key: kLive, header: idem("org-xfer"),
		body: map[string]any{"agent_id": agent, "to_number": "+14155550100", "from_number": "+14155550002", "variables": map[string]any{"customer": "Ada"}}})
	id := r.Str("id")
	w.waitStatus(t, kLive, id, "in_progress")
	w.dialer.mu.Lock()
	calls := slices.Clone(w.dialer.calls)
	w.dialer.mu.Unlock()
	if len(calls) != 1 || !slices.Equal(calls[0].TransferAllow, []string{"192.168.50.0/24"}) {
		t.Errorf("the media node was not given the organization's list: %+v", calls)
	}
	for _, dest := range []string{"sip:desk@10.1.2.3", "sip:desk@192.168.51.1", "sip:desk@127.0.0.1"} {
		p := w.fails(t, 422, fault.CodeTransferNotAllowed, req{method: "POST", path: "/v1/conversations/" + id + "/transfer", key: kLive, body: map[string]any{"destination": dest}})
		if !strings.Contains(p.Str("detail"), "not allowed") {
			t.Errorf("%s: detail %q", dest, p.Str("detail"))
		}
	}
	w.must(t, 202, req{method: "POST", path: "/v1/conversations/" + id + "/transfer", key: kLive, body: map[string]any{"destination": "sip:desk@192.168.50.7"}})
	w.waitStatus(t, kLive, id, "ended")
}
