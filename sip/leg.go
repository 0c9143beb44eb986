package sip

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/emiago/sipgo/sip"

	"github.com/parley-voice/parley/session"
)

type legState int

const (
	legEarly legState = iota
	legConfirmed
	legEnded
)

// leg is one SIP dialog with its audio stream: the caller's leg of an inbound call, the callee's
// of an outbound call, or the second leg of a warm transfer. It answers the in-dialog requests
// (BYE, re-INVITE, UPDATE, INFO, NOTIFY, REFER, OPTIONS), runs the session timer, and reports its
// end to its owner once.
type leg struct {
	s        *Server
	log      *slog.Logger
	outbound bool // Parley sent the INVITE (UAC)
	med      *legMedia

	mu        sync.Mutex
	d         dialog
	state     legState
	neg       Negotiated
	haveNeg   bool
	localSD   *SessionDescription // our current SDP
	inviteSeq uint32              // CSeq of our last INVITE (for its ACK)
	reinvite  bool                // an INVITE transaction of ours is in progress (glare: 491)
	st        sessionTimer
	stTimer   *time.Timer // the session timer (RFC 4028), guarded by mu
	ackCh     chan *sip.Request
	notifyCh  chan sipfrag
	onRefer   func(l *leg, req *sip.Request, tx sip.ServerTransaction)
	onMedia   func(l *leg, n Negotiated) // a re-INVITE or UPDATE changed the media (hold)
	// pendingAuth is the credentials header of our next INVITE after a 401/407.
	pendingAuth sip.Header
	// sec is the leg's SRTP policy (issue 21), set when the leg is made.
	sec srtpPolicy
	// rel is the UAS side of 100rel (issue 21, prack.go); nil until a reliable 1xx is sent.
	rel *reliable
	// mediaCIDRs are the networks the peer's SDP may put media at (the trunk's); nil any.
	mediaCIDRs []netip.Prefix
	// tlsTrunk is the trunk whose TLS configuration (CA, client certificate) connections for
	// this dialog's requests are made with (issue 21, tls.go); nil: not a TLS dialog.
	tlsTrunk *Trunk

	done      chan struct{}
	ending    atomic.Bool // end ran (a flag, not a sync.Once: end hooks may end this leg again)
	endReason session.EndReason
	endDetail EndDetail // how it ended (issue 22 item 4); see enddetail.go
	onEnd     func(l *leg, reason session.EndReason)
}

// sipfrag is the status line a NOTIFY of a REFER subscription carries (RFC 3515 §2.4.5).
type sipfrag struct {
	status     int
	reason     string
	terminated bool
}

func (s *Server) newLeg(outbound bool, med *legMedia, log *slog.Logger) *leg {
	return &leg{
		s: s, log: log, outbound: outbound, med: med,
		ackCh:    make(chan *sip.Request, 1),
		notifyCh: make(chan sipfrag, 8),
		done:     make(chan struct{}),
	}
}

// ended reports whether the leg is over.
func (l *leg) ended() bool {
	select {
	case <-l.done:
		return true
	default:
		return false
	}
}

// confirm marks the dialog confirmed and starts watching it: the leg ends on RTP inactivity
// and on session expiry, and refreshes the session when Parley is the refresher. Both are
// callbacks (legMedia's timeout hook, a timer), not a goroutine waiting for the call's life.
func (l *leg) confirm() {
	l.mu.Lock()
	if l.state != legEarly {
		l.mu.Unlock()
		return
	}
	l.state = legConfirmed
	l.mu.Unlock()
	l.med.onTimeout(func() { l.end(session.EndMediaTimeout, true, "RTP timeout") })
	l.med.onSRTPFail(func() { l.end(session.EndFailed, true, "SRTP authentication failed") }) // issue 21
	l.armSessionTimer(0)
}

