package sip

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/emiago/sipgo/sip"

	"github.com/parley-voice/parley/media"
	"github.com/parley-voice/parley/media/tts"
	"github.com/parley-voice/parley/session"
)

// DefaultTransferTimeout bounds a transfer when the request gives no timeout.
const DefaultTransferTimeout = 30 * time.Second

// transferTarget turns a transfer destination (E.164 number or SIP URI) into a URI and the
// transport and trunk to reach it.
func (c *Call) transferTarget(dest string) (sip.Uri, Transport, Trunk, error) {
	if err := CheckTransferDestination(c.ctx, dest, c.transferAllow()); err != nil {
		return sip.Uri{}, "", Trunk{}, err
	}
	trunk := c.xfer.Trunk
	if trunk.URI == "" {
		trunk = c.trunk
	}
	u, tp, err := c.s.dialTarget(DialRequest{To: dest, Trunk: trunk})
	return u, tp, trunk, err
}

func (c *Call) beginTransfer(t session.TransferRequest) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.transfer {
		return fmt.Errorf("%w: another transfer is in progress", ErrTransferFailed)
	}
	if c.state != CallInProgress {
		return fmt.Errorf("%w: the call is not in progress", ErrTransferFailed)
	}
	c.transfer = true
	return nil
}

func (c *Call) endTransfer() {
	c.mu.Lock()
	c.transfer = false
	c.mu.Unlock()
}

func (c *Call) transferFailed(t session.TransferRequest, reason string) error {
	c.log.Info("sip: transfer failed", "destination", t.Destination, "mode", string(t.Mode), "reason", reason)
	c.emit(Event{Kind: EventTransfer, Transfer: TransferEvent{Destination: t.Destination, Mode: t.Mode, State: "failed", Reason: reason}})
	return fmt.Errorf("%w: %s", ErrTransferFailed, reason)
}

