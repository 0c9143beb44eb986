package sip

import (
	"context"
	"errors"
	"net/textproto"
	"strings"
	"sync/atomic"
	"time"

	"github.com/emiago/sipgo/sip"

	"github.com/parley-voice/parley/session"
)

// onInvite takes an INVITE: a re-INVITE goes to its dialog, a new one is a new inbound call.
func (s *Server) onInvite(req *sip.Request, tx sip.ServerTransaction) {
	if toTag(req) != "" {
		s.inDialog(req, tx)
		return
	}
	s.inbound(req, tx)
}

// inbound runs a new inbound call up to the ACK of its 200 (RFC 3261 §13.3): 100 Trying at
// once; the trunk, authentication, SDP, session-timer and routing checks, each refusing with
// its status and Reason; 180 Ringing; the conversation built; 200 OK with the SDP answer (or an
// offer, for an INVITE without SDP), retransmitted until the ACK; then the conversation starts.
// CANCEL at any point before the 200 ends it with 487 (sipgo answers the CANCEL and the INVITE).
func (s *Server) inbound(req *sip.Request, tx sip.ServerTransaction) {
	unpend := s.addPending(req, tx)
	defer unpend()
	// A 100 that cannot go (a CANCEL already ended the transaction) does not stop the call
	// from being routed and recorded as cancelled.
	_ = s.respond(tx, req, 100, "", nil)
	// ctx ends when the caller cancels; the checks and the router run on the server's context
	// all the same, so that a cancelled call the router took is recorded (and ended) like any
	// other, not refused as a routing failure.
	ctx, cancel := context.WithCancel(s.ctx)
	defer cancel()
	var cancelReq atomic.Pointer[sip.Request] // the caller's CANCEL: its Reason goes in the end detail
	if !tx.OnCancel(func(r *sip.Request) { cancelReq.Store(r); cancel() }) {
		cancel() // cancelled already: the INVITE was answered 487
	}
	src := messageSource(req)
	tp := transportOf(req.Transport())
	log := s.log.With("sip_call_id", callID(req), "source", src.String(), "transport", string(tp))

	if s.Draining() {
		s.refuse(tx, req, RefuseDraining(s.o.DrainRetryAfter))
		return
	}
	if s.o.Trunks == nil {
		s.refuse(tx, req, RefuseSource())
		return
	}
	trunk, byCert, err := Trunk{}, false, error(nil)
	if tp == TLS { // issue 21: a client certificate names its trunk (mtls.go)
		trunk, byCert, err = s.matchTLSClient(s.ctx, src)
		if err != nil {
			s.refuse(tx, req, &Refusal{Status: 403, Reason: "client certificate matches no trunk", Cause: err})
			return
		}
	}
	if !byCert {
		trunk, err = s.o.Trunks.MatchSource(s.ctx, src.Addr())
	}
	if err != nil {
		if t, ok := s.registeredTrunk(src.Addr()); ok { // issue 21: through a registered binding
			trunk, err = t, nil
		}
	}
	if err != nil {
		r := RefuseSource()
		r.Cause = err
		s.refuse(tx, req, r)
		return
	}
	log = log.With("trunk", trunk.Name)
	if byCert {
		log = log.With("trunk_by", "client certificate")
	}
	if trunk.InboundAuth {
		switch err := s.auth.verify(req, trunk.Username, trunk.Password); {
		case err == nil:
		case errors.Is(err, errNoCredentials), errors.Is(err, errStaleNonce):
			log.Info("sip: INVITE challenged", "why", err.Error())
			s.respond(tx, req, 401, newTag(), nil, s.auth.challenge(errors.Is(err, errStaleNonce)))
			return
		default:
			r := &Refusal{Status: 403, Reason: "authentication failed", Cause: err}
			s.refuse(tx, req, r)
			return
		}
	}
	contact := req.Contact()
	if contact == nil {
		s.refuse(tx, req, RefuseMalformed("INVITE without Contact"))
		return
	}
	var offer *SessionDescription
	if len(req.Body()) > 0 {
		if offer, err = ParseSDP(req.Body()); err != nil {
			r := RefuseMalformed("SDP")
			r.Cause = err
			s.refuse(tx, req, r)
			return
		}
		if audioSection(offer) < 0 {
			s.refuse(tx, req, RefuseNoCodec())
			return
		}
	}
	st, stHdrs, minSE := s.uasSessionTimer(req)
	if minSE > 0 {
		s.log.Info("sip: session interval too small", "call_id", callID(req))
		s.respond(tx, req, 422, newTag(), nil, sip.NewHeader("Min-SE", seconds(minSE)),
			sip.NewHeader("Reason", reasonHeader(422, "session interval too small")))
		return
	}

	toUser := userOf(req.Recipient)
	if toUser == "" {
		toUser = userOf(req.To().Address)
	}
	fromUser := userOf(req.From().Address)
	to, _ := NormalizeE164(toUser, s.o.DefaultCountryCode)
	from, _ := NormalizeE164(fromUser, s.o.DefaultCountryCode)
	ic := InboundCall{
		CallID: callID(req), To: to, From: from,
		ToURI: req.To().Address.String(), FromURI: req.From().Address.String(),
		FromName: req.From().DisplayName,
		Source:   src, Transport: tp, Trunk: trunk, Headers: interestingHeaders(req),
	}
	if s.o.Router == nil {
		s.refuse(tx, req, &Refusal{Status: 480, Reason: "no router"})
		return
	}
	plan, err := s.o.Router.Inbound(s.ctx, ic)
	if err != nil {
		var r *Refusal
		if !errors.As(err, &r) {
			r = &Refusal{Status: 500, Reason: "routing failed", Cause: err}
		}
		if ctx.Err() != nil && s.ctx.Err() == nil {
			log.Info("sip: caller cancelled; the call would have been refused", "status", r.Status, "reason", r.Reason)
			return
		}
		s.refuse(tx, req, r)
		return
	}
	if plan.Conversation == nil {
		s.refuse(tx, req, &Refusal{Status: 500, Reason: "routing failed", Cause: errors.New("plan without a conversation")})
		return
	}
	c := s.newCall(plan.ID, Inbound, trunk, from, to, plan.OnEvent, plan.Transfer)
	c.tap = plan.Tap
	log = log.With("call", c.id)
	// From here the router counted the call: every exit reports its end.
	fail := func(r *Refusal, reason session.EndReason) {
		s.refuse(tx, req, r)
		c.finish(reason)
	}
	if err := s.addCall(c); err != nil {
		switch {
		case errors.Is(err, ErrDraining), errors.Is(err, ErrClosed):
			fail(RefuseDraining(s.o.DrainRetryAfter), session.EndFailed)
		default:
			fail(RefuseOverLimit(5*time.Second), session.EndFailed)
		}
		return
	}
	med, err := s.newMedia(src.Addr(), log)
	if err != nil {
		r := &Refusal{Status: 503, Reason: "no media ports", RetryAfter: 5 * time.Second, Cause: err}
		fail(r, session.EndFailed)
		return
	}
	med.awaitAck.Store(true) // no packet toward the offer's address before the ACK (issue 22)
	tag := newTag()
	adv := s.advertise(src.Addr())
	origin := Origin{Username: "parley", SessionID: sdpSessionID(), Address: adv.String()}
	origin.SessionVersion = origin.SessionID
	var (
		n      Negotiated
		sdpOut *SessionDescription
	)
	pol := policyFor(trunk, tp) // issue 21: SRTP
	if offer != nil {
		n, sdpOut, err = answerOfferSRTP(offer, s.o.Codecs, med.local, origin, pol, nil)
		if err != nil {
			med.close()
			r := RefuseNoCodec()
			r.Cause = err
			if isSRTPError(err) {
				r = refuseSRTP(err)
			}
			fail(r, session.EndFailed)
			return
		}
		if !mediaAllowed(trunk.MediaCIDRs, n.Remote) { // issue 22 item 7
			med.close()
			fail(RefuseMediaAddress(n.Remote.Addr()), session.EndFailed)
			return
		}
	} else if sdpOut, err = buildOfferSRTP(s.o.Codecs, med.local, origin, SendRecv, pol, nil); err != nil {
		med.close()
		fail(refuseSRTP(err), session.EndFailed)
		return
	}
	l := s.newLeg(false, med, log)
	l.sec = pol
	l.mediaCIDRs = trunk.MediaCIDRs
	if tp == TLS { // issue 21: in-dialog requests use the trunk's TLS configuration
		l.tlsTrunk = &trunk
	}
	l.d = dialog{
		callID: callID(req), localTag: tag, remoteTag: fromTag(req),
		local: *req.To().Address.Clone(), remote: *req.From().Address.Clone(),
		localName: req.To().DisplayName, remoteName: req.From().DisplayName,
		remoteSeq: req.CSeq().SeqNo, remoteSeqSet: true,
		remoteTarget: *contact.Address.Clone(),
		routes:       recordRoutes(req, false),
		transport:    tp,
		dest:         src.String(),
		advertise:    adv,
	}
	if src.Addr().Is6() {
		l.d.dest = "[" + src.Addr().String() + "]:" + itoa(int(src.Port()))
	}
	l.localSD = sdpOut
	l.st = st
	if offer != nil {
		l.neg, l.haveNeg = n, true
	}
	if err := s.addLeg(l); err != nil {
		med.close()
		fail(&Refusal{Status: 482, Reason: "loop detected", Cause: err}, session.EndFailed)
		return
	}
	c.attach(l)
	cleanup := func(reason session.EndReason) {
		if reason == session.EndCallerHungUp {
			if r := cancelReq.Load(); r != nil {
				l.setEndDetail(peerEndDetail(r, "the caller"))
			} else {
				l.setEndDetail(EndDetail{Text: "the caller hung up before the answer"})
			}
		}
		l.end(reason, false, "")
		c.finish(reason)
	}
	if ctx.Err() != nil {
		log.Info("sip: caller cancelled before the call was answered")
		cleanup(session.EndCallerHungUp)
		return
	}

	contactHdr := s.contact(tp, adv)
	if wants100rel(req) { // issue 21: a reliable 183 with the answer, acknowledged by PRACK
		var early []byte
		if offer != nil {
			early = sdpOut.Marshal()
		}
		if err := s.ringReliably(ctx, tx, req, l, tag, contactHdr, early); err != nil {
			switch {
			case errors.Is(err, errNoPrack):
				log.Info("sip: no PRACK; refusing the call", "err", err)
				s.refuse(tx, req, &Refusal{Status: 500, Reason: "no PRACK", Cause: err})
				cleanup(session.EndFailed)
			default:
				cleanup(session.EndCallerHungUp)
			}
			return
		}
		if offer != nil { // issue 21: ring-back on the early session (prack.go)
			if err := med.startEarlyMedia(s.ctx, n); err != nil {
				log.Warn("sip: early media failed", "err", err)
			}
		}
	} else if err := s.respond(tx, req, 180, tag, nil, contactHdr, sip.NewHeader("Allow", allowMethods)); err != nil {
		cleanup(session.EndCallerHungUp)
		return
	}
	c.emit(Event{Kind: EventRinging})
	if plan.RingFor > 0 {
		t := time.NewTimer(plan.RingFor)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			log.Info("sip: caller cancelled while ringing")
			cleanup(session.EndCallerHungUp)
			return
		}
	}
	conv, err := plan.Conversation(ctx, c)
	if err != nil {
		if ctx.Err() != nil {
			cleanup(session.EndCallerHungUp)
			return
		}
		s.refuse(tx, req, &Refusal{Status: 480, Reason: "agent unavailable", Cause: err})
		cleanup(session.EndFailed)
		return
	}
	if !c.setConversation(conv) {
		// The caller hung up (a BYE on the 180's dialog) while the conversation was built.
		s.refuse(tx, req, &Refusal{Status: 487, Reason: "request terminated"})
		cleanup(session.EndCallerHungUp)
		return
	}
	if offer != nil {
		if err := med.start(s.ctx, n); err != nil {
			s.refuse(tx, req, &Refusal{Status: 500, Reason: "media failed", Cause: err})
			cleanup(session.EndFailed)
			return
		}
	}
	if ctx.Err() != nil {
		log.Info("sip: caller cancelled before the answer")
		cleanup(session.EndCallerHungUp)
		return
	}
	med.setFiller(nil) // issue 21: the ring-back of early media ends with the answer
	hdrs := append([]sip.Header{contactHdr, sip.NewHeader("Allow", allowMethods),
		sip.NewHeader("Supported", supportedOptions), sip.NewHeader("Accept", acceptTypes)}, stHdrs...)
	res := s.response(req, 200, tag, sdpOut.Marshal(), hdrs...)
	ack, err := s.sendFinal(tx, res, req.CSeq().SeqNo, l.ackCh, l.done)
	if err != nil {
		switch {
		case l.ended():
			// A BYE before the ACK (or the server closing) ended the leg and the call.
			log.Info("sip: call ended before the ACK", "reason", string(c.EndReason()))
			return
		case ctx.Err() != nil:
			log.Info("sip: caller cancelled before the answer")
			cleanup(session.EndCallerHungUp)
			return
		}
		log.Info("sip: no ACK for the 200", "err", err)
		l.confirm()
		l.end(session.EndNetworkLost, true, "no ACK")
		c.finish(session.EndNetworkLost)
		return
	}
	l.confirm()
	med.acked()
	if offer == nil {
		// Late offer: the answer is in the ACK (RFC 3261 §13.2.1).
		answer, err := ParseSDP(ack.Body())
		if err == nil {
			n, err = takeAnswerSRTP(answer, s.o.Codecs, sdpOut, pol)
		}
		if err != nil {
			log.Info("sip: late-offer ACK without a usable answer", "err", err)
			l.end(session.EndFailed, true, "no usable SDP answer in ACK")
			return
		}
		l.mu.Lock()
		l.neg, l.haveNeg = n, true
		l.mu.Unlock()
		if err := med.start(s.ctx, n); err != nil {
			log.Warn("sip: media failed", "err", err)
			l.end(session.EndFailed, true, "media failed")
			return
		}
	}
	if err := c.startConversation(); err != nil {
		log.Warn("sip: conversation failed to start", "err", err)
		l.end(session.EndFailed, true, "conversation failed")
		return
	}
	log.Info("sip: inbound call answered", "from", from, "to", to, "codec", n.Audio.Name,
		"remote_rtp", n.Remote.String(), "late_offer", offer == nil)
}

