package sip

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/emiago/sipgo/sip"

	"github.com/parley-voice/parley/media"
	"github.com/parley-voice/parley/session"
)

// CallDirection says who placed a call.
type CallDirection string

// Call directions.
const (
	Inbound  CallDirection = "inbound"
	Outbound CallDirection = "outbound"
)

// CallState is where a call is.
type CallState string

// Call states, as the control plane reports them.
const (
	CallRinging    CallState = "ringing"
	CallInProgress CallState = "in_progress"
	CallEnded      CallState = "ended"
)

// Call is one phone call handled by Parley: the caller's (or callee's) leg, the conversation
// that talks on it, and for a warm transfer the human's leg bridged to it. It is the
// conversation's session.AudioPort.
type Call struct {
	s       *Server
	id      string
	dir     CallDirection
	trunk   Trunk
	from    string
	to      string
	log     *slog.Logger
	onEvent func(Event)
	// finishHook runs once the call has ended (after done is closed); guarded by mu.
	finishHook func()
	xfer       TransferOptions
	tap        func(fromCaller bool, f *media.Frame)

	primary atomic.Pointer[leg] // the leg the conversation talks on
	muted   atomic.Bool         // the conversation's audio is held back (warm transfer)

	mu             sync.Mutex
	conv           *session.Conversation
	convLive       bool              // StartVoice returned: the conversation may be told the channel ended
	goneBeforeLive session.EndReason // the primary leg ended before convLive: startConversation tells the conversation
	bridged        *leg              // the human's leg once a warm transfer bridged it
	takeover       *session.Takeover // set when the bridge runs through the conversation's takeover
	state          CallState
	startedAt      time.Time
	answeredAt     time.Time
	endedAt        time.Time
	endReason      session.EndReason
	outcome        Outcome
	endDetail      EndDetail  // how the primary leg ended (issue 22 item 4)
	redirects      []Redirect // issue 21: the dial's 3xx steps
	amd            AMDResult
	transfer       bool // a transfer is in progress

	ctx     context.Context // the conversation's context; cancelled once the call is over
	cancel  context.CancelFunc
	done    chan struct{}
	endOnce sync.Once
}

func (s *Server) newCall(id string, dir CallDirection, trunk Trunk, from, to string, onEvent func(Event), xfer TransferOptions) *Call {
	if id == "" {
		id = newUUID()
	}
	c := &Call{
		s: s, id: id, dir: dir, trunk: trunk, from: from, to: to, onEvent: onEvent, xfer: xfer,
		state: CallRinging, startedAt: time.Now(), done: make(chan struct{}),
	}
	c.log = s.log.With("call", id, "direction", string(dir))
	c.ctx, c.cancel = context.WithCancel(context.Background())
	return c
}

// ID returns the call's id (the Plan's or DialRequest's ID, or a UUID).
func (c *Call) ID() string { return c.id }

// Direction returns whether the call is inbound or outbound.
func (c *Call) Direction() CallDirection { return c.dir }

// From and To return the calling and called parties (E.164 when they are numbers).
func (c *Call) From() string { return c.from }

// To returns the called party.
func (c *Call) To() string { return c.to }

// Trunk returns the trunk the call runs on.
func (c *Call) Trunk() Trunk { return c.trunk }

// SIPCallID returns the SIP Call-ID of the call's leg.
func (c *Call) SIPCallID() string {
	if l := c.primary.Load(); l != nil {
		return l.d.callID
	}
	return ""
}

// Done is closed when the call is over.
func (c *Call) Done() <-chan struct{} { return c.done }

// State returns where the call is.
func (c *Call) State() CallState {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.state
}

// EndReason returns why the call ended ("" while it is up).
func (c *Call) EndReason() session.EndReason {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.endReason
}

// Conversation returns the call's conversation (nil before it was built).
func (c *Call) Conversation() *session.Conversation {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.conv
}

// AMD returns the answering-machine detection result (zero when none ran).
func (c *Call) AMD() AMDResult {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.amd
}

