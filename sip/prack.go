package sip

// issue 21: reliable provisional responses (RFC 3262, 100rel) both ways.
//
// Inbound, an INVITE that requires or supports 100rel gets its early answer reliably: a 183
// Session Progress carrying the SDP answer (a 180 without body for a late offer), with
// Require: 100rel and an RSeq, retransmitted from T1 doubling until the PRACK that names it
// arrives. The final response waits for that PRACK; when none comes within PrackTimeout
// (64×T1 by default, RFC 3262 §3) the INVITE is refused 500 and the call ends failed.
//
// Early media: once the PRACK of a reliable 183 with the SDP answer has come, the caller hears
// the ring-back tone (440 + 480 Hz, 2 s on, 4 s off) on the early session until the call is
// answered (startEarlyMedia): the PRACK, like the ACK of a 200, shows that the INVITE's sender
// takes the session its SDP named, so RTP may go there. The agent's greeting waits for the
// answer: a caller is not billed, nor recorded, before it. The caller's silence during ringing
// does not count toward the RTP inactivity timeout.
//
// Outbound, Parley says Supported: 100rel, and answers each new reliable provisional response
// (RSeq one above the last) with a PRACK in the early dialog (RFC 3262 §4).

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/emiago/sipgo/sip"

	"github.com/parley-voice/parley/media"
)

// errNoPrack says a reliable provisional response was never acknowledged.
var errNoPrack = errors.New("sip: no PRACK for the reliable provisional response")

// reliable is the UAS side of 100rel for one leg.
type reliable struct {
	mu      sync.Mutex
	rseq    uint32 // the last RSeq sent
	cseq    uint32 // the INVITE's CSeq
	pending uint32 // the RSeq awaiting PRACK, 0 when none
	acked   chan struct{}
}

// wants100rel reports whether an INVITE requires or supports 100rel.
func wants100rel(req *sip.Request) bool {
	for _, name := range []string{"Require", "Supported"} {
		for _, t := range headerList(req, name) {
			if t == "100rel" {
				return true
			}
		}
	}
	return false
}

// requires100rel reports whether a response requires 100rel (a reliable provisional).
func requires100rel(res *sip.Response) bool {
	for _, t := range headerList(res, "Require") {
		if t == "100rel" {
			return true
		}
	}
	return false
}

// sendReliable sends a reliable provisional response to req and waits for its PRACK (or ctx,
// the leg's end, or the timeout).
func (s *Server) sendReliable(ctx context.Context, tx sip.ServerTransaction, req *sip.Request, l *leg, status int, tag string, body []byte, hdrs ...sip.Header) error {
	l.mu.Lock()
	if l.rel == nil {
		l.rel = &reliable{rseq: uint32(rand.IntN(1 << 30)), cseq: req.CSeq().SeqNo}
	}
	r := l.rel
	l.mu.Unlock()
	r.mu.Lock()
	r.rseq++
	rseq := r.rseq
	r.pending = rseq
	r.acked = make(chan struct{})
	acked := r.acked
	r.mu.Unlock()
	hdrs = append(hdrs, sip.NewHeader("Require", "100rel"), sip.NewHeader("RSeq", strconv.FormatUint(uint64(rseq), 10)))
	res := s.response(req, status, tag, body, hdrs...)
	s.observeResponse(true, status)
	if err := tx.Respond(res); err != nil {
		return err
	}
	timeout := s.o.PrackTimeout
	if timeout <= 0 {
		timeout = 64 * sip.T1
	}
	giveUp := time.NewTimer(timeout)
	defer giveUp.Stop()
	interval := sip.T1
	retrans := time.NewTimer(interval)
	defer retrans.Stop()
	for {
		select {
		case <-acked:
			return nil
		case <-retrans.C:
			if err := tx.Respond(res); err != nil {
				return err
			}
			interval = min(2*interval, sip.T2)
			retrans.Reset(interval)
		case <-giveUp.C:
			return fmt.Errorf("%w after %v", errNoPrack, timeout)
		case <-ctx.Done():
			return ctx.Err()
		case <-l.done:
			return ErrClosed
		}
	}
}

