package sip

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"strings"
	"time"

	"github.com/emiago/sipgo/sip"

	"github.com/parley-voice/parley/media"
	"github.com/parley-voice/parley/session"
)

// DialRequest describes an outbound call.
type DialRequest struct {
	// ID names the call (the conversation's id); empty picks a UUID.
	ID string
	// From is the calling number (E.164) or a SIP URI; FromName its display name.
	From, FromName string
	// To is the called number (E.164, dialled through Trunk) or a SIP URI (dialled directly).
	To string
	// Trunk carries the call. Required for numbers.
	Trunk Trunk
	// Conversation builds the conversation once the call is answered. Required.
	Conversation ConversationFactory
	// RingTimeout ends an unanswered call with CANCEL (outcome no_answer); 0 means
	// DefaultRingTimeout.
	RingTimeout time.Duration
	// AMD configures answering-machine detection.
	AMD AMDOptions
	// OnEvent receives the call's events; it must not block.
	OnEvent func(Event)
	// Headers are added to the INVITE (X- headers for the carrier or the callee).
	Headers map[string]string
	// Transfer configures transfers of this call.
	Transfer TransferOptions
	// Tap receives every frame of the call in both directions (see Plan.Tap).
	Tap func(fromCaller bool, f *media.Frame)
	// CheckRedirect, when set, must allow each 3xx Contact target before it is dialled (the
	// control plane's dial allow-list), beside the transfer allow-list (issue 21).
	CheckRedirect func(ctx context.Context, target string) error
}

// Dial places an outbound call: INVITE with an SDP offer of the configured codecs through the
// trunk, digest authentication on 401/407, early media on 183, ACK on 200. It returns once the
// call is answered and its conversation built (the conversation starts at once, or after
// answering-machine detection), or with a *DialError carrying the outcome: busy, no answer
// (including the ring timeout, which sends CANCEL), invalid number, failed (with
// DetailUpstreamUnreachable when the trunk never answered), cancelled (ctx ended first).
func (s *Server) Dial(ctx context.Context, r DialRequest) (*Call, error) {
	if r.Conversation == nil {
		return nil, fmt.Errorf("%w: DialRequest needs a Conversation", ErrBadOptions)
	}
	if r.RingTimeout <= 0 {
		r.RingTimeout = DefaultRingTimeout
	}
	target, tp, err := s.dialTarget(r)
	if err != nil {
		return nil, err
	}
	to := r.To
	if n, ok := NormalizeE164(r.To, s.o.DefaultCountryCode); ok {
		to = n
	}
	c := s.newCall(r.ID, Outbound, r.Trunk, r.From, to, r.OnEvent, r.Transfer)
	c.tap = r.Tap
	if err := s.addCall(c); err != nil {
		return nil, err
	}
	l, err := s.placeCall(ctx, c, dialSpec{
		target: target, transport: tp, from: r.From, fromName: r.FromName, trunk: r.Trunk,
		ringTimeout: r.RingTimeout, headers: r.Headers, onRinging: func() { c.emit(Event{Kind: EventRinging}) },
		checkRedirect: r.CheckRedirect,
		onRedirect: func(step Redirect) { // issue 21
			c.mu.Lock()
			c.redirects = append(c.redirects, step)
			c.mu.Unlock()
			c.emit(Event{Kind: EventRedirect, Redirect: step})
		},
	})
	if err != nil {
		var de *DialError
		if errors.As(err, &de) {
			c.mu.Lock()
			c.outcome = de.Outcome
			de.Redirects = append([]Redirect(nil), c.redirects...)
			c.mu.Unlock()
			c.emitFailed(de)
		}
		c.finish(outcomeReason(err))
		return nil, err
	}
	c.attach(l)
	if l.ended() { // the callee hung up at once
		return nil, &DialError{Outcome: OutcomeFailed, Reason: "hung up at answer"}
	}
	conv, err := r.Conversation(ctx, c)
	if err != nil {
		c.hangup(session.EndFailed, "conversation failed")
		return nil, fmt.Errorf("sip: build conversation: %w", err)
	}
	if !c.setConversation(conv) {
		return nil, &DialError{Outcome: OutcomeFailed, Reason: "hung up at answer"}
	}
	c.mu.Lock()
	c.outcome = OutcomeAnswered
	c.mu.Unlock()
	if r.AMD.Enabled {
		amd, err := NewAMD(r.AMD)
		if err != nil {
			c.hangup(session.EndFailed, "AMD failed")
			return nil, err
		}
		if !s.track() {
			c.hangup(session.EndFailed, "server closing")
			return nil, ErrClosed
		}
		go c.runAMD(amd, r.AMD.withDefaults())
		return c, nil
	}
	if err := c.startConversation(); err != nil {
		c.hangup(session.EndFailed, "conversation failed")
		return nil, fmt.Errorf("sip: start conversation: %w", err)
	}
	return c, nil
}

