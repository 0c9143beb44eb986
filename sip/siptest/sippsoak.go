package siptest

import (
	"fmt"
	"strings"
)

// SippSoakCaller returns the sipp UAC scenario of the soak (issue 22, load proof): the load
// test's call (SippCaller) for most calls, and, drawn at random per call, pct percent of calls
// that never ACK the 200 (ACK loss: the caller goes away, Parley retransmits the 200 and must
// give up by itself) and pct percent that CANCEL right after their INVITE (the CANCEL race:
// 200 to the CANCEL, 487 to the INVITE, ACK). sipp absorbs what comes for a finished call
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
  <recv response="180" optional="true"/>
  <recv response="200" optional="true"/>
  <recv response="487"/>
  <send>
    <![CDATA[

      ACK sip:[service]@[remote_ip]:[remote_port] SIP/2.0
      ` + hdr("ACK", 1) + `
      Content-Length: 0

    ]]>
  </send>
  <label id="done"/>
</scenario>
`
}
