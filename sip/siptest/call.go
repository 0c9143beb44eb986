package siptest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/emiago/sipgo/sip"
	pionsdp "github.com/pion/sdp/v3"

	"github.com/parley-voice/parley/codec"
	"github.com/parley-voice/parley/media"
)

// Direction is an SDP direction attribute.
type Direction string

// Directions.
const (
	SendRecv Direction = "sendrecv"
	SendOnly Direction = "sendonly"
	RecvOnly Direction = "recvonly"
	Inactive Direction = "inactive"
)

// maxHeard bounds the recorded audio (60 s at 16 kHz).
const maxHeard = 60 * 16000

// Call is one call of a Phone.
type Call struct {
	p        *Phone
	outgoing bool
	codecs   []codec.Info

	mu             sync.Mutex
	callID         string
	localTag       string
	remoteTag      string
	local, remote  sip.Uri
	target         sip.Uri
	dest           string
	seq            uint32
	inviteSeq      uint32
	remoteSeq      uint32
	invite         *sip.Request
	status         int
	final          *sip.Response
	confirmed      bool
	requests       []*sip.Request
	notifies       []string
	infos          []string
	remoteSDP      []byte
	sdpVersion     uint64
	sessionExpires time.Duration
	weRefresh      bool

	// Media.
	ports     *media.PortPair
	ep        *media.RTPEndpoint
	rtpAddr   netip.AddrPort
	audio     codec.Info
	dtmfPT    int
	dtmfNext  uint32 // the RFC 4733 timestamp the next digits may start at (SendDTMF)
	dtmfSent  bool
	remoteRTP netip.AddrPort
	source    func(dst []int16)
	heard     []int16
	dtmf      []rune
	rtpOn     atomic.Bool
	muteTx    atomic.Bool
	mediaWG   sync.WaitGroup
	mediaStop chan struct{}
	rxPackets atomic.Uint64
	txPackets atomic.Uint64
	ptRecv    atomic.Int32

	acks    chan *sip.Request
	notify  chan string
	done    chan struct{}
	endOnce sync.Once
	endWhy  string
}

func newCall(p *Phone, outgoing bool, codecs []codec.Info) *Call {
	return &Call{p: p, outgoing: outgoing, codecs: codecs, dtmfPT: -1, sdpVersion: 1,
		acks: make(chan *sip.Request, 4), notify: make(chan string, 16), done: make(chan struct{}),
		mediaStop: make(chan struct{})}
}

// CallID returns the SIP Call-ID.
func (c *Call) CallID() string { return c.callID }

// Status returns the final status of the INVITE (0 before).
func (c *Call) Status() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.status
}

// Response returns the final response to the phone's INVITE.
func (c *Call) Response() *sip.Response {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.final
}

// Header returns the first value of a header of the final response ("" when absent).
func (c *Call) Header(name string) string {
	res := c.Response()
	if res == nil {
		return ""
	}
	if hs := res.GetHeaders(name); len(hs) > 0 {
		return hs[0].Value()
	}
	return ""
}

// Invite returns the INVITE the phone received (nil for calls it placed).
func (c *Call) Invite() *sip.Request { return c.invite }

// RemoteSDP returns the last SDP the peer sent.
func (c *Call) RemoteSDP() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return string(c.remoteSDP)
}

// Codec returns the audio codec in use.
func (c *Call) Codec() codec.Info {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.audio
}

// Done is closed when the call ended; EndedBy says how.
func (c *Call) Done() <-chan struct{} { return c.done }

// EndedBy says why the call ended ("bye received", "bye sent", …).
func (c *Call) EndedBy() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.endWhy
}

// Requests returns the in-dialog requests the phone received, oldest first.
func (c *Call) Requests(method string) []*sip.Request {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []*sip.Request
	for _, r := range c.requests {
		if method == "" || string(r.Method) == method {
			out = append(out, r)
		}
	}
	return out
}

// Notifies returns the sipfrag bodies of the NOTIFYs received.
func (c *Call) Notifies() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.notifies...)
}

// SetSource sets the audio the phone sends: f fills one 20 ms frame at 16 kHz (nil: silence).
func (c *Call) SetSource(f func(dst []int16)) {
	c.mu.Lock()
	c.source = f
	c.mu.Unlock()
}

// Heard returns a copy of the audio received so far, at 16 kHz.
func (c *Call) Heard() []int16 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]int16(nil), c.heard...)
}

// ResetHeard forgets the audio received so far.
func (c *Call) ResetHeard() {
	c.mu.Lock()
	c.heard = c.heard[:0]
	c.mu.Unlock()
}