// recordRoutes returns the route set of a dialog from the Record-Route headers of the message
// that created it: in order for the UAS, reversed for the UAC (RFC 3261 §12.1.1, §12.1.2).
func recordRoutes(m sip.Message, reverse bool) []sip.Uri {
	var out []sip.Uri
	for _, h := range m.GetHeaders("Record-Route") {
		for _, part := range splitAddrList(h.Value()) {
			var u sip.Uri
			if _, err := sip.ParseAddressValue(part, &u, nil); err == nil {
				out = append(out, u)
			}
		}
	}
	if reverse {
		for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
			out[i], out[j] = out[j], out[i]
		}
	}
	return out
}

// splitAddrList splits a comma-separated name-addr list, respecting <> and quotes.
func splitAddrList(v string) []string {
	var out []string
	depth, quoted, start := 0, false, 0
	for i := 0; i < len(v); i++ {
		switch c := v[i]; {
		case c == '"':
			quoted = !quoted
		case quoted:
		case c == '<':
			depth++
		case c == '>':
			depth--
		case c == ',' && depth == 0:
			out = append(out, strings.TrimSpace(v[start:i]))
			start = i + 1
		}
	}
	if s := strings.TrimSpace(v[start:]); s != "" {
		out = append(out, s)
	}
	return out
}

// interestingHeaders copies the headers a router may care about: X- headers, Diversion and
// History-Info (RFC 7044), P-Asserted-Identity (RFC 3325).
func interestingHeaders(req *sip.Request) map[string]string {
	out := map[string]string{}
	for _, h := range req.Headers() {
		name := h.Name()
		lower := strings.ToLower(name)
		if strings.HasPrefix(lower, "x-") || lower == "diversion" || lower == "history-info" || lower == "p-asserted-identity" {
			key := textproto.CanonicalMIMEHeaderKey(name)
			if prev, ok := out[key]; ok {
				out[key] = prev + ", " + h.Value()
			} else {
				out[key] = h.Value()
			}
		}
	}
	return out
}

// sdpSessionID returns an o= session id: NTP-ish seconds, as RFC 8866 §5.2 suggests.
func sdpSessionID() uint64 { return uint64(time.Now().Unix()) + 2208988800 }

func itoa(n int) string {
	if n == 0 {
		return "0"
	}
	var b [20]byte
	i := len(b)
	for n > 0 {
		i--
		b[i] = byte('0' + n%10)
		n /= 10
	}
	return string(b[i:])
}
