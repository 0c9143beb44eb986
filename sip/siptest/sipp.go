package siptest

import (
	"fmt"
	"time"
)

// SippCall describes the sipp UAC scenario SippCaller writes.
type SippCall struct {
	// MediaPort is the m= port of the offer; "[media_port]" lets sipp use its own media port.
	MediaPort string
	// Pcap, when set, is played as the caller's voice once the call is up (play_pcap_audio).
	Pcap string
	// Hold is how long the call stays up before sipp sends BYE.
	Hold time.Duration
	// NoDTMF leaves telephone-event out of the offer (PCMU only).
	NoDTMF bool
}

// SippCaller returns a sipp UAC scenario: an INVITE offering PCMU (and telephone-event), the
// ACK of the 200, the optional pcap, a pause, then BYE. sipp's [service] is the number dialled.
func SippCaller(c SippCall) string {
	if c.MediaPort == "" {
		c.MediaPort = "[media_port]"
	}
	media := "m=audio " + c.MediaPort + " RTP/AVP 0 101\n      a=rtpmap:0 PCMU/8000\n      a=rtpmap:101 telephone-event/8000\n      a=fmtp:101 0-15"
	if c.NoDTMF {
		media = "m=audio " + c.MediaPort + " RTP/AVP 0\n      a=rtpmap:0 PCMU/8000"
	}
	play := ""
	if c.Pcap != "" {
		play = `
  <nop>
    <action>
      <exec play_pcap_audio="` + c.Pcap + `"/>
    </action>
  </nop>`
	}
	return `<?xml version="1.0" encoding="ISO-8859-1" ?>
<!DOCTYPE scenario SYSTEM "sipp.dtd">
<scenario name="parley caller">
  <send retrans="500">
    <![CDATA[

      INVITE sip:[service]@[remote_ip]:[remote_port] SIP/2.0
      Via: SIP/2.0/[transport] [local_ip]:[local_port];branch=[branch];rport
      From: "sipp" <sip:+15550001111@[local_ip]:[local_port]>;tag=[call_number]
      To: <sip:[service]@[remote_ip]:[remote_port]>
      Call-ID: [call_id]
      CSeq: 1 INVITE
      Contact: <sip:sipp@[local_ip]:[local_port]>
      Max-Forwards: 70
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
  <recv response="100" optional="true"/>
  <recv response="180" optional="true"/>
  <recv response="200" rtd="true" rrs="true"/>
  <send>
    <![CDATA[

      ACK [next_url] SIP/2.0
      Via: SIP/2.0/[transport] [local_ip]:[local_port];branch=[branch];rport
      From: "sipp" <sip:+15550001111@[local_ip]:[local_port]>;tag=[call_number]
      To: <sip:[service]@[remote_ip]:[remote_port]>[peer_tag_param]
      Call-ID: [call_id]
      CSeq: 1 ACK
      Max-Forwards: 70
      Content-Length: 0

    ]]>
  </send>` + play + `
  <pause milliseconds="` + fmt.Sprint(c.Hold.Milliseconds()) + `"/>
  <send retrans="500">
    <![CDATA[

      BYE [next_url] SIP/2.0
      Via: SIP/2.0/[transport] [local_ip]:[local_port];branch=[branch];rport
      From: "sipp" <sip:+15550001111@[local_ip]:[local_port]>;tag=[call_number]
      To: <sip:[service]@[remote_ip]:[remote_port]>[peer_tag_param]
      Call-ID: [call_id]
      CSeq: 2 BYE
      Max-Forwards: 70
      Content-Length: 0

    ]]>
  </send>
  <recv response="200" crlf="true"/>
</scenario>
`
}

// SippCallee returns a sipp UAS scenario: it answers an INVITE with 180 and a 200 offering
// PCMU and telephone-event, takes the ACK, runs steps (more scenario XML, such as taking a
// REFER), then takes the BYE and answers it.
func SippCallee(steps string) string {
	return `<?xml version="1.0" encoding="ISO-8859-1" ?>
<!DOCTYPE scenario SYSTEM "sipp.dtd">
<scenario name="parley callee">
  <recv request="INVITE" crlf="true"/>
  <send>
    <![CDATA[

      SIP/2.0 180 Ringing
      [last_Via:]
      [last_From:]
      [last_To:];tag=[pid]SIPpTag01[call_number]
      [last_Call-ID:]
      [last_CSeq:]
      Contact: <sip:sipp@[local_ip]:[local_port];transport=[transport]>
      Content-Length: 0

    ]]>
  </send>
  <send retrans="500">
    <![CDATA[

      SIP/2.0 200 OK
      [last_Via:]
      [last_From:]
      [last_To:];tag=[pid]SIPpTag01[call_number]
      [last_Call-ID:]
      [last_CSeq:]
      Contact: <sip:sipp@[local_ip]:[local_port];transport=[transport]>
      Content-Type: application/sdp
      Content-Length: [len]

      v=0
      o=sipp 53655765 2353687637 IN IP[local_ip_type] [local_ip]
      s=-
      c=IN IP[media_ip_type] [media_ip]
      t=0 0
      m=audio [media_port] RTP/AVP 0 101
      a=rtpmap:0 PCMU/8000
      a=rtpmap:101 telephone-event/8000
      a=fmtp:101 0-15

    ]]>
  </send>
  <recv request="ACK" rtd="true" crlf="true"/>` + steps + `
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
}