// DTMF returns the digits received (RFC 4733 and INFO).
func (c *Call) DTMF() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return string(c.dtmf)
}

// RTPReceived and RTPSent count packets; LastPayloadType is the payload type last received.
func (c *Call) RTPReceived() uint64 { return c.rxPackets.Load() }

// RTPSent counts the packets sent.
func (c *Call) RTPSent() uint64 { return c.txPackets.Load() }

// LastPayloadType returns the payload type of the last packet received.
func (c *Call) LastPayloadType() int { return int(c.ptRecv.Load()) }

// StopRTP stops sending RTP (the peer's inactivity timeout should then fire); the phone keeps
// receiving.
func (c *Call) StopRTP() { c.muteTx.Store(true) }

// ResumeRTP sends RTP again.
func (c *Call) ResumeRTP() { c.muteTx.Store(false) }

func (c *Call) markEnded(why string) {
	c.endOnce.Do(func() {
		c.mu.Lock()
		c.endWhy = why
		c.mu.Unlock()
		close(c.done)
	})
}

func (c *Call) confirm() {
	c.mu.Lock()
	c.confirmed = true
	c.mu.Unlock()
}

// request builds an in-dialog (or initial) request.
func (c *Call) request(m sip.RequestMethod) *sip.Request {
	c.mu.Lock()
	defer c.mu.Unlock()
	if m != sip.ACK && m != sip.CANCEL {
		c.seq++
	}
	return c.requestLocked(m, c.seq)
}

func (c *Call) requestLocked(m sip.RequestMethod, seq uint32) *sip.Request {
	req := sip.NewRequest(m, *c.target.Clone())
	req.AppendHeader(c.p.via())
	mf := sip.MaxForwardsHeader(70)
	req.AppendHeader(&mf)
	from := &sip.FromHeader{Address: *c.local.Clone(), Params: sip.NewParams()}
	from.Params.Add("tag", c.localTag)
	req.AppendHeader(from)
	to := &sip.ToHeader{Address: *c.remote.Clone(), Params: sip.NewParams()}
	if c.remoteTag != "" {
		to.Params.Add("tag", c.remoteTag)
	}
	req.AppendHeader(to)
	cid := sip.CallIDHeader(c.callID)
	req.AppendHeader(&cid)
	req.AppendHeader(&sip.CSeqHeader{SeqNo: seq, MethodName: m})
	req.AppendHeader(c.p.contact())
	req.SetTransport(c.p.tp)
	if c.dest != "" {
		req.SetDestination(c.dest)
	}
	if c.p.o.Transport == "udp" {
		a := c.p.addr
		req.Laddr = sip.Addr{IP: net.IP(a.Addr().AsSlice()), Port: int(a.Port())}
	}
	req.SetBody(nil)
	return req
}

