package siptest

import (
	"fmt"
	"strings"
)

// SippSoakCaller returns the sipp UAC scenario of the soak (issue 22, load proof): the load
// test's call (SippCaller) for most calls, and, drawn at random per call, pct percent of calls
// that never ACK the 200 (ACK loss: the caller goes away, Parley retransmits the 200 and must
// give up by itself) and pct percent that CANCEL right after their INVITE (the CANCEL race:
// 200 to the CANCEL, 487 to the INVITE, ACK; or, when the 200 wins the race, ACK and BYE, a
// normal end of a call, so that only real failures count). pct 100 makes every call a race. sipp absorbs what comes for a finished call
// (-deadcall_wait), such as the retransmitted 200s.
func SippSoakCaller(c SippCall, pct float64) string {
	normal := SippCaller(c)
	// The normal call's steps, between the scenario's opening and closing tags.
	body := normal[strings.Index(normal, "<send retrans"):strings.LastIndex(normal, "</scenario>")]
	// The ACK-loss branch leaves right after the 200, before the ACK.
	body = strings.Replace(body, `<recv response="200" rtd="true" rrs="true"/>`,
		`<recv response="200" rtd="true" rrs="true"/>
  <nop next="done" test="noack"/>`, 1)
	media := "m=audio [media_port] RTP/AVP 0 101\n      a=rtpmap:0 PCMU/8000\n      a=rtpmap:101 telephone-event/8000\n      a=fmtp:101 0-15"
	hdr := func(method string, seq int) string {
		return fmt.Sprintf(`Via: SIP/2.0/[transport] [local_ip]:[local_port];branch=z9hG4bK-race-[call_number];rport
      From: "sipp" <sip:+15550001111@[local_ip]:[local_port]>;tag=[call_number]
      To: <sip:[service]@[remote_ip]:[remote_port]>%s
      Call-ID: [call_id]
      CSeq: %d %s
      Max-Forwards: 70`, map[bool]string{true: "[peer_tag_param]", false: ""}[method == "ACK"], seq, method)
	}
	// In-dialog requests after a 2xx (its ACK, the BYE) are new transactions: new branch. The
	// dialog's tag is the one of the INVITE's 200 (a later answer to the CANCEL carries another).
	dialogHdr := func(method string, seq int) string {
		return fmt.Sprintf(`Via: SIP/2.0/[transport] [local_ip]:[local_port];branch=[branch];rport
      From: "sipp" <sip:+15550001111@[local_ip]:[local_port]>;tag=[call_number]
      To: <sip:[service]@[remote_ip]:[remote_port]>[$totag]
      Call-ID: [call_id]
      CSeq: %d %s
      Max-Forwards: 70`, seq, method)
	}
	return `<?xml version="1.0" encoding="ISO-8859-1" ?>
<!DOCTYPE scenario SYSTEM "sipp.dtd">
<scenario name="parley soak caller">
  <nop>
    <action>
      <sample assign_to="draw" distribution="uniform" min="0" max="100"/>
      <test assign_to="race" variable="draw" compare="less_than" value="` + fmt.Sprint(pct) + `"/>
      <test assign_to="noack" variable="draw" compare="greater_than_equal" value="` + fmt.Sprint(100-pct) + `"/>
    </action>
  </nop>
  <nop next="race" test="race"/>
  ` + body + `
  <nop next="done"/>
  <label id="race"/>
  <send>
    <![CDATA[

      INVITE sip:[service]@[remote_ip]:[remote_port] SIP/2.0
      ` + hdr("INVITE", 1) + `
      Contact: <sip:sipp@[local_ip]:[local_port]>
      Content-Type: application/sdp
      Content-Length: [len]

      v=0
      o=sipp 53655765 2353687637 IN IP[local_ip_type] [local_ip]
      s=-
      c=IN IP[media_ip_type] [media_ip]
      t=0 0
      ` + media + `
      a=ptime:20

    ]]>
  </send>
  <recv response="100"/>
  <send>
    <![CDATA[

      CANCEL sip:[service]@[remote_ip]:[remote_port] SIP/2.0
      ` + hdr("CANCEL", 1) + `
      Content-Length: 0

    ]]>
  </send>
  <!-- sipp matches responses by code only, so which request a 200 answers is read from its
       CSeq. A 200 to the INVITE means the CANCEL lost the race (RFC 3261 §9.2: it has no
       effect once the INVITE is answered): the caller takes the call and hangs up at once,
       which is a normal end of a call. The CANCEL's own answer (200, or 481 when it came
       too late) can come first: then the INVITE's answer is awaited once more. -->
  <recv response="180" optional="true"/>
  <recv response="481" optional="true" next="cancelanswered"/>
  <recv response="200" optional="true" rrs="true" next="cancelanswered">
    <action>
      <ereg regexp="CSeq: *[0-9]+ INVITE" search_in="msg" assign_to="isinvite"/>
      <ereg regexp=";tag=[^;]*" search_in="hdr" header="To:" assign_to="totag"/>
    </action>
  </recv>
  <recv response="487"/>
  <send>
    <![CDATA[

      ACK sip:[service]@[remote_ip]:[remote_port] SIP/2.0
      ` + hdr("ACK", 1) + `
      Content-Length: 0

    ]]>
  </send>
  <nop next="done"/>
  <label id="cancelanswered"/>
  <nop next="invitefirst" test="isinvite"/>
  <recv response="180" optional="true"/>
  <recv response="200" optional="true" rrs="true" next="answered">
    <action>
      <ereg regexp=";tag=[^;]*" search_in="hdr" header="To:" assign_to="totag"/>
    </action>
  </recv>
  <recv response="487"/>
  <send>
    <![CDATA[

      ACK sip:[service]@[remote_ip]:[remote_port] SIP/2.0
      ` + hdr("ACK", 1) + `
      Content-Length: 0

    ]]>
  </send>
  <nop next="done"/>
  <!-- The INVITE's 200 came first: the CANCEL's answer is awaited (briefly, less than the
       200's first retransmission) so that it does not arrive in the middle of the ACK and BYE. -->
  <label id="invitefirst"/>
  <recv response="481" optional="true" next="answered"/>
  <recv response="200" timeout="300" ontimeout="answered"/>
  <label id="answered"/>
  <send>
    <![CDATA[

      ACK [next_url] SIP/2.0
      ` + dialogHdr("ACK", 1) + `
      Content-Length: 0

    ]]>
  </send>
  <send retrans="500">
    <![CDATA[

      BYE [next_url] SIP/2.0
      ` + dialogHdr("BYE", 2) + `
      Content-Length: 0

    ]]>
  </send>
  <!-- The CANCEL's own answer may still be on its way when the INVITE's 200 won. -->
  <recv response="481" optional="true"/>
  <recv response="200">
    <action>
      <ereg regexp="CSeq: *[0-9]+ BYE" search_in="msg" assign_to="isbye"/>
    </action>
  </recv>
  <nop next="done" test="isbye"/>
  <recv response="200"/>
  <label id="done"/>
</scenario>
`
}