// isToken reports whether s is an RFC 3261 §25.1 token (a header name).
func isToken(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-.!%*_+`'~", r)) {
			return false
		}
	}
	return true
}

func outcomeReason(err error) session.EndReason {
	var de *DialError
	if errors.As(err, &de) {
		return de.Outcome.EndReason()
	}
	return session.EndFailed
}

func (c *Call) emitFailed(de *DialError) {
	c.log.Info("sip: outbound call failed", "outcome", string(de.Outcome), "status", de.Status, "detail", de.Detail)
}

// dialTarget returns the Request-URI and transport of an outbound call.
func (s *Server) dialTarget(r DialRequest) (sip.Uri, Transport, error) {
	var u sip.Uri
	to := strings.TrimSpace(r.To)
	if to == "" {
		return u, "", fmt.Errorf("%w: DialRequest needs To", ErrBadOptions)
	}
	lower := strings.ToLower(to)
	if strings.HasPrefix(lower, "sip:") || strings.HasPrefix(lower, "sips:") {
		if err := sip.ParseUri(to, &u); err != nil || u.Host == "" {
			return u, "", fmt.Errorf("%w: bad SIP URI %q", ErrBadOptions, to)
		}
		tp := r.Trunk.Transport
		if v, ok := u.UriParams.Get("transport"); ok {
			tp = Transport(strings.ToLower(v))
		}
		if tp == "" {
			tp = UDP
		}
		return u, tp, nil
	}
	if r.Trunk.URI == "" {
		return u, "", fmt.Errorf("%w: dialling a number needs a trunk", ErrBadOptions)
	}
	tu, err := r.Trunk.ParseURI()
	if err != nil {
		return u, "", fmt.Errorf("%w: %v", ErrBadOptions, err)
	}
	user := to
	if n, ok := NormalizeE164(to, s.o.DefaultCountryCode); ok {
		user = n
	}
	u = sip.Uri{Scheme: tu.Scheme, User: user, Host: tu.Host, Port: tu.Port}
	tp, err := ParseTransport(string(r.Trunk.Transport))
	if err != nil {
		return u, "", fmt.Errorf("%w: %v", ErrBadOptions, err)
	}
	if tp != UDP {
		u.UriParams = sip.NewParams()
		u.UriParams.Add("transport", string(tp))
	}
	return u, tp, nil
}

// dialSpec is one outbound INVITE to place.
type dialSpec struct {
	target      sip.Uri
	transport   Transport
	from        string
	fromName    string
	trunk       Trunk
	ringTimeout time.Duration
	headers     map[string]string
	onRinging   func()
	// issue 21: redirects
	checkRedirect func(ctx context.Context, target string) error
	onRedirect    func(Redirect)
}

// resolveHost returns an IP address of host (for choosing our advertised address).
func resolveHost(ctx context.Context, host string) netip.Addr {
	if a, err := netip.ParseAddr(strings.Trim(host, "[]")); err == nil {
		return a.Unmap()
	}
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	ips, err := net.DefaultResolver.LookupNetIP(ctx, "ip", host)
	if err != nil || len(ips) == 0 {
		return netip.Addr{}
	}
	return ips[0].Unmap()
}

// placeCall runs the INVITE transaction of an outbound leg up to the ACK of the 2xx.
func (s *Server) placeCall(ctx context.Context, c *Call, sp dialSpec) (*leg, error) {
	remoteIP := resolveHost(ctx, sp.target.Host)
	adv := s.advertise(remoteIP)
	log := c.log.With("to", sp.target.String())
	med, err := s.newMedia(remoteIP, log)
	if err != nil {
		return nil, &DialError{Outcome: OutcomeFailed, Reason: "no media ports", Cause: err}
	}
	origin := Origin{Username: "parley", SessionID: sdpSessionID(), Address: adv.String()}
	origin.SessionVersion = origin.SessionID
	pol := policyFor(sp.trunk, sp.transport) // issue 21: SRTP
	offer, err := buildOfferSRTP(s.o.Codecs, med.local, origin, SendRecv, pol, nil)
	if err != nil {
		med.close()
		return nil, &DialError{Outcome: OutcomeFailed, Reason: "SRTP needs TLS signalling", Cause: err}
	}
	fromHost := adv.String()
	if sp.trunk.FromDomain != "" {
		fromHost = sp.trunk.FromDomain
	}
	fromUser := sp.from
	if n, ok := NormalizeE164(sp.from, s.o.DefaultCountryCode); ok {
		fromUser = n
	}
	var fromURI sip.Uri
	if strings.HasPrefix(strings.ToLower(sp.from), "sip:") {
		if err := sip.ParseUri(sp.from, &fromURI); err != nil {
			med.close()
			return nil, fmt.Errorf("%w: bad From %q", ErrBadOptions, sp.from)
		}
	} else {
		fromURI = sip.Uri{Scheme: "sip", User: fromUser, Host: fromHost}
	}
	l := s.newLeg(true, med, log)
	l.sec = pol
	l.mediaCIDRs = sp.trunk.MediaCIDRs
	toURI := sip.Uri{Scheme: sp.target.Scheme, User: sp.target.User, Host: sp.target.Host, Port: sp.target.Port}
	l.d = dialog{
		callID: newUUID(), localTag: newTag(), local: fromURI, remote: toURI, localName: sp.fromName,
		remoteTarget: sp.target, transport: sp.transport, advertise: adv,
		localSeq: uint32(1 + time.Now().UnixNano()%1000),
	}
	l.d.dest = hostPortDefault(sp.target, sp.transport)
	if sp.transport == TLS { // issue 21: every request of the dialog uses the trunk's TLS configuration
		l.tlsTrunk = &sp.trunk
	}
	l.localSD = offer
	l.onEnd = c.legEnded
	if err := s.addLeg(l); err != nil {
		med.close()
		return nil, &DialError{Outcome: OutcomeFailed, Cause: err}
	}
	cleanup := func() { l.end(session.EndFailed, false, "") }
	if sp.transport == TLS { // issue 21: the trunk's own verified connection
		if err := s.ensureTLS(ctx, sp.trunk, l.d.dest); err != nil {
			cleanup()
			o, detail := outcomeOf(0, failUnreachable)
			return nil, &DialError{Outcome: o, Detail: detail, Reason: "TLS handshake failed", Cause: err}
		}
	}
	seExpires := s.o.SessionExpires
	authTries := 0
	redir := &redirector{s: s, check: sp.checkRedirect, tried: map[string]bool{}, onEvent: sp.onRedirect}
	for attempt := 0; attempt < 5+maxRedirects; attempt++ {
		l.mu.Lock()
		req := s.newRequest(&l.d, sip.INVITE, 0)
		seq := req.CSeq().SeqNo
		l.inviteSeq = seq
		l.mu.Unlock()
		req.AppendHeader(sip.NewHeader("Allow", allowMethods))
		req.AppendHeader(sip.NewHeader("Supported", supportedOptions))
		req.AppendHeader(sip.NewHeader("Session-Expires", seconds(seExpires)))
		req.AppendHeader(sip.NewHeader("Min-SE", seconds(s.o.MinSE)))
		if strings.HasPrefix(fromUser, "+") {
			req.AppendHeader(sip.NewHeader("P-Asserted-Identity", "<sip:"+fromUser+"@"+fromHost+">"))
		}
		for k, v := range sp.headers {
			if isToken(k) && !strings.ContainsAny(v, "\r\n") {
				req.AppendHeader(sip.NewHeader(k, v))
			}
		}
		if auth := l.pendingAuth; auth != nil {
			req.AppendHeader(auth)
		}
		req.AppendHeader(sip.NewHeader("Content-Type", "application/sdp"))
		req.SetBody(offer.Marshal())
		res, fail, err := s.runInvite(ctx, l, req, sp, log)
		switch {
		case fail != failNone:
			cleanup()
			o, detail := outcomeOf(0, fail)
			reason := "ring timeout"
			switch fail {
			case failCanceled:
				reason = "cancelled"
			case failUnreachable:
				reason = "no response"
				if isTLSVerifyError(err) { // issue 21
					reason = "TLS handshake failed"
				}
			}
			de := &DialError{Outcome: o, Detail: detail, Reason: reason, Cause: err}
			if fail == failRingTimeout {
				de.Q850 = Q850NoAnswer // what our CANCEL said
			}
			return nil, de
		case err != nil:
			cleanup()
			return nil, &DialError{Outcome: OutcomeFailed, Cause: err}
		case res.IsSuccess():
			return l, nil
		case (res.StatusCode == 401 || res.StatusCode == 407) && authTries < 2 && sp.trunk.Username != "":
			authTries++
			if err := applyDigest(req, res, sp.trunk.Username, sp.trunk.Password); err != nil {
				cleanup()
				return nil, &DialError{Outcome: OutcomeFailed, Status: res.StatusCode, Reason: res.Reason, Cause: err}
			}
			name := "Authorization"
			if res.StatusCode == 407 {
				name = "Proxy-Authorization"
			}
			l.pendingAuth = req.GetHeader(name)
			log.Info("sip: INVITE challenged; retrying with credentials", "status", res.StatusCode)
			continue
		case res.StatusCode == 422:
			if m := parseMinSE(res); m > seExpires {
				seExpires = m
				continue
			}
		case res.StatusCode >= 300 && res.StatusCode < 400: // issue 21: follow the redirect
			redir.take(res, sp.target)
		}
		if res.StatusCode >= 300 && len(redir.queue) > 0 {
			if next, ok := redir.next(ctx); ok {
				log.Info("sip: INVITE redirected", "status", res.StatusCode, "to", next.String())
				l.retarget(next, &sp)
				if sp.transport == TLS {
					if err := s.ensureTLS(ctx, sp.trunk, l.d.dest); err != nil {
						cleanup()
						return nil, &DialError{Outcome: OutcomeFailed, Reason: "TLS handshake failed", Cause: err}
					}
				}
				continue
			}
		}
		cleanup()
		o, detail := outcomeOf(res.StatusCode, failNone)
		return nil, &DialError{Outcome: o, Status: res.StatusCode, Reason: res.Reason, Detail: detail, Q850: reasonQ850(res)}
	}
	cleanup()
	return nil, &DialError{Outcome: OutcomeFailed, Reason: "too many retries"}
}

// runInvite sends one INVITE and waits for its final response, handling provisional ones
// (ringing, early media), the ring timeout and cancellation (CANCEL, RFC 3261 §9.1). On a 2xx
// it confirms the dialog and sends the ACK.
func (s *Server) runInvite(ctx context.Context, l *leg, req *sip.Request, sp dialSpec, log *slog.Logger) (*sip.Response, dialFailure, error) {
	tx, err := s.cli.TransactionRequest(s.ctx, req, noBuild)
	if err != nil {
		return nil, failUnreachable, err
	}
	defer tx.Terminate()
	ring := time.NewTimer(sp.ringTimeout)
	defer ring.Stop()
	var (
		cancelled  dialFailure
		cancelSent bool
		ringing    bool
		gotResp    bool
		cancelWait <-chan time.Time
		rel        uacPrack // issue 21: 100rel
	)
	sendCancel := func(why dialFailure) {
		if cancelSent {
			return
		}
		cancelled, cancelSent = why, true
		if !gotResp {
			// RFC 3261 §9.1: no CANCEL before a provisional response; wait for one (or the end).
			cancelSent = false
			return
		}
		s.sendCancel(req, why)
		cancelWait = time.After(32 * time.Second)
	}
	done := ctx.Done()
	for {
		select {
		case res := <-tx.Responses():
			gotResp = true
			s.observeResponse(false, res.StatusCode)
			if res.IsProvisional() {
				if cancelled != failNone && !cancelSent {
					sendCancel(cancelled)
				}
				if res.StatusCode > 100 && requires100rel(res) && cancelled == failNone {
					s.prack(l, req, res, &rel)
				}
				if res.StatusCode >= 180 && !ringing {
					ringing = true
					if sp.onRinging != nil {
						sp.onRinging()
					}
				}
				if len(res.Body()) > 0 && res.StatusCode >= 180 {
					s.earlyMedia(l, res)
				}
				continue
			}
			if res.IsSuccess() {
				if err := s.acceptAnswer(l, req, res); err != nil {
					return nil, failNone, err
				}
				if cancelled != failNone {
					// The 200 crossed our CANCEL: the call is up; end it properly.
					l.end(session.EndFailed, true, "cancelled")
					return nil, cancelled, nil
				}
				log.Info("sip: outbound call answered", "status", res.StatusCode)
				return res, failNone, nil
			}
			if cancelled != failNone && res.StatusCode == 487 {
				return res, cancelled, nil
			}
			return res, failNone, nil
		case <-ring.C:
			log.Info("sip: ring timeout; cancelling", "after", sp.ringTimeout.String())
			sendCancel(failRingTimeout)
			if !gotResp {
				return nil, failRingTimeout, nil
			}
		case <-done:
			done = nil
			sendCancel(failCanceled)
			if !gotResp {
				return nil, failCanceled, nil
			}
		case <-cancelWait:
			return nil, cancelled, nil
		case <-tx.Done():
			if cancelled != failNone {
				return nil, cancelled, nil
			}
			if !gotResp {
				return nil, failUnreachable, tx.Err()
			}
			return nil, failNone, fmt.Errorf("sip: INVITE transaction ended: %w", tx.Err())
		}
	}
}

// sendCancel cancels our pending INVITE req (RFC 3261 §9.1): same Request-URI, Call-ID, From,
// To, CSeq number and top Via, method CANCEL. Its Reason (RFC 3326) says why: Q.850 cause 19
// (no answer from user) for the ring timeout, 487 with cause 16 (normal clearing) otherwise.
func (s *Server) sendCancel(invite *sip.Request, why dialFailure) {
	c := sip.NewRequest(sip.CANCEL, *invite.Recipient.Clone())
	if via := invite.Via(); via != nil {
		c.AppendHeader(via.Clone())
	}
	mf := sip.MaxForwardsHeader(70)
	c.AppendHeader(&mf)
	for _, name := range []string{"From", "To", "Call-ID", "Route"} {
		for _, h := range invite.GetHeaders(name) {
			c.AppendHeader(sip.HeaderClone(h))
		}
	}
	c.AppendHeader(&sip.CSeqHeader{SeqNo: invite.CSeq().SeqNo, MethodName: sip.CANCEL})
	reason := reasonHeader(487, "call cancelled")
	if why == failRingTimeout {
		reason = `Q.850;cause=19;text="no answer"`
	}
	c.AppendHeader(sip.NewHeader("Reason", reason))
	c.SetTransport(invite.Transport())
	c.SetDestination(invite.Destination())
	c.Laddr = invite.Laddr
	c.SetBody(nil)
	s.goBackground(func(ctx context.Context) {
		ctx, cancel := context.WithTimeout(ctx, 32*time.Second)
		defer cancel()
		if _, err := s.do(ctx, c); err != nil {
			s.log.Debug("sip: CANCEL unanswered", "err", err)
		}
	})
}

// earlyMedia starts the audio of an early dialog from a 18x with SDP (RFC 3261 §13.2.1,
// RFC 3960): ringback or announcements flow before the answer.
func (s *Server) earlyMedia(l *leg, res *sip.Response) {
	sd, err := ParseSDP(res.Body())
	if err != nil {
		return
	}
	n, err := takeAnswerSRTP(sd, s.o.Codecs, l.offerSD(), l.sec)
	if err != nil {
		return
	}
	l.mu.Lock()
	if l.d.remoteTag == "" {
		l.d.remoteTag = toTag(res)
	}
	l.neg, l.haveNeg = n, true
	l.mu.Unlock()
	if err := l.med.start(s.ctx, n); err != nil {
		l.log.Info("sip: early media failed", "err", err)
	}
}

// acceptAnswer takes the 2xx of our INVITE: the dialog's remote tag, target and route set, the
// SDP answer and session timer; it sends the ACK and confirms the leg.
func (s *Server) acceptAnswer(l *leg, req *sip.Request, res *sip.Response) error {
	seq := req.CSeq().SeqNo
	l.mu.Lock()
	l.d.remoteTag = toTag(res)
	if ct := res.Contact(); ct != nil {
		l.d.remoteTarget = *ct.Address.Clone()
	}
	l.d.routes = recordRoutes(res, true)
	if len(l.d.routes) == 0 {
		l.d.dest = "" // in-dialog requests go to the remote target (its Contact)
		// Keep sending where the INVITE went when the Contact is unroutable from here (a
		// private address behind the trunk's NAT).
		if a, err := netip.ParseAddr(l.d.remoteTarget.Host); err == nil && a.IsPrivate() && !isLoopbackOrPrivateHere(a) {
			l.d.dest = req.Destination()
		}
	}
	l.st = uacSessionTimer(res)
	l.mu.Unlock()
	l.sendAck(seq, nil)
	sd, err := ParseSDP(res.Body())
	if err != nil {
		l.end(session.EndFailed, true, "no usable SDP answer")
		return &DialError{Outcome: OutcomeFailed, Status: res.StatusCode, Reason: "bad SDP answer", Cause: err}
	}
	n, err := takeAnswerSRTP(sd, s.o.Codecs, l.offerSD(), l.sec)
	if err != nil {
		if isSRTPError(err) {
			l.end(session.EndFailed, true, "SRTP negotiation failed")
			return &DialError{Outcome: OutcomeFailed, Status: 488, Reason: "SRTP negotiation failed", Cause: err}
		}
		l.end(session.EndFailed, true, "no common codec")
		return &DialError{Outcome: OutcomeFailed, Status: 488, Reason: "no common codec", Cause: err}
	}
	if !mediaAllowed(l.mediaCIDRs, n.Remote) { // issue 22 item 7
		l.end(session.EndFailed, true, "media address not allowed")
		return &DialError{Outcome: OutcomeFailed, Reason: "media address " + n.Remote.Addr().String() + " outside the trunk's media networks"}
	}
	l.mu.Lock()
	l.neg, l.haveNeg = n, true
	l.mu.Unlock()
	if err := l.med.start(s.ctx, n); err != nil {
		l.end(session.EndFailed, true, "media failed")
		return &DialError{Outcome: OutcomeFailed, Reason: "media failed", Cause: err}
	}
	l.confirm()
	return nil
}

// isLoopbackOrPrivateHere reports whether a is an address this host itself could reach
// directly: one of our own networks. A private Contact outside them is behind the peer's NAT.
func isLoopbackOrPrivateHere(a netip.Addr) bool {
	ifaces, err := net.InterfaceAddrs()
	if err != nil {
		return true
	}
	for _, ia := range ifaces {
		if p, err := netip.ParsePrefix(ia.String()); err == nil && p.Contains(a) {
			return true
		}
	}
	return false
}

// runAMD classifies the callee, reports it, and hangs up or starts the conversation.
func (c *Call) runAMD(a *AMD, o AMDOptions) {
	defer c.s.wg.Done()
	l := c.primary.Load()
	decided := make(chan AMDResult, 1)
	ready := make(chan struct{})
	waitBeep := false
	var readyOnce bool
	// The detector runs on the leg's media goroutine, frame by frame.
	l.med.setSink(func(f *media.Frame) {
		if !a.decided {
			if a.Process(f) {
				decided <- a.Result()
				waitBeep = a.Result().Class == AMDMachine && o.OnMachine == AMDLeaveMessage
			}
			return
		}
		if waitBeep && !readyOnce {
			a.Process(f)
			if a.ReadyForMessage() {
				readyOnce = true
				close(ready)
			}
		}
	})
	var res AMDResult
	select {
	case res = <-decided:
	case <-c.done:
		return
	}
	c.mu.Lock()
	c.amd = res
	c.mu.Unlock()
	c.log.Info("sip: answering-machine detection", "class", string(res.Class), "reason", res.Reason,
		"greeting", res.Greeting.String(), "words", res.Words, "beep", res.Beep)
	c.emit(Event{Kind: EventAMD, AMD: res})
	if res.Class == AMDMachine {
		switch o.OnMachine {
		case AMDHangup:
			l.med.setSink(nil)
			c.hangup(session.EndVoicemail, "voicemail")
			return
		case AMDLeaveMessage:
			select {
			case <-ready:
			case <-c.done:
				return
			}
			c.mu.Lock()
			c.amd = a.Result()
			c.mu.Unlock()
		}
	}
	l.med.setSink(nil)
	if err := c.startConversation(); err != nil {
		c.log.Warn("sip: conversation failed to start", "err", err)
		c.hangup(session.EndFailed, "conversation failed")
		return
	}
	if res.Class == AMDMachine && o.OnMachine == AMDLeaveMessage && o.Message != "" {
		// The message is said, then the call ends as a voicemail left (the command channel
		// answers when it was spoken or the conversation ended).
		r := <-c.Conversation().Execute(session.Command{Kind: session.CommandSay, Text: o.Message, Interrupt: true})
		if r.Status == session.CommandDone {
			c.hangup(session.EndVoicemail, "message left")
		}
	}
}
