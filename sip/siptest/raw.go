package siptest

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/emiago/sipgo/sip"
)

// RawUA is a hand-driven SIP user agent for one call, over UDP or TCP on 127.0.0.1: it sends
// the INVITE, ACK, CANCEL and BYE of the call only when told to, in whatever order the test
// wants, and keeps every answer. It is for the peers Parley must survive: a 200 never
// acknowledged, a BYE before the ACK, a CANCEL racing its INVITE, a connection that drops.
// Phone is the well-behaved user agent.
//
// Like a real transaction layer it acknowledges a non-2xx final answer to its INVITE (RFC 3261
// §17.1.1.3) and answers a BYE or other request from the server 200; it never retransmits.
type RawUA struct {
	t      testing.TB
	tp     string // "udp" or "tcp"
	server netip.AddrPort
	udp    net.PacketConn
	tcp    net.Conn
	laddr  netip.AddrPort

	callID, fromTag, branch string
	to                      string
	invite                  *sip.Request

	mu       sync.Mutex
	toTag    string
	statuses []int          // statuses of the answers to the INVITE, in order
	reason   string         // the Reason header of the last final answer to the INVITE
	others   map[string]int // final status of the CANCEL and BYE, by method
	requests []string       // methods of the requests the server sent
	changed  chan struct{}  // closed and replaced on every message
	closed   bool
	wg       sync.WaitGroup
}