// Negotiated returns the audio negotiation of the call's leg.
func (c *Call) Negotiated() Negotiated {
	l := c.primary.Load()
	if l == nil {
		return Negotiated{}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.neg
}

// Stats returns the media statistics of the call's leg.
func (c *Call) Stats() CallStats {
	l := c.primary.Load()
	if l == nil {
		return CallStats{}
	}
	return l.stats()
}

func (c *Call) emit(ev Event) {
	if c.onEvent == nil {
		return
	}
	ev.Call = c
	if ev.At.IsZero() {
		ev.At = time.Now()
	}
	if ev.Stats == (CallStats{}) {
		ev.Stats = c.Stats()
	}
	c.onEvent(ev)
}

// attach makes l the leg the conversation talks on.
func (c *Call) attach(l *leg) {
	l.onEnd = c.legEnded
	l.onRefer = c.onRefer
	l.onMedia = c.mediaChanged
	c.primary.Store(l)
}

// legEnded is every leg's end hook.
func (c *Call) legEnded(l *leg, reason session.EndReason) {
	c.mu.Lock()
	conv, live, bridged, through, primary := c.conv, c.convLive, c.bridged, c.takeover != nil, c.primary.Load()
	c.mu.Unlock()
	if h := c.s.hooks; h != nil && h.legEnded != nil {
		h.legEnded()
	}
	switch {
	case l == primary:
		if reason == session.EndCallerHungUp && c.dir == Outbound {
			reason = session.EndCalleeHungUp // the remote party of an outbound call is the callee
		}
		// How the leg ended goes out before the conversation is ended, so that the end
		// stored carries it (issue 22 item 4).
		if d := l.getEndDetail(); !d.IsZero() {
			c.mu.Lock()
			if c.endDetail.IsZero() {
				c.endDetail = d
			}
			c.mu.Unlock()
			c.emit(Event{Kind: EventHangup, EndReason: reason, End: d})
		}
		switch {
		case through:
			// A warm transfer bridged through the conversation: it ends with the call.
			bridged.end(reason, true, "other party hung up")
			reason = c.bridgeEnded(conv)
		case bridged != nil:
			bridged.end(reason, true, "other party hung up")
		default:
			// Read again, and note the end, under the lock startConversation marks the
			// conversation live under: an ACK that came just before a BYE can have it starting
			// now. Whichever of the two comes second tells the conversation, exactly once.
			c.mu.Lock()
			conv, live = c.conv, c.convLive
			if !live {
				c.goneBeforeLive = reason
			}
			c.mu.Unlock()
			if conv != nil && live {
				conv.ChannelEnded(reason)
			}
		}
		c.finish(reason)
	case l == bridged:
		// The human hung up after the bridge: the caller's leg ends too.
		if primary != nil {
			primary.end(session.EndCompleted, true, "transferred party hung up")
		}
		if through {
			c.finish(c.bridgeEnded(conv))
		} else {
			c.finish(session.EndCompleted)
		}
	}
}

// setConversation makes conv the call's conversation. It reports false when the call ended
// while conv was being built: conv is then abandoned (ended before it started) at once.
func (c *Call) setConversation(conv *session.Conversation) bool {
	c.mu.Lock()
	ended, reason := c.state == CallEnded, c.endReason
	if !ended {
		c.conv = conv
	}
	c.mu.Unlock()
	if ended {
		conv.Abandon(reason)
	}
	return !ended
}

// mediaChanged tells the conversation when the caller puts the call on hold (we may no longer
// send: sendonly or inactive from them) and takes it off, so that it does not talk into the
// hold (issue 22 item 4).
func (c *Call) mediaChanged(l *leg, n Negotiated) {
	if l != c.primary.Load() {
		return
	}
	c.mu.Lock()
	conv, live := c.conv, c.convLive
	c.mu.Unlock()
	if conv != nil && live {
		conv.SetHold(!n.Sending())
	}
}

// startConversation starts the built conversation on the call's leg: caller audio and DTMF go
// to it, its audio and commands come back through the Call.
func (c *Call) startConversation() error {
	c.mu.Lock()
	conv := c.conv
	c.mu.Unlock()
	l := c.primary.Load()
	if conv == nil || l == nil {
		return errors.New("sip: no conversation to start")
	}
	if h := c.s.hooks; h != nil && h.starting != nil {
		h.starting()
	}
	if err := conv.StartVoice(c.ctx, c); err != nil {
		return err
	}
	l.med.setSink(c.callerSink(conv))
	l.med.setDTMFSink(conv.PushDTMF)
	c.mu.Lock()
	c.convLive = true
	ended, reason := c.state == CallEnded, c.endReason
	if !ended && c.goneBeforeLive != "" {
		ended, reason = true, c.goneBeforeLive // the leg ended; finish has not run yet
	}
	if !ended {
		c.state = CallInProgress
		c.answeredAt = time.Now()
	}
	c.mu.Unlock()
	if ended {
		// The caller left while the conversation was starting (ChannelEnded may not race
		// StartVoice): tell it now.
		conv.ChannelEnded(reason)
	}
	c.monitor(conv)
	c.emit(Event{Kind: EventInProgress})
	return nil
}

// callerSink routes the caller's frames to the conversation (and the tap).
func (c *Call) callerSink(conv *session.Conversation) frameFunc {
	if c.tap == nil {
		return conv.PushFrame
	}
	tap := c.tap
	return func(f *media.Frame) {
		conv.PushFrame(f)
		tap(true, f)
	}
}

// monitor ends the call when the conversation ends on its own, and after the call ended lets
// the conversation finish (at most convGrace) before cancelling its context. It runs on the two
// ends' callbacks, not on a goroutine waiting for the call's whole life; the server waits for it
// (track) until both are over.
func (c *Call) monitor(conv *session.Conversation) {
	if !c.s.track() {
		return
	}
	m := &callMonitor{c: c, conv: conv}
	c.s.mu.Lock()
	c.s.convs[c] = struct{}{}
	c.s.mu.Unlock()
	c.mu.Lock()
	already := false
	select {
	case <-c.done:
		already = true
	default:
		c.finishHook = m.callEnded
	}
	c.mu.Unlock()
	if already {
		m.callEnded()
	}
	conv.AfterDone(m.convEnded)
}

// convGrace is how long an ended call lets its conversation finish (persist, say goodbye to
// the recognizer) before cancelling it.
const convGrace = 5 * time.Second

// callMonitor is the state monitor keeps between the call's end and the conversation's.
type callMonitor struct {
	c        *Call
	conv     *session.Conversation
	mu       sync.Mutex
	convDone bool
	callDone bool
	released bool
	grace    *time.Timer
}

// convEnded: the conversation ended (on its own, or after the call did). A conversation that
// ends on its own hangs the call up, unless a bridge carries the call on.
func (m *callMonitor) convEnded() {
	m.mu.Lock()
	m.convDone = true
	callDone := m.callDone
	m.mu.Unlock()
	if !callDone {
		m.c.mu.Lock()
		bridged := m.c.bridged != nil
		m.c.mu.Unlock()
		if !bridged {
			m.c.hangup(m.conv.EndReason(), "conversation ended")
		}
	}
	m.release()
}

// callEnded: the call ended. The conversation gets convGrace to finish on its own.
func (m *callMonitor) callEnded() {
	m.mu.Lock()
	m.callDone = true
	if !m.convDone {
		m.grace = time.AfterFunc(convGrace, func() {
			m.c.log.Warn("sip: conversation slow to end; cancelling it")
			m.c.cancel()
		})
	}
	m.mu.Unlock()
	m.release()
}

// release cancels the conversation's context and lets the server go once both have ended.
func (m *callMonitor) release() {
	m.mu.Lock()
	if m.released || !m.convDone || !m.callDone {
		m.mu.Unlock()
		return
	}
	m.released = true
	if m.grace != nil {
		m.grace.Stop()
	}
	m.mu.Unlock()
	m.c.cancel()
	m.c.s.mu.Lock()
	delete(m.c.s.convs, m.c)
	m.c.s.mu.Unlock()
	m.c.s.wg.Done()
}

// hangup ends the call from Parley's side: BYE on every leg (CANCEL is the dialler's business).
func (c *Call) hangup(reason session.EndReason, text string) {
	if l := c.primary.Load(); l != nil {
		l.end(reason, true, text)
	}
	c.mu.Lock()
	b := c.bridged
	c.mu.Unlock()
	if b != nil {
		b.end(reason, true, text)
	}
	c.finish(reason)
}

// finish marks the call over once and reports it.
func (c *Call) finish(reason session.EndReason) {
	c.endOnce.Do(func() {
		c.mu.Lock()
		c.state = CallEnded
		c.endedAt = time.Now()
		c.endReason = reason
		conv, live := c.conv, c.convLive
		outcome, detail := c.outcome, c.endDetail
		c.mu.Unlock()
		counted := c.s.removeCall(c)
		// A conversation built but never started (a 200 never acknowledged, a BYE before the
		// ACK, a callee gone during AMD) ends here with the call: nothing else would end it.
		if conv == nil || !live && conv.Abandon(reason) {
			c.cancel()
		}
		st := c.Stats()
		c.log.Info("sip: call ended", "reason", string(reason), "codec", st.Codec,
			"rtp_sent", st.PacketsSent, "rtp_received", st.PacketsReceived, "lost", st.PacketsLost,
			"jitter", st.Jitter.String(), "rtt", st.RTT.String())
		close(c.done)
		// A leg attached while the call was ending (an incoming REFER's new leg) ends too;
		// one attached after done closed is ended by whoever attached it.
		if p := c.primary.Load(); p != nil && !p.ended() {
			p.end(reason, true, "call ended")
		}
		if o := c.s.o.Observer; o != nil && counted {
			o.CallEnded(c.dir, reason, st)
		}
		c.mu.Lock()
		hook := c.finishHook
		c.finishHook = nil
		c.mu.Unlock()
		if hook != nil {
			hook()
		}
		c.emit(Event{Kind: EventEnded, EndReason: reason, Outcome: outcome, Stats: st, End: detail})
	})
}

// SendFrame implements session.AudioPort: one 20 ms frame toward the caller. It never blocks.
func (c *Call) SendFrame(f *media.Frame) {
	if c.muted.Load() {
		return
	}
	if l := c.primary.Load(); l != nil {
		l.med.sendFrame(f)
		if c.tap != nil {
			c.tap(false, f)
		}
	}
}

// SendDTMF implements session.AudioPort: RFC 4733 events when the peer negotiated
// telephone-event, SIP INFO (application/dtmf-relay) otherwise.
func (c *Call) SendDTMF(ctx context.Context, digits string) error {
	l := c.primary.Load()
	if l == nil || l.ended() {
		return ErrClosed
	}
	for _, d := range digits {
		if !isDTMFDigit(d) {
			return fmt.Errorf("sip: %q is not a DTMF digit", d)
		}
	}
	err := l.med.sendDTMF(ctx, digits)
	if !errors.Is(err, errNoRFC4733) {
		return err
	}
	for _, d := range digits {
		if err := l.sendInfoDTMF(ctx, d); err != nil {
			return err
		}
	}
	return nil
}

// Hangup implements session.AudioPort: the conversation ended the call.
func (c *Call) Hangup(ctx context.Context, reason session.EndReason) error {
	c.hangup(reason, "agent ended the call")
	return nil
}

// Transfer implements session.AudioPort; see transfer.go.
func (c *Call) Transfer(ctx context.Context, t session.TransferRequest) error {
	switch t.Mode {
	case session.TransferWarm:
		return c.transferWarm(ctx, t)
	default:
		return c.transferCold(ctx, t)
	}
}

// sendInfoDTMF sends one digit by SIP INFO with application/dtmf-relay (the de-facto format).
func (l *leg) sendInfoDTMF(ctx context.Context, d rune) error {
	l.mu.Lock()
	if l.state != legConfirmed {
		l.mu.Unlock()
		return ErrNotEstablished
	}
	req := l.s.newRequest(&l.d, sip.INFO, 0)
	l.mu.Unlock()
	req.AppendHeader(sip.NewHeader("Content-Type", "application/dtmf-relay"))
	req.SetBody(formatDTMFRelay(d, 160*time.Millisecond))
	res, err := l.s.do(ctx, req)
	if err != nil {
		return err
	}
	if !res.IsSuccess() {
		return fmt.Errorf("sip: INFO answered %d", res.StatusCode)
	}
	return nil
}

func isDTMFDigit(d rune) bool { return strings.ContainsRune("0123456789*#ABCDabcd", d) }

// raceHooks run at the two points whose order decides who tells a starting conversation that
// its leg ended; tests set them to widen the window (export_test.go).
type raceHooks struct {
	starting func() // startConversation, before StartVoice
	legEnded func() // legEnded, after it read the call's state
}
