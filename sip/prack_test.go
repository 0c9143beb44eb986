package sip_test

// issue 21: 100rel / PRACK (RFC 3262) against sipp, both ways.

import (
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

// sippUAC100rel is a sipp caller that requires 100rel; with prack it acknowledges the reliable
// 183 (checking it carries Require: 100rel, an RSeq and the SDP answer), else it never does
// and expects the INVITE to be refused 500.
func sippUAC100rel(prack bool) string {
	head := `<?xml version="1.0" encoding="ISO-8859-1" ?>
<!DOCTYPE scenario SYSTEM "sipp.dtd">
<scenario name="uac 100rel">
  <send retrans="500">
    <![CDATA[

      INVITE sip:[service]@[remote_ip]:[remote_port] SIP/2.0
      Via: SIP/2.0/[transport] [local_ip]:[local_port];branch=[branch]
      From: sipp <sip:+15550001111@[local_ip]:[local_port]>;tag=[pid]SIPpTag00[call_number]
      To: <sip:[service]@[remote_ip]:[remote_port]>
      Call-ID: [call_id]
      CSeq: 1 INVITE
      Contact: <sip:sipp@[local_ip]:[local_port]>
      Max-Forwards: 70
      Require: 100rel
      Supported: 100rel
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
  <recv response="100" optional="true"/>
  <recv response="183" rrs="true">
    <action>
      <ereg regexp="[0-9]+" search_in="hdr" header="RSeq:" assign_to="rseq" check_it="true"/>
      <ereg regexp="100rel" search_in="hdr" header="Require:" assign_to="req" check_it="true"/>
      <ereg regexp="m=audio [0-9]+ RTP/AVP 0" search_in="body" assign_to="sdp" check_it="true"/>
    </action>
  </recv>
`
	if !prack {
		return head + `  <recv response="183" optional="true"/>
  <recv response="183" optional="true"/>
  <recv response="183" optional="true"/>
  <recv response="500"/>
  <Reference variables="req,sdp,rseq"/>
  <send>
    <![CDATA[

      ACK sip:[service]@[remote_ip]:[remote_port] SIP/2.0
      Via: SIP/2.0/[transport] [local_ip]:[local_port];branch=[branch-9]
      From: sipp <sip:+15550001111@[local_ip]:[local_port]>;tag=[pid]SIPpTag00[call_number]
      [last_To:]
      Call-ID: [call_id]
      CSeq: 1 ACK
      Max-Forwards: 70
      Content-Length: 0

    ]]>
  </send>
</scenario>
`
	}
	return head + `  <send>
    <![CDATA[

      PRACK [next_url] SIP/2.0
      Via: SIP/2.0/[transport] [local_ip]:[local_port];branch=[branch]
      From: sipp <sip:+15550001111@[local_ip]:[local_port]>;tag=[pid]SIPpTag00[call_number]
      [last_To:]
      Call-ID: [call_id]
      CSeq: 2 PRACK
      RAck: [$rseq] 1 INVITE
      Max-Forwards: 70
      Content-Length: 0

    ]]>
  </send>
  <recv response="200">
    <action>
      <ereg regexp="PRACK" search_in="hdr" header="CSeq:" assign_to="c1" check_it="true"/>
    </action>
  </recv>
  <recv response="200" rrs="true">
    <action>
      <ereg regexp="INVITE" search_in="hdr" header="CSeq:" assign_to="c2" check_it="true"/>
    </action>
  </recv>
  <send>
    <![CDATA[

      ACK [next_url] SIP/2.0
      Via: SIP/2.0/[transport] [local_ip]:[local_port];branch=[branch]
      From: sipp <sip:+15550001111@[local_ip]:[local_port]>;tag=[pid]SIPpTag00[call_number]
      [last_To:]
      Call-ID: [call_id]
      CSeq: 1 ACK
      Max-Forwards: 70
      Content-Length: 0

    ]]>
  </send>
  <pause milliseconds="1500"/>
  <send retrans="500">
    <![CDATA[

      BYE [next_url] SIP/2.0
      Via: SIP/2.0/[transport] [local_ip]:[local_port];branch=[branch]
      From: sipp <sip:+15550001111@[local_ip]:[local_port]>;tag=[pid]SIPpTag00[call_number]
      [last_To:]
      Call-ID: [call_id]
      CSeq: 3 BYE
      Max-Forwards: 70
      Content-Length: 0

    ]]>
  </send>
  <recv response="200"/>
  <Reference variables="req,sdp,c1,c2"/>
</scenario>
`
}

// TestSippPrackInbound: sipp requires 100rel; Parley answers early with a reliable 183 carrying
// the SDP answer, waits for the PRACK, then answers 200; sipp's BYE ends the call. A caller that
// never sends PRACK gets 500 once the reliable 183 has been retransmitted for PrackTimeout, and
// the call ends failed with nothing left.
func TestSippPrackInbound(t *testing.T) {
	testenv.NeedCommand(t, "sipp")
	for _, prack := range []bool{true, false} {
		t.Run(fmt.Sprintf("prack=%v", prack), func(t *testing.T) {
			t.Parallel()
			eng := newEngine(t, engineOptions{})
			rt := newRouter()
			rt.add("+14155550100", sip.Plan{Conversation: eng.factory()})
			srv := newServer(t, sip.Options{Router: rt, PrackTimeout: 2 * time.Second})
			dir := t.TempDir()
			writeFile(t, dir, "uac.xml", sippUAC100rel(prack))
			ctx := ctxTimeout(t, 60*time.Second)
			out, err := runSippCaller(t, ctx, dir, func() []string {
				return []string{srv.Addr(sip.UDP).String(), "-sf", "uac.xml", "-s", "+14155550100", "-m", "1",
					"-i", "127.0.0.1", "-p", fmt.Sprint(testenv.FreeUDPPort(t, false)), "-mp", fmt.Sprint(testenv.FreeUDPPort(t, true)),
					"-nostdin", "-timeout", "30s", "-timeout_error"}
			})
			if err != nil {
				t.Fatalf("sipp failed: %v\n%s", err, lastLines(out, 40))
			}
			waitFor(t, 5*time.Second, "the call's end", func() bool { _, ok := rt.lastEnded(); return ok })
			ev, _ := rt.lastEnded()
			want := session.EndCallerHungUp
			if !prack {
				want = session.EndFailed
			}
			if ev.EndReason != want {
				t.Errorf("end reason %q, want %q", ev.EndReason, want)
			}
			waitFor(t, 5*time.Second, "no calls left", func() bool { return len(srv.ActiveCalls()) == 0 })
		})
	}
}

// sippUAS100rel is a sipp callee that sends a reliable 183 with SDP (Require: 100rel, RSeq 1)
// and expects Parley's PRACK naming it before it answers.
const sippUAS100rel = `<?xml version="1.0" encoding="ISO-8859-1" ?>
<!DOCTYPE scenario SYSTEM "sipp.dtd">
<scenario name="uas 100rel">
  <recv request="INVITE" crlf="true">
    <action>
      <ereg regexp="100rel" search_in="hdr" header="Supported:" assign_to="s" check_it="true"/>
      <ereg regexp=".*" search_in="hdr" header="Via:" assign_to="via"/>
      <ereg regexp=".*" search_in="hdr" header="From:" assign_to="from"/>
      <ereg regexp=".*" search_in="hdr" header="To:" assign_to="to"/>
      <ereg regexp=".*" search_in="hdr" header="CSeq:" assign_to="cseq"/>
    </action>
  </recv>
  <send retrans="500">
    <![CDATA[

      SIP/2.0 183 Session Progress
      [last_Via:]
      [last_From:]
      [last_To:];tag=[pid]SIPpTag01[call_number]
      [last_Call-ID:]
      [last_CSeq:]
      Contact: <sip:sipp@[local_ip]:[local_port];transport=[transport]>
      Require: 100rel
      RSeq: 1
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
  <recv request="PRACK" crlf="true">
    <action>
      <ereg regexp="^ *1 [0-9]+ INVITE$" search_in="hdr" header="RAck:" assign_to="rack" check_it="true"/>
    </action>
  </recv>
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
  <send retrans="500">
    <![CDATA[

      SIP/2.0 200 OK
      Via: [$via]
      From: [$from]
      To: [$to];tag=[pid]SIPpTag01[call_number]
      [last_Call-ID:]
      CSeq: [$cseq]
      Contact: <sip:sipp@[local_ip]:[local_port];transport=[transport]>
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
  <Reference variables="s,rack"/>
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
</scenario>
`

// TestSippPrackOutbound: Parley dials sipp, which sends a reliable 183; Parley PRACKs it (RAck
// naming RSeq 1 and the INVITE's CSeq), the call is answered and Parley's BYE ends it.
func TestSippPrackOutbound(t *testing.T) {
	testenv.NeedCommand(t, "sipp")
	t.Parallel()
	eng := newEngine(t, engineOptions{})
	srv := newServer(t, sip.Options{})
	dir := t.TempDir()
	writeFile(t, dir, "uas.xml", sippUAS100rel)
	port := testenv.FreeUDPPort(t, false)
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
	tr := loopbackTrunk("sipp")
	tr.URI = fmt.Sprintf("sip:127.0.0.1:%d", port)
	var call *sip.Call
	var err error
	for attempt := 0; attempt < 20; attempt++ {
		call, err = srv.Dial(ctx, sip.DialRequest{From: "+15550001111", To: "+14155550123", Trunk: tr,
			Conversation: eng.factory(), RingTimeout: 10 * time.Second})
		if err == nil || !strings.Contains(err.Error(), "no response") {
			break
		}
		time.Sleep(100 * time.Millisecond) // sipp not listening yet
	}
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(500 * time.Millisecond)
	call.Hangup(ctx, session.EndAPI)
	r := <-done
	if r.err != nil {
		t.Fatalf("sipp: %v\n%s", r.err, lastLines(r.out, 40))
	}
}