// runInvite sends the INVITE and returns its final response; provisional ones carrying SDP
// start early media. With cancelAfter it sends CANCEL after the first provisional response.
func (c *Call) runInvite(ctx context.Context, req *sip.Request, cancelAfter time.Duration) (*sip.Response, error) {
	tx, err := c.p.cli.TransactionRequest(ctx, req, noBuild)
	if err != nil {
		return nil, err
	}
	defer tx.Terminate()
	var cancelT <-chan time.Time
	for {
		select {
		case res := <-tx.Responses():
			if res.IsProvisional() {
				if tag, _ := res.To().Params.Get("tag"); tag != "" {
					c.mu.Lock()
					c.remoteTag = tag
					c.mu.Unlock()
				}
				if cancelAfter > 0 && cancelT == nil && res.StatusCode >= 180 {
					cancelT = time.After(cancelAfter)
				}
				continue
			}
			return res, nil
		case <-cancelT:
			cancelT = nil
			cr := sip.NewRequest(sip.CANCEL, *req.Recipient.Clone())
			cr.AppendHeader(req.Via().Clone())
			mf := sip.MaxForwardsHeader(70)
			cr.AppendHeader(&mf)
			for _, n := range []string{"From", "To", "Call-ID"} {
				for _, h := range req.GetHeaders(n) {
					cr.AppendHeader(sip.HeaderClone(h))
				}
			}
			// The To of a CANCEL is the INVITE's, without the remote tag.
			cr.AppendHeader(&sip.CSeqHeader{SeqNo: req.CSeq().SeqNo, MethodName: sip.CANCEL})
			cr.SetTransport(req.Transport())
			cr.Laddr = req.Laddr
			cr.SetBody(nil)
			c.p.wg.Add(1)
			go func() {
				defer c.p.wg.Done()
				c.p.do(ctx, cr)
			}()
		case <-tx.Done():
			return nil, fmt.Errorf("siptest: INVITE transaction ended: %v", tx.Err())
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// established takes the 2xx of the phone's INVITE.
func (c *Call) established(res *sip.Response, late bool) error {
	c.mu.Lock()
	c.remoteTag, _ = res.To().Params.Get("tag")
	if ct := res.Contact(); ct != nil {
		c.target = ct.Address
	}
	seq := c.inviteSeq
	c.mu.Unlock()
	if se := res.GetHeaders("Session-Expires"); len(se) > 0 {
		v, params, _ := strings.Cut(se[0].Value(), ";")
		n, _ := strconv.Atoi(strings.TrimSpace(v))
		c.mu.Lock()
		c.sessionExpires = time.Duration(n) * time.Second
		c.weRefresh = strings.Contains(params, "refresher=uac")
		c.mu.Unlock()
	}
	var ackBody []byte
	if late {
		ans, err := c.answer(res.Body())
		if err != nil {
			c.sendAck(seq, nil)
			return err
		}
		ackBody = ans
	} else if _, err := c.takeAnswer(res.Body()); err != nil {
		c.sendAck(seq, nil)
		return err
	}
	c.sendAck(seq, ackBody)
	c.confirm()
	c.startRTP()
	c.maybeRefresh()
	return nil
}

func (c *Call) sendAck(seq uint32, body []byte) {
	c.mu.Lock()
	ack := c.requestLocked(sip.ACK, seq)
	c.mu.Unlock()
	if body != nil {
		ack.AppendHeader(sip.NewHeader("Content-Type", "application/sdp"))
	}
	ack.SetBody(body)
	c.p.cli.WriteRequest(ack, noBuild)
}

// maybeRefresh sends session refreshes when the phone is the refresher.
func (c *Call) maybeRefresh() {
	c.mu.Lock()
	se, we := c.sessionExpires, c.weRefresh
	c.mu.Unlock()
	if se <= 0 || !we {
		return
	}
	c.p.wg.Add(1)
	go func() {
		defer c.p.wg.Done()
		t := time.NewTicker(se / 2)
		defer t.Stop()
		for {
			select {
			case <-t.C:
				c.mu.Lock()
				still := c.weRefresh
				c.mu.Unlock()
				if !still {
					return
				}
				ctx, cancel := context.WithTimeout(c.p.ctx, 5*time.Second)
				c.Reinvite(ctx, ReinviteOptions{})
				cancel()
			case <-c.done:
				return
			case <-c.p.ctx.Done():
				return
			}
		}
	}()
}

// StopRefreshing stops the phone's session refreshes (by forgetting the session interval).
func (c *Call) StopRefreshing() {
	c.mu.Lock()
	c.weRefresh = false
	c.sessionExpires = 0
	c.mu.Unlock()
}

// --- SDP -------------------------------------------------------------------------------------

func ptOf(info codec.Info) uint8 { return info.PayloadType }

// offer renders the phone's SDP offer.
func (c *Call) offer(dir Direction) []byte {
	return c.sdp(c.codecs, dir, !c.p.o.NoDTMF, 101)
}

func (c *Call) sdp(codecs []codec.Info, dir Direction, dtmf bool, dtmfPT int) []byte {
	c.mu.Lock()
	c.sdpVersion++
	ver := c.sdpVersion
	c.mu.Unlock()
	ip := c.rtpAddr.Addr().String()
	var fmts []string
	var attrs []string
	for _, ci := range codecs {
		pt := ptOf(ci)
		fmts = append(fmts, strconv.Itoa(int(pt)))
		rm := fmt.Sprintf("a=rtpmap:%d %s/%d", pt, ci.Name, ci.ClockRate)
		if ci.Channels > 1 {
			rm += "/" + strconv.Itoa(ci.Channels)
		}
		attrs = append(attrs, rm)
	}
	if dtmf {
		fmts = append(fmts, strconv.Itoa(dtmfPT))
		attrs = append(attrs, fmt.Sprintf("a=rtpmap:%d telephone-event/8000", dtmfPT), fmt.Sprintf("a=fmtp:%d 0-16", dtmfPT))
	}
	lines := []string{
		"v=0",
		fmt.Sprintf("o=siptest 1000 %d IN IP4 %s", ver, ip),
		"s=siptest",
		"c=IN IP4 " + ip,
		"t=0 0",
		fmt.Sprintf("m=audio %d RTP/AVP %s", c.rtpAddr.Port(), strings.Join(fmts, " ")),
	}
	lines = append(lines, attrs...)
	lines = append(lines, fmt.Sprintf("a=rtcp:%d", c.rtcpPort()), "a=ptime:20", "a="+string(dir))
	return []byte(strings.Join(lines, "\r\n") + "\r\n")
}

type parsedSDP struct {
	remote netip.AddrPort
	fmts   []codec.Info
	dtmfPT int
	dir    Direction
}

func parseSDP(body []byte) (parsedSDP, error) {
	var sd pionsdp.SessionDescription
	if err := sd.Unmarshal(body); err != nil {
		return parsedSDP{}, err
	}
	var out parsedSDP
	out.dtmfPT = -1
	out.dir = SendRecv
	for _, m := range sd.MediaDescriptions {
		if m.MediaName.Media != "audio" || m.MediaName.Port.Value == 0 {
			continue
		}
		ci := sd.ConnectionInformation
		if m.ConnectionInformation != nil {
			ci = m.ConnectionInformation
		}
		if ci != nil && ci.Address != nil {
			if a, err := netip.ParseAddr(ci.Address.Address); err == nil {
				out.remote = netip.AddrPortFrom(a, uint16(m.MediaName.Port.Value))
			}
		}
		maps := map[string]string{}
		for _, a := range m.Attributes {
			switch a.Key {
			case "rtpmap":
				pt, enc, _ := strings.Cut(a.Value, " ")
				maps[pt] = enc
			case "sendrecv", "sendonly", "recvonly", "inactive":
				out.dir = Direction(a.Key)
			}
		}
		for _, f := range m.MediaName.Formats {
			enc, ok := maps[f]
			if !ok {
				switch f {
				case "0":
					enc = "PCMU/8000"
				case "8":
					enc = "PCMA/8000"
				case "9":
					enc = "G722/8000"
				}
			}
			parts := strings.Split(enc, "/")
			if len(parts) < 2 {
				continue
			}
			rate, _ := strconv.Atoi(parts[1])
			pt, _ := strconv.Atoi(f)
			info, ok := codec.LookupInfo(parts[0], uint32(rate))
			if !ok {
				continue
			}
			info.PayloadType = uint8(pt)
			if info.Name == codec.TelephoneEvent.Name {
				if out.dtmfPT < 0 {
					out.dtmfPT = pt
				}
				continue
			}
			out.fmts = append(out.fmts, info)
		}
		return out, nil
	}
	return out, errors.New("siptest: no audio stream in SDP")
}

// answer answers an offer: the first offered codec the phone has.
func (c *Call) answer(offer []byte) ([]byte, error) {
	p, err := parseSDP(offer)
	if err != nil {
		return nil, err
	}
	var pick codec.Info
	found := false
	for _, f := range p.fmts {
		for _, mine := range c.codecs {
			if strings.EqualFold(f.Name, mine.Name) {
				pick, found = f, true
				break
			}
		}
		if found {
			break
		}
	}
	if !found {
		return nil, errors.New("siptest: no common codec")
	}
	c.setRemote(offer, p, pick)
	dtmf := p.dtmfPT >= 0 && !c.p.o.NoDTMF
	dir := SendRecv
	switch p.dir {
	case SendOnly:
		dir = RecvOnly
	case RecvOnly:
		dir = SendOnly
	case Inactive:
		dir = Inactive
	}
	return c.sdp([]codec.Info{pick}, dir, dtmf, p.dtmfPT), nil
}

// takeAnswer applies an answer to the phone's offer.
func (c *Call) takeAnswer(answer []byte) (codec.Info, error) {
	p, err := parseSDP(answer)
	if err != nil {
		return codec.Info{}, err
	}
	if len(p.fmts) == 0 {
		return codec.Info{}, errors.New("siptest: answer without a codec")
	}
	c.setRemote(answer, p, p.fmts[0])
	return p.fmts[0], nil
}

func (c *Call) setRemote(body []byte, p parsedSDP, pick codec.Info) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.remoteSDP = append([]byte(nil), body...)
	c.remoteRTP = p.remote
	c.audio = pick
	if strings.EqualFold(pick.Name, "opus") {
		c.audio.SampleRate = 16000
	}
	if !c.p.o.NoDTMF {
		c.dtmfPT = p.dtmfPT
	}
	if c.ep != nil && p.remote.IsValid() {
		c.ep.SetRemote(p.remote, netip.AddrPort{})
	}
}