// end ends the leg once: it sends BYE when asked and the dialog is confirmed, stops the media
// and tells the owner.
func (l *leg) end(reason session.EndReason, bye bool, text string) {
	if !l.ending.CompareAndSwap(false, true) {
		return
	}
	func() {
		l.mu.Lock()
		confirmed := l.state == legConfirmed
		l.state = legEnded
		l.endReason = reason
		if l.endDetail.IsZero() {
			l.endDetail = ownEndDetail(reason, text)
		}
		if l.stTimer != nil {
			l.stTimer.Stop()
		}
		var byeReq *sip.Request
		if bye && confirmed {
			byeReq = l.s.newRequest(&l.d, sip.BYE, 0)
			if text != "" {
				byeReq.AppendHeader(sip.NewHeader("Reason", reasonHeader(200, text)))
			}
		}
		l.mu.Unlock()
		close(l.done)
		l.med.close()
		l.s.removeLeg(l)
		l.log.Info("sip: leg ended", "reason", string(reason), "bye_sent", byeReq != nil)
		if byeReq != nil {
			l.s.goBackground(func(ctx context.Context) {
				ctx, cancel := context.WithTimeout(ctx, 8*time.Second)
				defer cancel()
				if res, err := l.s.do(ctx, byeReq); err != nil {
					l.log.Debug("sip: BYE unanswered", "err", err)
				} else if res.StatusCode >= 300 {
					l.log.Debug("sip: BYE refused", "status", res.StatusCode)
				}
			})
		}
		if l.onEnd != nil {
			l.onEnd(l, reason)
		}
	}()
}

// armSessionTimer (re)starts the session timer: at the refresh time the session timer asks
// for, or after d when d > 0 (a glare retry). An ended leg or a session without a timer stops it.
func (l *leg) armSessionTimer(d time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.stTimer != nil {
		l.stTimer.Stop()
	}
	if l.state != legConfirmed || l.st.interval <= 0 {
		return
	}
	if d <= 0 {
		d = time.Until(l.st.next(time.Now()))
	}
	l.stTimer = time.AfterFunc(d, l.sessionTimerFired)
}

// sessionTimerFired ends the leg when the peer should have refreshed the session and did not,
// or refreshes it (a re-INVITE) when Parley is the refresher.
func (l *leg) sessionTimerFired() {
	if !l.s.track() {
		return
	}
	defer l.s.wg.Done()
	if l.ended() {
		return
	}
	l.mu.Lock()
	st := l.st
	l.mu.Unlock()
	if !st.weRefresh {
		l.log.Info("sip: session expired without a refresh", "interval", st.interval.String())
		l.end(session.EndNetworkLost, true, "session expired")
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 32*time.Second)
	stop := context.AfterFunc(l.s.ctx, cancel)
	err := l.sendReinvite(ctx, nil)
	stop()
	cancel()
	switch {
	case errors.Is(err, errGlare):
		l.armSessionTimer(retryDelay()) // RFC 3261 §14.1: retry after 2.1 to 4 s
	case err != nil:
		if l.ended() {
			return
		}
		l.log.Info("sip: session refresh failed", "err", err)
		l.end(session.EndNetworkLost, true, "session refresh failed")
	default:
		l.armSessionTimer(0)
	}
}

// markRefreshed restarts the session timer after a refresh either way.
func (l *leg) markRefreshed() { l.armSessionTimer(0) }

var errGlare = errors.New("sip: request pending (glare)")