// NewRawUA opens a raw user agent toward server over "udp" or "tcp" and closes it at the end
// of the test.
func NewRawUA(t testing.TB, server netip.AddrPort, transport string) *RawUA {
	t.Helper()
	u := &RawUA{t: t, tp: transport, server: server, others: map[string]int{}, changed: make(chan struct{}),
		callID: randHex(12), fromTag: randHex(6), branch: "z9hG4bK" + randHex(8)}
	switch transport {
	case "udp":
		c, err := net.ListenPacket("udp4", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		u.udp = c
		u.laddr = c.LocalAddr().(*net.UDPAddr).AddrPort()
	case "tcp":
		c, err := net.Dial("tcp4", server.String())
		if err != nil {
			t.Fatal(err)
		}
		u.tcp = c
		u.laddr = c.LocalAddr().(*net.TCPAddr).AddrPort()
	default:
		t.Fatalf("siptest: RawUA transport %q", transport)
	}
	u.wg.Add(1)
	go u.read()
	t.Cleanup(u.Close)
	return u
}

// CallID returns the call's SIP Call-ID.
func (u *RawUA) CallID() string { return u.callID }

// Close closes the socket (for TCP, the connection drops: a transport error for the server).
func (u *RawUA) Close() {
	u.mu.Lock()
	already := u.closed
	u.closed = true
	u.mu.Unlock()
	if already {
		return
	}
	if u.udp != nil {
		u.udp.Close()
	}
	if u.tcp != nil {
		u.tcp.Close()
	}
	u.wg.Wait()
}

func (u *RawUA) via(branch string) string {
	v := "SIP/2.0/" + strings.ToUpper(u.tp) + " " + u.laddr.String() + ";branch=" + branch
	if u.tp == "udp" {
		v += ";rport"
	}
	return v
}

// Invite sends the INVITE to number with an SDP offer of PCMU and telephone-event whose media
// address is rtp.
func (u *RawUA) Invite(number string, rtp netip.AddrPort) {
	u.to = "<sip:" + number + "@" + u.server.String() + ">"
	sdp := strings.Join([]string{"v=0", "o=raw 1 1 IN IP4 " + rtp.Addr().String(), "s=raw",
		"c=IN IP4 " + rtp.Addr().String(), "t=0 0", "m=audio " + strconv.Itoa(int(rtp.Port())) + " RTP/AVP 0 101",
		"a=rtpmap:0 PCMU/8000", "a=rtpmap:101 telephone-event/8000", "a=fmtp:101 0-15", "a=sendrecv", ""}, "\r\n")
	u.send(u.request("INVITE", "sip:"+number+"@"+u.server.String(), u.branch, 1, false,
		[]string{"Contact: <sip:raw@" + u.laddr.String() + ";transport=" + u.tp + ">", "Content-Type: application/sdp"}, sdp))
}

// Ack sends the ACK of a 2xx (a new transaction, with the dialog's To tag).
func (u *RawUA) Ack() { u.send(u.request("ACK", u.target(), "z9hG4bK"+randHex(8), 1, true, nil, "")) }

// Cancel sends a CANCEL of the INVITE (its branch, no To tag: RFC 3261 §9.1).
func (u *RawUA) Cancel() {
	u.send(u.request("CANCEL", "sip:"+strings.Trim(strings.TrimPrefix(u.to, "<sip:"), ">"), u.branch, 1, false, nil, ""))
}

// Bye sends a BYE in the dialog (with whatever To tag the answers gave so far).
func (u *RawUA) Bye() { u.send(u.request("BYE", u.target(), "z9hG4bK"+randHex(8), 2, true, nil, "")) }

// CancelWith is Cancel with extra header lines (such as an RFC 3326 Reason).
func (u *RawUA) CancelWith(headers ...string) {
	u.send(u.request("CANCEL", "sip:"+strings.Trim(strings.TrimPrefix(u.to, "<sip:"), ">"), u.branch, 1, false, headers, ""))
}

// ByeWith is Bye with extra header lines (such as an RFC 3326 Reason).
func (u *RawUA) ByeWith(headers ...string) {
	u.send(u.request("BYE", u.target(), "z9hG4bK"+randHex(8), 2, true, headers, ""))
}

func (u *RawUA) target() string { return "sip:" + strings.Trim(strings.TrimPrefix(u.to, "<sip:"), ">") }

func (u *RawUA) request(method, ruri, branch string, seq int, withTag bool, extra []string, body string) []byte {
	to := u.to
	if withTag {
		u.mu.Lock()
		if u.toTag != "" {
			to += ";tag=" + u.toTag
		}
		u.mu.Unlock()
	}
	lines := []string{method + " " + ruri + " SIP/2.0", "Via: " + u.via(branch), "Max-Forwards: 70",
		"From: <sip:+15550009999@127.0.0.1>;tag=" + u.fromTag, "To: " + to, "Call-ID: " + u.callID,
		"CSeq: " + strconv.Itoa(seq) + " " + method}
	lines = append(lines, extra...)
	lines = append(lines, "Content-Length: "+strconv.Itoa(len(body)), "", body)
	return []byte(strings.Join(lines, "\r\n"))
}

func (u *RawUA) send(b []byte) {
	var err error
	if u.udp != nil {
		_, err = u.udp.WriteTo(b, net.UDPAddrFromAddrPort(u.server))
	} else {
		_, err = u.tcp.Write(b)
	}
	if err != nil {
		u.t.Logf("siptest: raw send: %v", err)
	}
}

func (u *RawUA) read() {
	defer u.wg.Done()
	if u.udp != nil {
		buf := make([]byte, 65535)
		for {
			n, _, err := u.udp.ReadFrom(buf)
			if err != nil {
				return
			}
			u.take(bytes.Clone(buf[:n]))
		}
	}
	br := bufio.NewReader(u.tcp)
	for {
		var head bytes.Buffer
		clen := 0
		for {
			line, err := br.ReadString('\n')
			if err != nil {
				return
			}
			head.WriteString(line)
			if k, v, ok := strings.Cut(line, ":"); ok && strings.EqualFold(strings.TrimSpace(k), "Content-Length") {
				clen, _ = strconv.Atoi(strings.TrimSpace(v))
			}
			if line == "\r\n" && head.Len() > 2 {
				break
			}
		}
		body := make([]byte, clen)
		if _, err := io.ReadFull(br, body); err != nil {
			return
		}
		head.Write(body)
		u.take(head.Bytes())
	}
}

func (u *RawUA) take(b []byte) {
	m, err := sip.ParseMessage(b)
	if err != nil {
		return
	}
	switch m := m.(type) {
	case *sip.Response:
		cs := m.CSeq()
		if cs == nil {
			return
		}
		u.mu.Lock()
		switch cs.MethodName {
		case sip.INVITE:
			u.statuses = append(u.statuses, m.StatusCode)
			if h := m.GetHeader("Reason"); h != nil && m.StatusCode >= 200 {
				u.reason = h.Value()
			}
			if tag, ok := m.To().Params.Get("tag"); ok && tag != "" && (u.toTag == "" || m.StatusCode >= 200 && m.StatusCode < 300) {
				u.toTag = tag
			}
		default:
			if m.StatusCode >= 200 {
				u.others[string(cs.MethodName)] = m.StatusCode
			}
		}
		u.notifyLocked()
		u.mu.Unlock()
		if cs.MethodName == sip.INVITE && m.StatusCode >= 300 {
			tag, _ := m.To().Params.Get("tag")
			ack := u.request("ACK", u.target(), u.branch, 1, false, nil, "")
			if tag != "" {
				ack = bytes.Replace(ack, []byte("To: "+u.to), []byte("To: "+u.to+";tag="+tag), 1)
			}
			u.send(ack)
		}
	case *sip.Request:
		u.mu.Lock()
		u.requests = append(u.requests, string(m.Method))
		u.notifyLocked()
		u.mu.Unlock()
		if m.Method != sip.ACK {
			res := sip.NewResponseFromRequest(m, 200, "OK", nil)
			u.send([]byte(res.String()))
		}
	}
}

func (u *RawUA) notifyLocked() {
	close(u.changed)
	u.changed = make(chan struct{})
}

// WaitStatus waits up to d for an answer to the INVITE with status in [lo, hi] and reports
// whether one came. A final answer outside the range ends the wait early (false).
func (u *RawUA) WaitStatus(lo, hi int, d time.Duration) bool {
	deadline := time.NewTimer(d)
	defer deadline.Stop()
	for {
		u.mu.Lock()
		ch := u.changed
		for _, s := range u.statuses {
			if s >= lo && s <= hi {
				u.mu.Unlock()
				return true
			}
			if s >= 200 && lo < 200 {
				u.mu.Unlock()
				return false // a final answer: no provisional one will follow
			}
			if s >= 300 {
				u.mu.Unlock()
				return false
			}
		}
		u.mu.Unlock()
		select {
		case <-ch:
		case <-deadline.C:
			return false
		}
	}
}

// Statuses returns the statuses of the answers to the INVITE so far.
func (u *RawUA) Statuses() []int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]int(nil), u.statuses...)
}

// Final returns the final status the server gave method ("CANCEL", "BYE"), 0 when none yet.
func (u *RawUA) Final(method string) int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.others[method]
}

// FinalReason returns the Reason header (RFC 3326) of the last final answer to the INVITE.
func (u *RawUA) FinalReason() string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.reason
}

// Received returns the methods of the requests the server sent (BYE …).
func (u *RawUA) Received() []string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]string(nil), u.requests...)
}

// String describes the call for a failure message.
func (u *RawUA) String() string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return fmt.Sprintf("call %s over %s: INVITE answers %v, others %v, server requests %v", u.callID, u.tp, u.statuses, u.others, u.requests)
}