// transferCold hands the caller to the destination with REFER (RFC 3515) and follows the
// NOTIFY sipfrag: a final 2xx ends our leg (transferred); a failure, a refusal of the REFER or
// the timeout returns an error and the conversation goes on.
func (c *Call) transferCold(ctx context.Context, t session.TransferRequest) error {
	if t.Mode == "" {
		t.Mode = session.TransferCold
	}
	l := c.primary.Load()
	if l == nil || l.ended() {
		return ErrClosed
	}
	if err := c.beginTransfer(t); err != nil {
		return err
	}
	defer c.endTransfer()
	target, _, _, err := c.transferTarget(t.Destination)
	if err != nil {
		c.transferFailed(t, err.Error())
		return fmt.Errorf("%w: %w", ErrTransferFailed, err)
	}
	timeout := t.Timeout
	if timeout <= 0 {
		timeout = DefaultTransferTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	c.emit(Event{Kind: EventTransfer, Transfer: TransferEvent{Destination: t.Destination, Mode: t.Mode, State: "started"}})
	for {
		select {
		case <-l.notifyCh: // forget NOTIFYs of an earlier REFER
			continue
		default:
		}
		break
	}
	l.mu.Lock()
	if l.state != legConfirmed {
		l.mu.Unlock()
		return c.transferFailed(t, "the call is not established")
	}
	req := c.s.newRequest(&l.d, sip.REFER, 0)
	local := l.d.local
	l.mu.Unlock()
	req.AppendHeader(sip.NewHeader("Refer-To", "<"+target.String()+">"))
	req.AppendHeader(sip.NewHeader("Referred-By", "<"+local.String()+">"))
	req.AppendHeader(sip.NewHeader("Allow", allowMethods))
	req.SetBody(nil)
	res, err := c.s.do(ctx, req)
	if err != nil {
		return c.transferFailed(t, "REFER unanswered: "+err.Error())
	}
	if res.StatusCode != 202 && res.StatusCode != 200 {
		return c.transferFailed(t, fmt.Sprintf("REFER refused: %d %s", res.StatusCode, res.Reason))
	}
	for {
		select {
		case f := <-l.notifyCh:
			switch {
			case f.status >= 200 && f.status < 300:
				c.log.Info("sip: cold transfer succeeded", "destination", t.Destination)
				c.emit(Event{Kind: EventTransfer, Transfer: TransferEvent{Destination: t.Destination, Mode: t.Mode, State: "succeeded"}})
				l.end(session.EndTransferred, true, "transferred")
				return nil
			case f.status >= 300:
				return c.transferFailed(t, fmt.Sprintf("transfer target answered %d %s", f.status, f.reason))
			case f.terminated:
				return c.transferFailed(t, "subscription ended without a final answer")
			}
		case <-l.done:
			// The transferee left our dialog after accepting the REFER: it went to the target.
			c.emit(Event{Kind: EventTransfer, Transfer: TransferEvent{Destination: t.Destination, Mode: t.Mode, State: "succeeded"}})
			return nil
		case <-ctx.Done():
			return c.transferFailed(t, "timed out waiting for the transfer to complete")
		}
	}
}

// transferWarm puts the caller on hold with ringback, dials the destination on a new leg, briefs
// the human with the summary (spoken by the briefing voice, or a fixed chime), then bridges the
// two legs through the conversation's takeover: the human's voice is played to the caller by
// the engine and transcribed as agent lines marked human, the caller goes on being transcribed
// and heard by the human, and taps keep recording both sides. The conversation stays live
// (human_takeover) until either party hangs up, which hangs up the other and ends it as
// transferred; only then does transferWarm return nil, so the engine's goroutine that asked
// (the command or the LLM's tool call) holds until the bridged call is over. On failure before
// the bridge the caller is taken off hold and the conversation resumes.
func (c *Call) transferWarm(ctx context.Context, t session.TransferRequest) error {
	l := c.primary.Load()
	if l == nil || l.ended() {
		return ErrClosed
	}
	if err := c.beginTransfer(t); err != nil {
		return err
	}
	defer c.endTransfer()
	target, tp, trunk, err := c.transferTarget(t.Destination)
	if err != nil {
		c.transferFailed(t, err.Error())
		return fmt.Errorf("%w: %w", ErrTransferFailed, err)
	}
	timeout := t.Timeout
	if timeout <= 0 {
		timeout = DefaultTransferTimeout
	}
	conv := c.Conversation()
	c.emit(Event{Kind: EventTransfer, Transfer: TransferEvent{Destination: t.Destination, Mode: t.Mode, State: "started"}})
	// Hold: the conversation neither hears the caller nor is heard; the caller hears ringback.
	c.muted.Store(true)
	rb := newRingback(media.PipelineRate)
	l.med.setSink(nil)
	l.med.setFiller(rb.fill)
	restore := func() {
		l.med.setFiller(nil)
		c.muted.Store(false)
		if conv != nil {
			l.med.setSink(c.callerSink(conv))
		}
	}
	h, err := c.dialAndBrief(ctx, l, t, target, tp, trunk, timeout)
	if err != nil {
		restore()
		return err
	}
	if conv == nil {
		return c.bridgeDirect(l, h, t)
	}
	tk, err := c.startTakeover(conv)
	if errors.Is(err, session.ErrEnded) {
		// The conversation ended while the human was briefed: nobody to hand over. The call
		// ends with it (Hangup, or the monitor once this returns).
		h.end(session.EndFailed, true, "transfer abandoned")
		restore()
		return c.transferFailed(t, "the conversation ended")
	}
	if err != nil {
		// No takeover (a supervisor already holds one, or no second recognizer): bridge
		// directly rather than drop the human, as before the takeover existed.
		c.log.Warn("sip: warm transfer without takeover; the conversation ends at the bridge", "err", err)
		return c.bridgeDirect(l, h, t)
	}
	c.mu.Lock()
	c.bridged, c.takeover = h, tk
	c.mu.Unlock()
	fromCaller, fromHuman := c.bridgeSinks(conv, tk, h)
	h.med.setDTMFSink(nil)
	h.med.setSink(fromHuman)
	l.med.setFiller(nil)
	c.muted.Store(false) // the engine's pacer now plays the human's voice to the caller
	l.med.setSink(fromCaller)
	// A party that left while the bridge was being set up: its end hook may have run before
	// c.bridged was set. Both calls are no-ops when the hooks already ran.
	if h.ended() {
		c.legEnded(h, session.EndCompleted)
	}
	if l.ended() {
		h.end(session.EndCallerHungUp, true, "caller hung up")
	}
	c.log.Info("sip: warm transfer bridged through the takeover", "destination", t.Destination)
	c.emit(Event{Kind: EventTransfer, Transfer: TransferEvent{Destination: t.Destination, Mode: t.Mode, State: "succeeded"}})
	c.awaitBridge(conv)
	return nil
}

// dialAndBrief places the human's leg and briefs the human. On failure the human's leg is gone
// and the error is the transfer's (ErrClosed when the caller left meanwhile).
func (c *Call) dialAndBrief(ctx context.Context, l *leg, t session.TransferRequest, target sip.Uri, tp Transport, trunk Trunk, timeout time.Duration) (*leg, error) {
	var watch sync.WaitGroup
	defer watch.Wait()
	dctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(c.ctx, cancel)
	defer stop()
	watch.Add(1)
	go func() {
		defer watch.Done()
		select {
		case <-l.done:
			cancel()
		case <-dctx.Done():
		}
	}()
	h, err := c.s.placeCall(dctx, c, dialSpec{
		target: target, transport: tp, from: c.agentSideNumber(), trunk: trunk, ringTimeout: timeout,
	})
	if err != nil {
		var de *DialError
		if errors.As(err, &de) {
			return nil, c.transferFailed(t, "transfer target "+strings.ReplaceAll(string(de.Outcome), "_", " "))
		}
		return nil, c.transferFailed(t, err.Error())
	}
	if l.ended() {
		h.end(session.EndCallerHungUp, true, "caller hung up")
		return nil, ErrClosed
	}
	if err := c.brief(dctx, h, t.Summary); err != nil {
		h.end(session.EndFailed, true, "transfer abandoned")
		if l.ended() {
			return nil, ErrClosed
		}
		return nil, c.transferFailed(t, err.Error())
	}
	return h, nil
}

// startTakeover starts the conversation's takeover. The conversation may end meanwhile: its
// StartTakeover then waits for the conversation's goroutines, this one (the engine's caller of
// Transfer) among them, so it runs on a background goroutine and an ended conversation gives
// session.ErrEnded here at once.
func (c *Call) startTakeover(conv *session.Conversation) (*session.Takeover, error) {
	if conv.EndReason() != "" {
		return nil, session.ErrEnded
	}
	type result struct {
		tk  *session.Takeover
		err error
	}
	ch := make(chan result, 1)
	c.s.goBackground(func(context.Context) {
		tk, err := conv.StartTakeover()
		ch <- result{tk, err}
	})
	poll := time.NewTicker(bridgePoll)
	defer poll.Stop()
	for {
		select {
		case r := <-ch:
			return r.tk, r.err
		case <-poll.C:
			if conv.EndReason() != "" {
				return nil, session.ErrEnded
			}
		case <-c.done:
			return nil, session.ErrEnded
		}
	}
}

// bridgeSinks returns the two per-frame paths of a bridge through the takeover: the caller's
// frames go to the conversation (transcribed, tapped) and to the human; the human's frames go
// to the takeover, which plays them to the caller through the engine's pacer (and so through
// SendFrame and every tap as the agent's side) and transcribes them. Both run on media
// goroutines and allocate nothing.
func (c *Call) bridgeSinks(conv *session.Conversation, tk *session.Takeover, h *leg) (fromCaller, fromHuman frameFunc) {
	toConv := c.callerSink(conv)
	fromCaller = func(f *media.Frame) {
		toConv(f)
		h.med.sendFrame(f)
	}
	return fromCaller, tk.Send
}

// bridgePoll is how often a bridged call checks whether its conversation ended on its own (an
// End from outside does not call the port back).
const bridgePoll = 100 * time.Millisecond

// awaitBridge holds until the bridged call is over. Either leg's end hangs up the other
// (legEnded); a conversation that ends by its own decision with a hang-up ends both legs through
// Hangup; one ended from outside (Conversation.End, which tells no port) is noticed here and
// both legs are hung up with its reason. It never waits on the conversation's Done: the
// conversation waits for the goroutine that runs this.
func (c *Call) awaitBridge(conv *session.Conversation) {
	tk := time.NewTicker(bridgePoll)
	defer tk.Stop()
	for {
		select {
		case <-c.done:
			return
		case <-tk.C:
			if r := conv.EndReason(); r != "" {
				c.hangup(r, "conversation ended")
			}
		}
	}
}

// bridgeEnded tells the conversation that its bridged call is over and returns the call's end
// reason: transferred, whichever party hung up, unless the conversation had already ended for
// a reason of its own.
func (c *Call) bridgeEnded(conv *session.Conversation) session.EndReason {
	if r := conv.EndReason(); r != "" {
		return r
	}
	conv.ChannelEnded(session.EndTransferred)
	return session.EndTransferred
}

// bridgeDirect connects the legs to each other without the conversation (the fallback when no
// takeover can be started): the conversation ends as transferred at once while the bridged
// call goes on; the tap still sees both sides.
func (c *Call) bridgeDirect(l, h *leg, t session.TransferRequest) error {
	c.mu.Lock()
	c.bridged = h
	c.mu.Unlock()
	tap := c.tap
	l.med.setFiller(nil)
	l.med.setSink(func(f *media.Frame) {
		h.med.sendFrame(f)
		if tap != nil {
			tap(true, f)
		}
	})
	h.med.setSink(func(f *media.Frame) {
		l.med.sendFrame(f)
		if tap != nil {
			tap(false, f)
		}
	})
	h.med.setDTMFSink(nil)
	if h.ended() { // the human hung up as we bridged
		c.legEnded(h, session.EndCompleted)
		return nil
	}
	c.log.Info("sip: warm transfer bridged directly", "destination", t.Destination)
	c.emit(Event{Kind: EventTransfer, Transfer: TransferEvent{Destination: t.Destination, Mode: t.Mode, State: "succeeded"}})
	return nil
}

// agentSideNumber is the number the second leg of a transfer shows: the number the caller
// dialled (inbound) or called from (outbound).
func (c *Call) agentSideNumber() string {
	if c.dir == Inbound {
		return c.to
	}
	return c.from
}

// brief plays the summary to the human on h: spoken by the briefing synthesizer when there is
// one, else a short chime. It paces the audio in real time and fails if the human hangs up.
func (c *Call) brief(ctx context.Context, h *leg, summary string) error {
	var src func(dst []int16) (int, error)
	if c.xfer.Briefing != nil && strings.TrimSpace(summary) != "" {
		st, err := c.xfer.Briefing.Synthesize(ctx, tts.Request{Text: summary, Voice: c.xfer.BriefingVoice, SampleRate: media.PipelineRate})
		if err != nil {
			c.log.Warn("sip: briefing synthesis failed; playing the chime", "err", err)
		} else {
			defer st.Close()
			src = st.Read
		}
	}
	if src == nil {
		ch := newChime(media.PipelineRate)
		src = ch.read
	}
	var f media.Frame
	buf := make([]int16, media.SamplesPerFrame(media.PipelineRate))
	have := 0
	tk := time.NewTicker(frameDur)
	defer tk.Stop()
	eof := false
	for {
		for !eof && have < len(buf) {
			n, err := src(buf[have:])
			have += n
			if errors.Is(err, io.EOF) {
				eof = true
			} else if err != nil {
				return fmt.Errorf("briefing audio failed: %v", err)
			}
			if n == 0 && !eof {
				break
			}
		}
		if have == 0 && eof {
			return nil
		}
		if have == len(buf) || eof {
			f.SetPCM(media.PipelineRate, buf[:have])
			if have < len(buf) {
				clear(f.Samples[have:len(buf)])
				f.N = len(buf)
			}
			h.med.sendFrame(&f)
			have = 0
		}
		select {
		case <-tk.C:
		case <-h.done:
			return errors.New("the transfer target hung up during the briefing")
		case <-ctx.Done():
			return errors.New("the transfer was abandoned")
		}
	}
}

// onRefer answers a REFER from the peer (RFC 3515): Parley itself is asked to move to the
// target. It accepts (202), reports progress by NOTIFY sipfrag, dials the target, and on answer
// moves the conversation to the new leg; the old leg is then ended.
func (c *Call) onRefer(l *leg, req *sip.Request, tx sip.ServerTransaction) {
	tag := l.localTag()
	rt := headerValue(req, "Refer-To")
	if rt == "" {
		rt = headerValue(req, "r")
	}
	var u sip.Uri
	if _, err := sip.ParseAddressValue(rt, &u, nil); err != nil || u.Host == "" {
		c.s.respond(tx, req, 400, tag, nil, sip.NewHeader("Reason", reasonHeader(400, "bad Refer-To")))
		return
	}
	if l != c.primary.Load() || c.Conversation() == nil {
		c.s.respond(tx, req, 603, tag, nil)
		return
	}
	if err := checkTransferHost(c.ctx, u.Host, c.transferAllow()); err != nil {
		c.log.Info("sip: REFER to a destination not allowed", "refer_to", u.String(), "err", err)
		c.s.respond(tx, req, 403, tag, nil, sip.NewHeader("Reason", reasonHeader(403, "destination not allowed")))
		return
	}
	t := session.TransferRequest{Destination: u.String(), Mode: session.TransferCold}
	if err := c.beginTransfer(t); err != nil {
		c.s.respond(tx, req, 491, tag, nil)
		return
	}
	c.s.respond(tx, req, 202, tag, nil)
	hdrs := map[string]string{}
	for _, kv := range u.Headers {
		if v, err := url.QueryUnescape(kv.V); err == nil {
			hdrs[kv.K] = v
		}
	}
	u.Headers = nil
	c.log.Info("sip: REFER received", "refer_to", u.String())
	c.notify(l, "SIP/2.0 100 Trying", false)
	c.s.goBackground(func(ctx context.Context) {
		defer c.endTransfer()
		tp := transportOf(strings.ToUpper(u.UriParams.GetOr("transport", string(c.trunk.Transport))))
		ctx, cancel := context.WithTimeout(ctx, DefaultTransferTimeout)
		defer cancel()
		stop := context.AfterFunc(c.ctx, cancel)
		defer stop()
		nl, err := c.s.placeCall(ctx, c, dialSpec{target: u, transport: tp, from: c.agentSideNumber(), trunk: c.trunk,
			ringTimeout: DefaultTransferTimeout, headers: hdrs})
		if err != nil {
			status := 503
			var de *DialError
			if errors.As(err, &de) && de.Status >= 300 {
				status = de.Status
			}
			c.notify(l, fmt.Sprintf("SIP/2.0 %d %s", status, statusText(status)), true)
			c.emit(Event{Kind: EventTransfer, Transfer: TransferEvent{Destination: t.Destination, Mode: t.Mode, State: "failed", Reason: err.Error()}})
			return
		}
		// Move the conversation onto the new leg, then let the old one go.
		conv := c.Conversation()
		// The old leg lets go first: the conversation's PushFrame takes one leg at a time.
		l.med.setSink(nil)
		l.med.setDTMFSink(nil)
		c.attach(nl)
		select {
		case <-c.done:
			// The call ended (hung up, the server closing) while the new leg was placed:
			// nothing else would end the new leg.
			nl.end(c.EndReason(), true, "call ended")
			return
		default:
		}
		nl.med.setSink(c.callerSink(conv))
		nl.med.setDTMFSink(conv.PushDTMF)
		c.notify(l, "SIP/2.0 200 OK", true)
		c.emit(Event{Kind: EventTransfer, Transfer: TransferEvent{Destination: t.Destination, Mode: t.Mode, State: "succeeded"}})
		c.log.Info("sip: moved to the REFER target", "target", u.String())
		// RFC 5589 §6: the transferor hangs up; if it does not, Parley does.
		select {
		case <-l.done:
		case <-time.After(2 * time.Second):
			l.end(session.EndTransferred, true, "transferred")
		case <-ctx.Done():
		}
		if nl.ended() {
			c.legEnded(nl, session.EndCallerHungUp)
		}
	})
}

// notify sends a NOTIFY of the implicit REFER subscription with a sipfrag status line.
func (c *Call) notify(l *leg, frag string, final bool) {
	l.mu.Lock()
	if l.state != legConfirmed {
		l.mu.Unlock()
		return
	}
	req := c.s.newRequest(&l.d, sip.NOTIFY, 0)
	l.mu.Unlock()
	req.AppendHeader(sip.NewHeader("Event", "refer"))
	state := "active;expires=60"
	if final {
		state = "terminated;reason=noresource"
	}
	req.AppendHeader(sip.NewHeader("Subscription-State", state))
	req.AppendHeader(sip.NewHeader("Content-Type", "message/sipfrag;version=2.0"))
	req.SetBody([]byte(frag + "\r\n"))
	c.s.goBackground(func(ctx context.Context) {
		ctx, cancel := context.WithTimeout(ctx, 8*time.Second)
		defer cancel()
		if _, err := c.s.do(ctx, req); err != nil {
			c.log.Debug("sip: NOTIFY unanswered", "err", err)
		}
	})
}