// sendReinvite sends a re-INVITE with our current SDP (a session refresh, RFC 4028 §7.4) or with
// sd (a change of ours: hold, new codec order). It waits for the final response and ACKs a 2xx.
func (l *leg) sendReinvite(ctx context.Context, sd *SessionDescription) error {
	l.mu.Lock()
	if l.state != legConfirmed {
		l.mu.Unlock()
		return ErrNotEstablished
	}
	if l.reinvite {
		l.mu.Unlock()
		return errGlare
	}
	l.reinvite = true
	if sd != nil {
		sd.Origin = l.localSD.Origin
		sd.Origin.SessionVersion++
		l.localSD = sd
	}
	offerSD := l.localSD
	body := l.localSD.Marshal()
	req := l.s.newRequest(&l.d, sip.INVITE, 0)
	seq := req.CSeq().SeqNo
	l.inviteSeq = seq
	st := l.st
	l.mu.Unlock()
	defer func() {
		l.mu.Lock()
		l.reinvite = false
		l.mu.Unlock()
	}()
	req.AppendHeader(sip.NewHeader("Allow", allowMethods))
	req.AppendHeader(sip.NewHeader("Supported", supportedOptions))
	if st.interval > 0 {
		req.AppendHeader(sip.NewHeader("Session-Expires", seconds(st.interval)+";refresher=uac"))
		req.AppendHeader(sip.NewHeader("Min-SE", seconds(l.s.o.MinSE)))
	}
	req.AppendHeader(sip.NewHeader("Content-Type", "application/sdp"))
	req.SetBody(body)
	if err := l.s.tlsFor(ctx, req); err != nil {
		return fmt.Errorf("%w: %v", errNoFinal, err)
	}
	tx, err := l.s.cli.TransactionRequest(ctx, req, noBuild)
	if err != nil {
		return fmt.Errorf("%w: %v", errNoFinal, err)
	}
	defer tx.Terminate()
	for {
		select {
		case res := <-tx.Responses():
			l.s.observeResponse(false, res.StatusCode)
			switch {
			case res.IsProvisional():
				continue
			case res.IsSuccess():
				l.sendAck(seq, nil)
				if sd, err := ParseSDP(res.Body()); err == nil {
					if n, err := takeAnswerSRTP(sd, l.s.o.Codecs, offerSD, l.sec); err == nil {
						l.mu.Lock()
						n.Local = l.localSD.Media[0].Direction
						l.neg, l.haveNeg = n, true
						l.mu.Unlock()
						l.med.apply(n)
					}
				}
				if t := uacSessionTimer(res); t.interval > 0 {
					l.mu.Lock()
					l.st = t
					l.mu.Unlock()
				}
				l.markRefreshed()
				return nil
			case res.StatusCode == 491:
				// RFC 3261 §14.1: retry after a random 2.1–4 s (we own the Call-ID: 2.1–4).
				return errGlare
			case res.StatusCode == 481 || res.StatusCode == 408:
				return fmt.Errorf("sip: re-INVITE answered %d", res.StatusCode)
			default:
				// Any other failure leaves the session as it was (RFC 3261 §14.1).
				l.log.Info("sip: re-INVITE refused", "status", res.StatusCode)
				return nil
			}
		case <-tx.Done():
			return fmt.Errorf("%w: %v", errNoFinal, tx.Err())
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// sendAck sends the ACK for our INVITE with CSeq seq (RFC 3261 §13.2.2.4), with body (the
// answer to a late offer) when given.
func (l *leg) sendAck(seq uint32, body []byte) {
	l.mu.Lock()
	ack := l.s.newRequest(&l.d, sip.ACK, seq)
	l.mu.Unlock()
	if body != nil {
		ack.AppendHeader(sip.NewHeader("Content-Type", "application/sdp"))
	}
	ack.SetBody(body)
	if err := l.s.tlsFor(context.Background(), ack); err != nil {
		l.log.Info("sip: ACK not sent", "err", err)
		return
	}
	if err := l.s.cli.WriteRequest(ack, noBuild); err != nil {
		l.log.Debug("sip: ACK not sent", "err", err)
	}
}

// checkSeq applies RFC 3261 §12.2.2: a request with a CSeq lower than the last one is refused
// 500.
func (l *leg) checkSeq(req *sip.Request) bool {
	cs := req.CSeq()
	if cs == nil {
		return false
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.d.remoteSeqSet && cs.SeqNo < l.d.remoteSeq {
		return false
	}
	l.d.remoteSeq, l.d.remoteSeqSet = cs.SeqNo, true
	return true
}

// handle answers one in-dialog request.
func (l *leg) handle(req *sip.Request, tx sip.ServerTransaction) {
	if req.Method == sip.ACK {
		select {
		case l.ackCh <- req:
		default:
		}
		return
	}
	if !l.checkSeq(req) {
		l.s.respond(tx, req, 500, l.localTag(), nil, sip.NewHeader("Retry-After", "1"))
		return
	}
	switch req.Method {
	case sip.BYE:
		l.s.respond(tx, req, 200, l.localTag(), nil)
		l.log.Info("sip: BYE received", "reason", headerValue(req, "Reason"))
		l.setEndDetail(peerEndDetail(req, l.peerName()))
		l.end(session.EndCallerHungUp, false, "")
	case sip.INVITE:
		l.handleReinvite(req, tx)
	case sip.UPDATE:
		l.handleUpdate(req, tx)
	case sip.PRACK: // issue 21
		l.handlePrack(req, tx)
	case sip.INFO:
		l.handleInfo(req, tx)
	case sip.NOTIFY:
		l.handleNotify(req, tx)
	case sip.REFER:
		if l.onRefer == nil {
			l.s.respond(tx, req, 603, l.localTag(), nil)
			return
		}
		l.onRefer(l, req, tx)
	case sip.OPTIONS:
		l.s.respond(tx, req, 200, l.localTag(), nil, sip.NewHeader("Allow", allowMethods),
			sip.NewHeader("Accept", acceptTypes), sip.NewHeader("Supported", supportedOptions))
	default:
		l.s.respond(tx, req, 405, l.localTag(), nil, sip.NewHeader("Allow", allowMethods))
	}
}

func (l *leg) localTag() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.d.localTag
}

// handleReinvite answers a re-INVITE (RFC 3261 §14.2): with an offer, we answer it (hold,
// unhold, a new address, a new codec); without one we offer in the 200 and take the answer from
// the ACK. It also refreshes the session timer.
func (l *leg) handleReinvite(req *sip.Request, tx sip.ServerTransaction) {
	l.mu.Lock()
	if l.state != legConfirmed {
		l.mu.Unlock()
		l.s.respond(tx, req, 491, l.localTag(), nil, sip.NewHeader("Retry-After", "1"))
		return
	}
	if l.reinvite {
		l.mu.Unlock()
		l.s.respond(tx, req, 491, l.localTag(), nil)
		return
	}
	l.reinvite = true
	tag := l.d.localTag
	l.mu.Unlock()
	defer func() {
		l.mu.Lock()
		l.reinvite = false
		l.mu.Unlock()
	}()
	st, stHdrs, minSE := l.s.uasSessionTimer(req)
	if minSE > 0 {
		l.s.respond(tx, req, 422, tag, nil, sip.NewHeader("Min-SE", seconds(minSE)))
		return
	}
	body := req.Body()
	var (
		n       Negotiated
		answer  *SessionDescription
		lateOff bool
	)
	if len(body) > 0 {
		if ct := contentType(req); ct != "application/sdp" {
			l.s.respond(tx, req, 415, tag, nil, sip.NewHeader("Accept", "application/sdp"))
			return
		}
		offer, err := ParseSDP(body)
		if err != nil {
			l.s.refuse(tx, req, &Refusal{Status: 488, Reason: "malformed SDP", Warning: 399, Cause: err})
			return
		}
		l.mu.Lock()
		origin := l.localSD.Origin
		l.mu.Unlock()
		origin.SessionVersion++
		n, answer, err = answerOfferSRTP(offer, l.s.preferCurrent(l), l.med.local, origin, l.sec, l.keys())
		if err != nil {
			l.s.refuse(tx, req, refusalFor(err))
			return
		}
		if !mediaAllowed(l.mediaCIDRs, n.Remote) { // issue 22 item 7
			l.s.refuse(tx, req, RefuseMediaAddress(n.Remote.Addr()))
			return
		}
	} else {
		lateOff = true
		codecs := l.s.preferCurrent(l)
		l.mu.Lock()
		origin := l.localSD.Origin
		l.mu.Unlock()
		origin.SessionVersion++
		var err error
		if answer, err = buildOfferSRTP(codecs, l.med.local, origin, SendRecv, l.sec, l.keys()); err != nil {
			l.s.refuse(tx, req, refuseSRTP(err))
			return
		}
	}
	hdrs := append([]sip.Header{
		l.s.contact(l.d.transport, l.d.advertise),
		sip.NewHeader("Allow", allowMethods),
		sip.NewHeader("Supported", supportedOptions),
	}, stHdrs...)
	res := l.s.response(req, 200, tag, answer.Marshal(), hdrs...)
	l.mu.Lock()
	l.localSD = answer
	l.st = st
	if !lateOff {
		l.neg, l.haveNeg = n, true
	}
	l.mu.Unlock()
	if !lateOff {
		l.med.apply(n)
		l.log.Info("sip: re-INVITE answered", "codec", n.Audio.Name, "direction", string(n.Local), "remote", n.Remote.String())
		if l.onMedia != nil {
			l.onMedia(l, n)
		}
	}
	l.markRefreshed()
	ack, err := l.s.sendFinal(tx, res, req.CSeq().SeqNo, l.ackCh, l.done)
	if err != nil {
		l.log.Info("sip: no ACK for the re-INVITE's 200", "err", err)
		l.end(session.EndNetworkLost, true, "no ACK")
		return
	}
	if lateOff {
		sd, err := ParseSDP(ack.Body())
		if err != nil {
			l.log.Info("sip: late-offer re-INVITE ACK carried no usable answer", "err", err)
			return
		}
		n, err := takeAnswerSRTP(sd, l.s.o.Codecs, answer, l.sec)
		if err != nil {
			l.log.Info("sip: late-offer re-INVITE answer unusable", "err", err)
			return
		}
		l.mu.Lock()
		n.Local = SendRecv
		l.neg, l.haveNeg = n, true
		l.mu.Unlock()
		l.med.apply(n)
	}
}

// handleUpdate answers UPDATE (RFC 3311): a session refresh, or an offer answered at once.
func (l *leg) handleUpdate(req *sip.Request, tx sip.ServerTransaction) {
	tag := l.localTag()
	st, stHdrs, minSE := l.s.uasSessionTimer(req)
	if minSE > 0 {
		l.s.respond(tx, req, 422, tag, nil, sip.NewHeader("Min-SE", seconds(minSE)))
		return
	}
	var body []byte
	if len(req.Body()) > 0 {
		offer, err := ParseSDP(req.Body())
		if err != nil {
			l.s.refuse(tx, req, &Refusal{Status: 488, Reason: "malformed SDP", Warning: 399, Cause: err})
			return
		}
		l.mu.Lock()
		origin := l.localSD.Origin
		l.mu.Unlock()
		origin.SessionVersion++
		n, answer, err := answerOfferSRTP(offer, l.s.preferCurrent(l), l.med.local, origin, l.sec, l.keys())
		if err != nil {
			l.s.refuse(tx, req, refusalFor(err))
			return
		}
		l.mu.Lock()
		l.localSD, l.neg, l.haveNeg = answer, n, true
		l.mu.Unlock()
		l.med.apply(n)
		if l.onMedia != nil {
			l.onMedia(l, n)
		}
		body = answer.Marshal()
	}
	l.mu.Lock()
	l.st = st
	l.mu.Unlock()
	l.markRefreshed()
	l.s.respond(tx, req, 200, tag, body, append([]sip.Header{l.s.contact(l.d.transport, l.d.advertise)}, stHdrs...)...)
}

// handleInfo takes DTMF by SIP INFO (application/dtmf-relay, application/dtmf).
func (l *leg) handleInfo(req *sip.Request, tx sip.ServerTransaction) {
	tag := l.localTag()
	ct := contentType(req)
	if len(req.Body()) == 0 {
		l.s.respond(tx, req, 200, tag, nil) // an empty INFO is a keep-alive
		return
	}
	switch ct {
	case "application/dtmf-relay", "application/dtmf":
		d, err := parseDTMFInfo(ct, req.Body())
		if err != nil {
			l.s.respond(tx, req, 400, tag, nil, sip.NewHeader("Reason", reasonHeader(400, err.Error())))
			return
		}
		l.s.respond(tx, req, 200, tag, nil)
		l.med.deliverDTMFFromInfo(d)
	default:
		l.s.respond(tx, req, 415, tag, nil, sip.NewHeader("Accept", "application/dtmf-relay, application/dtmf"))
	}
}

// handleNotify takes the NOTIFYs of a REFER subscription (RFC 3515 §2.4.4).
func (l *leg) handleNotify(req *sip.Request, tx sip.ServerTransaction) {
	tag := l.localTag()
	ev := strings.ToLower(headerValue(req, "Event"))
	if ev == "" {
		ev = strings.ToLower(headerValue(req, "o"))
	}
	if !strings.HasPrefix(ev, "refer") {
		l.s.respond(tx, req, 489, tag, nil) // Bad Event (RFC 6665 §8.3.2)
		return
	}
	l.s.respond(tx, req, 200, tag, nil)
	frag, err := parseSipfrag(req.Body())
	if err != nil {
		l.log.Info("sip: NOTIFY with a bad sipfrag", "err", err)
		return
	}
	frag.terminated = strings.HasPrefix(strings.ToLower(headerValue(req, "Subscription-State")), "terminated")
	select {
	case l.notifyCh <- frag:
	default:
	}
}

// retryDelay is the RFC 3261 §14.1 wait after a 491.
func retryDelay() time.Duration { return 2100*time.Millisecond + rand.N(1900*time.Millisecond) }
