package sip_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/parley-voice/parley/session"
	"github.com/parley-voice/parley/sip"
)

// rawResponse is a SIP response read off a raw connection.
type rawResponse struct {
	status  int
	headers map[string]string
	body    string
}

// readResponse reads one SIP response from a stream.
func readResponse(r *bufio.Reader) (rawResponse, error) {
	var res rawResponse
	line, err := r.ReadString('\n')
	if err != nil {
		return res, err
	}
	f := strings.SplitN(strings.TrimSpace(line), " ", 3)
	if len(f) < 2 || f[0] != "SIP/2.0" {
		return res, fmt.Errorf("bad status line %q", line)
	}
	res.status, _ = strconv.Atoi(f[1])
	res.headers = map[string]string{}
	for {
		h, err := r.ReadString('\n')
		if err != nil {
			return res, err
		}
		h = strings.TrimRight(h, "\r\n")
		if h == "" {
			break
		}
		k, v, _ := strings.Cut(h, ":")
		k = strings.ToLower(strings.TrimSpace(k))
		if _, dup := res.headers[k]; !dup {
			res.headers[k] = strings.TrimSpace(v)
		}
	}
	if n, _ := strconv.Atoi(res.headers["content-length"]); n > 0 {
		b := make([]byte, n)
		if _, err := io.ReadFull(r, b); err != nil {
			return res, err
		}
		res.body = string(b)
	}
	return res, nil
}

// exchangeTCP sends msg over a new TCP connection and returns the first final response.
func exchangeTCP(t testing.TB, addr string, msg string) (rawResponse, error) {
	t.Helper()
	c, err := net.Dial("tcp4", addr)
	if err != nil {
		return rawResponse{}, err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(3 * time.Second))
	msg = strings.ReplaceAll(msg, "{{local}}", c.LocalAddr().String())
	msg = strings.ReplaceAll(msg, "{{server}}", addr)
	if _, err := io.WriteString(c, msg); err != nil {
		return rawResponse{}, err
	}
	r := bufio.NewReader(c)
	for {
		res, err := readResponse(r)
		if err != nil || res.status >= 200 {
			return res, err
		}
	}
}

// tcpMessage builds a request with CRLF line ends and a correct Content-Length (unless the
// headers already carry one).
func tcpMessage(lines []string, body string) string {
	hasCL := false
	for _, l := range lines {
		ll := strings.ToLower(l)
		if strings.HasPrefix(ll, "content-length:") || strings.HasPrefix(ll, "l:") {
			hasCL = true
		}
	}
	if !hasCL {
		lines = append(lines, fmt.Sprintf("Content-Length: %d", len(body)))
	}
	return strings.Join(lines, "\r\n") + "\r\n\r\n" + body
}

const tortureSDP = "v=0\r\no=mhandley 29739 7272939 IN IP4 192.0.2.95\r\ns=-\r\nc=IN IP4 192.0.2.95\r\nt=0 0\r\nm=audio 49217 RTP/AVP 0 12\r\nm=video 3227 RTP/AVP 31\r\na=rtpmap:31 LPC\r\n"