// handlePrack answers a PRACK (RFC 3262 §3): 200 when its RAck names the reliable provisional
// response awaiting it, else 481.
func (l *leg) handlePrack(req *sip.Request, tx sip.ServerTransaction) {
	f := strings.Fields(headerValue(req, "RAck"))
	l.mu.Lock()
	r := l.rel
	l.mu.Unlock()
	if r == nil || len(f) != 3 || !strings.EqualFold(f[2], "INVITE") {
		l.s.respond(tx, req, 481, l.localTag(), nil)
		return
	}
	rseq, err1 := strconv.ParseUint(f[0], 10, 32)
	cseq, err2 := strconv.ParseUint(f[1], 10, 32)
	r.mu.Lock()
	match := err1 == nil && err2 == nil && uint32(cseq) == r.cseq && r.pending != 0 && uint32(rseq) == r.pending
	if match {
		r.pending = 0
		close(r.acked)
	}
	r.mu.Unlock()
	if !match {
		l.s.respond(tx, req, 481, l.localTag(), nil)
		return
	}
	l.s.respond(tx, req, 200, l.localTag(), nil)
}

// ringReliably is the inbound call's early answer when the caller asked for 100rel: a reliable
// 183 with the SDP answer (or a reliable 180 for a late offer), acknowledged by PRACK.
func (s *Server) ringReliably(ctx context.Context, tx sip.ServerTransaction, req *sip.Request, l *leg, tag string, contact sip.Header, answer []byte) error {
	status := 183
	if answer == nil {
		status = 180
	}
	return s.sendReliable(ctx, tx, req, l, status, tag, answer, contact, sip.NewHeader("Allow", allowMethods))
}

// uacPrack is the UAC side of 100rel for one INVITE: the last RSeq acknowledged.
type uacPrack struct {
	last uint32
	have bool
}

// prack acknowledges a reliable provisional response res to our INVITE inv with a PRACK in
// its early dialog, unless it is a retransmission (or out of order, RFC 3262 §4).
func (s *Server) prack(l *leg, inv *sip.Request, res *sip.Response, st *uacPrack) {
	rseq, err := strconv.ParseUint(strings.TrimSpace(headerValue(res, "RSeq")), 10, 32)
	if err != nil || rseq == 0 {
		return // no usable RSeq: not a reliable response we can acknowledge
	}
	if st.have && uint32(rseq) != st.last+1 {
		return
	}
	st.last, st.have = uint32(rseq), true
	l.mu.Lock()
	d := l.d
	d.remoteTag = toTag(res)
	if ct := res.Contact(); ct != nil {
		d.remoteTarget = *ct.Address.Clone()
	}
	if rr := recordRoutes(res, true); len(rr) > 0 {
		d.routes = rr
	}
	req := s.newRequest(&d, sip.PRACK, 0)
	l.d.localSeq = d.localSeq // the PRACK used a CSeq number of the dialog
	l.mu.Unlock()
	req.AppendHeader(sip.NewHeader("RAck", fmt.Sprintf("%d %d INVITE", rseq, inv.CSeq().SeqNo)))
	s.goBackground(func(ctx context.Context) {
		ctx, cancel := context.WithTimeout(ctx, 32*time.Second)
		defer cancel()
		res, err := s.do(ctx, req)
		switch {
		case err != nil:
			l.log.Info("sip: PRACK unanswered", "err", err)
		case res.StatusCode >= 300:
			l.log.Info("sip: PRACK refused", "status", res.StatusCode)
		}
	})
}

// startEarlyMedia starts the leg's media on the early session n with the ring-back tone as its
// only audio (see the file comment); the answer's apply (legMedia.start on a started stream)
// brings the receive side's inactivity watch back, and the answer clears the filler.
func (m *legMedia) startEarlyMedia(ctx context.Context, n Negotiated) error {
	m.setFiller(newRingback(media.PipelineRate).fill)
	if err := m.start(ctx, n); err != nil {
		m.setFiller(nil)
		return err
	}
	m.receiving.Store(false) // ringing: the caller's silence is no inactivity
	m.acked()
	return nil
}
