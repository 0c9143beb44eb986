package sip_test

// issue 21: outbound 3xx redirects against sipp.

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/parley-voice/parley/internal/testenv"
	"github.com/parley-voice/parley/session"
	"github.com/parley-voice/parley/sip"
)

func sipp302(contact string) string {
	return `
  <recv request="INVITE" crlf="true"/>
  <send>
    <![CDATA[

      SIP/2.0 302 Moved Temporarily
      [last_Via:]
      [last_From:]
      [last_To:];tag=[pid]SIPpTag01[call_number]
      [last_Call-ID:]
      [last_CSeq:]
      Contact: ` + contact + `
      Content-Length: 0

    ]]>
  </send>
  <recv request="ACK"/>
`
}

const sippAnswer = `
  <recv request="INVITE" crlf="true">
    <action>
      <ereg regexp="sip:b@" search_in="msg" assign_to="ruri" check_it="true"/>
    </action>
  </recv>
  <send retrans="500">
    <![CDATA[

      SIP/2.0 200 OK
      [last_Via:]
      [last_From:]
      [last_To:];tag=[pid]SIPpTag02[call_number]
      [last_Call-ID:]
      [last_CSeq:]
      Contact: <sip:b@[local_ip]:[local_port]>
      Content-Type: application/sdp
      Content-Length: [len]

      v=0
      o=sipp 53655765 2353687637 IN IP[local_ip_type] [local_ip]
      s=-
      c=IN IP[media_ip_type] [media_ip]
      t=0 0
      m=audio [media_port] RTP/AVP 0
      a=rtpmap:0 PCMU/8000

    ]]>
  </send>
  <recv request="ACK" crlf="true"/>
  <Reference variables="ruri"/>
  <recv request="BYE"/>
  <send>
    <![CDATA[

      SIP/2.0 200 OK
      [last_Via:]
      [last_From:]
      [last_To:]
      [last_Call-ID:]
      [last_CSeq:]
      Content-Length: 0

    ]]>
  </send>
`

func sippScenario(body string) string {
	return `<?xml version="1.0" encoding="ISO-8859-1" ?>
<!DOCTYPE scenario SYSTEM "sipp.dtd">
<scenario name="redirect">` + body + `</scenario>
`
}

// runSippUAS runs a sipp UAS scenario on a free port in the background; wait returns its
// output and error.
func runSippUAS(t *testing.T, scenario string) (port int, wait func() (string, error)) {
	t.Helper()
	testenv.NeedCommand(t, "sipp")
	dir := t.TempDir()
	writeFile(t, dir, "uas.xml", scenario)
	port = testenv.FreeUDPPort(t, false)
	ctx := ctxTimeout(t, 60*time.Second)
	type result struct {
		out string
		err error
	}
	done := make(chan result, 1)
	go func() {
		out, err := runSipp(t, ctx, dir, "-sf", "uas.xml", "-m", "1", "-i", "127.0.0.1", "-p", fmt.Sprint(port),
			"-mp", fmt.Sprint(testenv.FreeUDPPort(t, true)), "-nostdin", "-timeout", "30s", "-timeout_error", "-trace_err", "-error_file", "err.log")
		if b, rerr := os.ReadFile(filepath.Join(dir, "err.log")); rerr == nil {
			out += "\n" + string(b)
		}
		done <- result{out, err}
	}()
	time.Sleep(300 * time.Millisecond) // sipp binds its port
	return port, func() (string, error) { r := <-done; return r.out, r.err }
}

// TestSippRedirect: sipp answers Parley's INVITE 302 with two Contacts; the higher-q one is a
// private address outside the allow-list and is refused, the other is followed and answers.
// Both steps are recorded on the call and as events.
func TestSippRedirect(t *testing.T) {
	t.Parallel()
	port, wait := runSippUAS(t, sippScenario(
		sipp302(`<sip:a@10.9.9.9:5060>;q=0.9, <sip:b@127.0.0.1:[local_port]>;q=0.5, <sip:c@127.0.0.1:9>;q=0.1`)+sippAnswer))
	eng := newEngine(t, engineOptions{})
	srv := newServer(t, sip.Options{})
	var evs events
	tr := loopbackTrunk("sipp")
	tr.URI = fmt.Sprintf("sip:127.0.0.1:%d", port)
	ctx := ctxTimeout(t, 30*time.Second)
	call, err := srv.Dial(ctx, sip.DialRequest{From: "+15550001111", To: "+14155550123", Trunk: tr,
		Conversation: eng.factory(), OnEvent: evs.add})
	if err != nil {
		t.Fatal(err)
	}
	steps := call.Redirects()
	if len(steps) != 2 || steps[0].State != "refused" || !strings.Contains(steps[0].To, "10.9.9.9") ||
		steps[1].State != "followed" || !strings.Contains(steps[1].To, "sip:b@127.0.0.1") || steps[1].Status != 302 {
		t.Fatalf("redirects %+v", steps)
	}
	if ev, ok := evs.last(sip.EventRedirect); !ok || ev.Redirect.State != "followed" {
		t.Fatalf("redirect event %+v", ev)
	}
	time.Sleep(300 * time.Millisecond)
	call.Hangup(ctx, session.EndAPI)
	if out, err := wait(); err != nil {
		t.Fatalf("sipp: %v\n%s", err, lastLines(out, 30))
	}
}

// TestSippRedirectHops: a redirect chain longer than 3 hops is cut at the fourth: the dial
// fails with the 302, its DialError lists three followed steps and the refused fourth, and no
// call is left.
func TestSippRedirectHops(t *testing.T) {
	t.Parallel()
	port, wait := runSippUAS(t, sippScenario(
		sipp302(`<sip:h1@127.0.0.1:[local_port]>`)+sipp302(`<sip:h2@127.0.0.1:[local_port]>`)+
			sipp302(`<sip:h3@127.0.0.1:[local_port]>`)+sipp302(`<sip:h4@127.0.0.1:[local_port]>`)))
	eng := newEngine(t, engineOptions{})
	srv := newServer(t, sip.Options{})
	tr := loopbackTrunk("sipp")
	tr.URI = fmt.Sprintf("sip:127.0.0.1:%d", port)
	ctx := ctxTimeout(t, 30*time.Second)
	_, err := srv.Dial(ctx, sip.DialRequest{From: "+15550001111", To: "+14155550123", Trunk: tr, Conversation: eng.factory()})
	var de *sip.DialError
	if !errors.As(err, &de) || de.Status != 302 {
		t.Fatalf("err %v", err)
	}
	if n := len(de.Redirects); n != 4 || de.Redirects[3].State != "refused" || !strings.Contains(de.Redirects[3].Reason, "more than 3") {
		t.Fatalf("redirects %+v", de.Redirects)
	}
	if out, err := wait(); err != nil {
		t.Fatalf("sipp: %v\n%s", err, lastLines(out, 30))
	}
	waitFor(t, 5*time.Second, "no calls left", func() bool { return len(srv.ActiveCalls()) == 0 })
}