// TestTorture sends a subset of the RFC 4475 torture messages (adapted: our address in Via,
// TCP) and checks each gets its answer, and that the server keeps serving after all of them.
func TestTorture(t *testing.T) {
	t.Parallel()
	eng := newEngine(t, engineOptions{})
	rt := newRouter()
	rt.add("+14155550100", sip.Plan{Conversation: eng.factory()})
	srv := newServer(t, sip.Options{Router: rt})
	addr := srv.Addr(sip.TCP).String()
	via := "Via: SIP/2.0/TCP {{local}};branch=z9hG4bK%s"
	cases := []struct {
		name   string // RFC 4475 section name
		msg    string
		status int
		check  func(rawResponse) string
	}{
		{"insuf (RFC 4475 §3.2.1): missing Call-ID, From, To, Max-Forwards", tcpMessage([]string{
			"INVITE sip:user@example.com SIP/2.0", "CSeq: 193942 INVITE", fmt.Sprintf(via, "insuf"),
			"Content-Type: application/sdp"}, tortureSDP), 400, nil},
		{"mismatch01 (§3.1.2.17): CSeq method mismatch", tcpMessage([]string{
			"OPTIONS sip:user@example.com SIP/2.0", "To: sip:j.user@example.com", "From: sip:caller@example.net;tag=34525",
			"Max-Forwards: 6", "Call-ID: mismatch01.dj0234sxdfl3", "CSeq: 8 INVITE", fmt.Sprintf(via, "mismatch01")}, ""), 400, nil},
		{"zeromf (§3.2.11): Max-Forwards 0 on OPTIONS, which a UAS may answer", tcpMessage([]string{
			"OPTIONS sip:user@example.com SIP/2.0", "To: sip:user@example.com", "From: sip:caller@example.net;tag=3ghsd41",
			"Call-ID: zeromf.jfasdlfnm2o2l43r5u0asdfas", "CSeq: 39234321 OPTIONS", fmt.Sprintf(via, "zeromf"), "Max-Forwards: 0"}, ""), 200, nil},
		{"zeromf on INVITE: too many hops", tcpMessage([]string{
			"INVITE sip:+14155550100@{{server}} SIP/2.0", "To: sip:+14155550100@example.com", "From: sip:caller@example.net;tag=3ghsd42",
			"Call-ID: zeromf.invite", "CSeq: 1 INVITE", fmt.Sprintf(via, "zeromfinv"), "Max-Forwards: 0",
			"Contact: <sip:caller@{{local}};transport=tcp>"}, ""), 483, nil},
		{"bext01 (§3.2.5): unknown Require", tcpMessage([]string{
			"OPTIONS sip:user@example.com SIP/2.0", "To: sip:j_user@example.com", "From: sip:caller@example.net;tag=242etr",
			"Max-Forwards: 6", "Call-ID: bext01.0ha0isndaksdj", "Require: nothingSupportsThis, nothingSupportsThisEither",
			"Proxy-Require: noProxiesSupportThis, norDoAnyProxiesSupportThis", "CSeq: 8 OPTIONS", fmt.Sprintf(via, "bext01")}, ""), 420,
			func(r rawResponse) string {
				if !strings.Contains(r.headers["unsupported"], "nothingsupportsthis") {
					return "Unsupported " + r.headers["unsupported"]
				}
				return ""
			}},
		{"invut (§3.2.6): unknown Content-Type", tcpMessage([]string{
			"INVITE sip:+14155550100@{{server}} SIP/2.0", "Contact: <sip:caller@{{local}};transport=tcp>",
			"To: sip:j.user@example.com", "From: sip:caller@example.net;tag=8392034", "Max-Forwards: 70",
			"Call-ID: invut.0ha0isndaksdjadsfij34n23d", "CSeq: 235448 INVITE", fmt.Sprintf(via, "invut"),
			"Content-Type: application/unknownformat"}, "<audio> <pcmu port=\"443\"/> </audio>"), 415,
			func(r rawResponse) string {
				if !strings.Contains(r.headers["accept"], "application/sdp") {
					return "Accept " + r.headers["accept"]
				}
				return ""
			}},
		{"unkscm (§3.2.2): unknown Request-URI scheme", tcpMessage([]string{
			"OPTIONS nobodyKnowsThisScheme:totallyopaquecontent SIP/2.0", "To: sip:user@example.com",
			"From: sip:caller@example.net;tag=384", "Max-Forwards: 3", "Call-ID: unkscm.nasdfasser0q239nwsdfasdkl34",
			"CSeq: 3923423 OPTIONS", fmt.Sprintf(via, "unkscm")}, ""), 416, nil},
		{"intmeth (§3.1.1.2): unknown method of odd characters", tcpMessage([]string{
			"!interesting-Method0123456789_*+`.%indeed'~ sip:1_unusual.URI~(to-be!sure)&isn't+it$/crazy?,/;;*:&it+has=1,weird!*pas$wo~d_too.(doesn't-it)@example.com SIP/2.0",
			fmt.Sprintf(via, "intmeth"), "To: \"BEL:\\\x07 NUL:\\\x00 DEL:\\\x7F\" <sip:1_unusual.URI~(to-be!sure)&isn't+it$/crazy?,/;;*@example.com>",
			"From: token1~` token2'+_ token3*%!.- <sip:mundane@example.com>;fromParam''~+*_!.-%=\"\xD1\x80\xD0\xB0\xD0\xB1\xD0\xBE\xD1\x82\xD0\xB0\xD1\x8E\xD1\x89\xD0\xB8\xD0\xB9\";tag=_token~1'+`*%!-.",
			"Call-ID: intmeth.word%ZK-!.*_+'@word`~)(><:\\/\"][?}{", "CSeq: 139122385 !interesting-Method0123456789_*+`.%indeed'~",
			"Max-Forwards: 255", "extensionHeader-!.%*+_`'~: \xEF\xBB\xBF\xE5\xA4\xA7\xE5\x81\x9C\xE9\x9B\xBB"}, ""), 501, nil},
		{"mismatch02 (§3.1.2.18): unknown method with CSeq mismatch", tcpMessage([]string{
			"NEWMETHOD sip:user@example.com SIP/2.0", "To: sip:j.user@example.com", "From: sip:caller@example.net;tag=34525",
			"Max-Forwards: 6", "Call-ID: mismatch02.dj0234sxdfl3", "CSeq: 8 INVITE", "Contact: <sip:caller@host.example.net>",
			fmt.Sprintf(via, "mismatch02"), "Content-Type: application/sdp"}, tortureSDP), 400, nil},
		{"multi01 (§3.2.8): several values in single-value headers", tcpMessage([]string{
			"INVITE sip:user@company.com SIP/2.0", "Contact: <sip:caller@host25.example.net>", fmt.Sprintf(via, "multi01"),
			"Max-Forwards: 70", "CSeq: 5 INVITE", "Call-ID: multi01.98asdh@192.0.2.1", "CSeq: 59 INVITE",
			"Call-ID: multi01.98asdh@192.0.2.2", "From: sip:caller@example.com;tag=3413415", "To: sip:user@example.com",
			"To: sip:other@example.net", "From: sip:caller@example.net;tag=2923420123", "Content-Type: application/sdp"}, tortureSDP), 400, nil},
		{"malformed SDP", tcpMessage([]string{
			"INVITE sip:+14155550100@{{server}} SIP/2.0", fmt.Sprintf(via, "badsdp"), "Max-Forwards: 70",
			"To: <sip:+14155550100@example.com>", "From: <sip:+15550001111@example.net>;tag=bad1", "Call-ID: badsdp.1",
			"CSeq: 1 INVITE", "Contact: <sip:caller@{{local}};transport=tcp>", "Content-Type: application/sdp"},
			"v=0\r\no=x 1 1 IN IP4 127.0.0.1\r\ns=-\r\nc=IN IP4 not-an-address\r\nm=audio 9 RTP/AVP 0\r\n"), 400, nil},
		{"SRTP only: no common codec", tcpMessage([]string{
			"INVITE sip:+14155550100@{{server}} SIP/2.0", fmt.Sprintf(via, "srtp"), "Max-Forwards: 70",
			"To: <sip:+14155550100@example.com>", "From: <sip:+15550001111@example.net>;tag=srtp1", "Call-ID: srtp.1",
			"CSeq: 1 INVITE", "Contact: <sip:caller@{{local}};transport=tcp>", "Content-Type: application/sdp"},
			"v=0\r\no=x 1 1 IN IP4 127.0.0.1\r\ns=-\r\nc=IN IP4 127.0.0.1\r\nt=0 0\r\nm=audio 4000 RTP/SAVP 0\r\na=crypto:1 AES_CM_128_HMAC_SHA1_80 inline:WVNfX19zZW1jdGwgKCkgewkyMjA7fQp9CnVubGVz\r\n"), 488, nil},
		{"badvers (§3.1.2.16): unknown protocol version", tcpMessage([]string{
			"OPTIONS sip:t.watson@example.org SIP/7.0", fmt.Sprintf(via, "badvers"), "Max-Forwards: 70",
			"From: A. Bell <sip:a.g.bell@example.com>;tag=qweoiqpe", "To: T. Watson <sip:t.watson@example.org>",
			"Call-ID: badvers.31417@example.com", "CSeq: 1 OPTIONS"}, ""), 505, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			res, err := exchangeTCP(t, addr, tc.msg)
			if err != nil {
				t.Fatalf("no answer: %v", err)
			}
			if res.status != tc.status {
				t.Fatalf("status %d, want %d (%v)", res.status, tc.status, res.headers)
			}
			if tc.status >= 400 && tc.status != 415 && tc.status != 420 && !strings.Contains(res.headers["reason"], "SIP;cause=") && tc.status != 501 {
				t.Errorf("no Reason header: %v", res.headers)
			}
			if tc.check != nil {
				if msg := tc.check(res); msg != "" {
					t.Error(msg)
				}
			}
		})
	}
	// Garbage and truncated messages get no answer, but do not stop the server.
	for _, junk := range []string{"\x00\x01\x02garbage\r\n\r\n", "INVITE\r\n\r\n", "SIP/2.0 200\r\n\r\n",
		"INVITE sip:x@y SIP/2.0\r\nContent-Length: -5\r\n\r\n"} {
		c, err := net.Dial("tcp4", addr)
		if err == nil {
			io.WriteString(c, junk)
			c.Close()
		}
		u, err := net.Dial("udp4", srv.Addr(sip.UDP).String())
		if err == nil {
			io.WriteString(u, junk)
			u.Close()
		}
	}
	assertServing(t, srv)
}

// assertServing places a normal call to show the server still serves.
func assertServing(t *testing.T, srv *sip.Server) {
	t.Helper()
	res, err := exchangeTCP(t, srv.Addr(sip.TCP).String(), tcpMessage([]string{
		"OPTIONS sip:{{server}} SIP/2.0", "Via: SIP/2.0/TCP {{local}};branch=z9hG4bKalive" + strconv.Itoa(rand.IntN(1e6)),
		"Max-Forwards: 70", "To: <sip:{{server}}>", "From: <sip:probe@example.net>;tag=alive", "Call-ID: alive." + strconv.Itoa(rand.IntN(1e9)),
		"CSeq: 1 OPTIONS"}, ""))
	if err != nil || res.status != 200 {
		t.Fatalf("the server stopped serving: %d %v", res.status, err)
	}
}

// TestFuzzedSDPInvites sends INVITEs with randomly damaged SDP offers: each is answered (400
// malformed, 488 unusable, or 480 once it passes negotiation: the agent here refuses to be
// built), nothing crashes, and the server keeps serving.
func TestFuzzedSDPInvites(t *testing.T) {
	t.Parallel()
	rt := newRouter()
	rt.add("+14155550100", sip.Plan{Conversation: func(ctx context.Context, c *sip.Call) (*session.Conversation, error) {
		return nil, errors.New("no agent in this test")
	}})
	srv := newServer(t, sip.Options{Router: rt})
	addr := srv.Addr(sip.TCP).String()
	base := "v=0\r\no=- 1 1 IN IP4 127.0.0.1\r\ns=-\r\nc=IN IP4 127.0.0.1\r\nt=0 0\r\n" +
		"m=audio 40000 RTP/AVP 0 8 101\r\na=rtpmap:0 PCMU/8000\r\na=rtpmap:8 PCMA/8000\r\na=rtpmap:101 telephone-event/8000\r\na=fmtp:101 0-16\r\na=ptime:20\r\na=sendrecv\r\n"
	rng := rand.New(rand.NewPCG(1, 2))
	seen := map[int]int{}
	for i := 0; i < 150; i++ {
		body := []byte(base)
		for k := 0; k < 1+rng.IntN(6); k++ {
			p := rng.IntN(len(body))
			switch rng.IntN(4) {
			case 0:
				body[p] = byte(rng.IntN(256))
			case 1:
				body = append(body[:p], body[min(len(body), p+1+rng.IntN(8)):]...)
			case 2:
				body = append(body[:p], append([]byte(strings.Repeat("9", rng.IntN(12))), body[p:]...)...)
			case 3:
				body = append(body[:p], append([]byte("\r\nm=audio 0 RTP/AVP 0\r\n"), body[p:]...)...)
			}
			if len(body) == 0 {
				body = []byte("x")
			}
		}
		msg := tcpMessage([]string{
			"INVITE sip:+14155550100@{{server}} SIP/2.0", "Via: SIP/2.0/TCP {{local}};branch=z9hG4bKfuzz" + strconv.Itoa(i),
			"Max-Forwards: 70", "To: <sip:+14155550100@example.com>", "From: <sip:+15550001111@example.net>;tag=f" + strconv.Itoa(i),
			"Call-ID: fuzz." + strconv.Itoa(i), "CSeq: 1 INVITE", "Contact: <sip:caller@{{local}};transport=tcp>",
			"Content-Type: application/sdp"}, string(body))
		res, err := exchangeTCP(t, addr, msg)
		if err != nil {
			t.Fatalf("INVITE %d got no answer: %v\n%q", i, err, body)
		}
		switch res.status {
		case 400, 480, 488:
			seen[res.status]++
		default:
			t.Fatalf("INVITE %d answered %d\n%q", i, res.status, body)
		}
	}
	t.Logf("answers: %v", seen)
	if seen[400] == 0 || seen[480] == 0 {
		t.Errorf("the fuzz did not reach both the parser's refusals and negotiation: %v", seen)
	}
	waitFor(t, 5*time.Second, "no calls left", func() bool { return len(srv.ActiveCalls()) == 0 })
	assertServing(t, srv)
}
