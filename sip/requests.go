package sip

import (
	"strings"
	"time"

	"github.com/emiago/sipgo/sip"
)

// supportedRequire lists the option tags Parley accepts in Require (RFC 3261 §8.2.2.3).
var supportedRequire = map[string]bool{"timer": true, "replaces": true, "100rel": true}

// routes registers the request handlers.
func (s *Server) routes() {
	s.srv.OnInvite(s.checked(s.onInvite))
	s.srv.OnAck(s.onAck)
	s.srv.OnCancel(s.checked(s.onCancel))
	for _, m := range []sip.RequestMethod{sip.BYE, sip.INFO, sip.NOTIFY, sip.REFER, sip.UPDATE, sip.PRACK} {
		s.srv.OnRequest(m, s.checked(s.inDialog))
	}
	s.srv.OnOptions(s.checked(s.onOptions))
	for _, m := range []sip.RequestMethod{sip.REGISTER, sip.SUBSCRIBE, sip.PUBLISH, sip.MESSAGE} {
		s.srv.OnRequest(m, s.checked(func(req *sip.Request, tx sip.ServerTransaction) {
			s.respond(tx, req, 405, newTag(), nil, sip.NewHeader("Allow", allowMethods))
		}))
	}
	s.srv.OnNoRoute(s.checked(func(req *sip.Request, tx sip.ServerTransaction) {
		// RFC 3261 §8.2.1: an unknown method is 501.
		s.respond(tx, req, 501, newTag(), nil, sip.NewHeader("Allow", allowMethods))
	}))
}

// checked wraps a handler with the checks RFC 3261 §8.2 asks of a UAS before it looks at a
// request, answering the ones that fail.
func (s *Server) checked(h func(*sip.Request, sip.ServerTransaction)) func(*sip.Request, sip.ServerTransaction) {
	return func(req *sip.Request, tx sip.ServerTransaction) {
		if !s.track() {
			return // closing: the transport is going away
		}
		defer s.wg.Done()
		defer func() {
			// Bad input gets an answer, never a crash of the server.
			if r := recover(); r != nil {
				s.log.Error("sip: handler panic", "method", string(req.Method), "panic", r)
				s.refuse(tx, req, &Refusal{Status: 500, Reason: "internal error"})
			}
		}()
		if r, extra := s.validate(req); r != nil {
			s.refuse(tx, req, r, extra...)
			return
		}
		h(req, tx)
	}
}

// validate applies RFC 3261 §8.2.1–§8.2.3 (and §16.3 for Max-Forwards) to a request.
func (s *Server) validate(req *sip.Request) (*Refusal, []sip.Header) {
	if req.SipVersion != "SIP/2.0" {
		return &Refusal{Status: 505, Reason: "version not supported"}, nil
	}
	for _, h := range []struct {
		name string
		ok   bool
	}{
		{"Via", req.Via() != nil}, {"From", req.From() != nil}, {"To", req.To() != nil},
		{"Call-ID", req.CallID() != nil && req.CallID().Value() != ""}, {"CSeq", req.CSeq() != nil},
	} {
		if !h.ok {
			return RefuseMalformed("missing " + h.name), nil
		}
	}
	for _, name := range []string{"From", "To", "Call-ID", "CSeq", "Max-Forwards"} {
		if len(req.GetHeaders(name)) > 1 {
			return RefuseMalformed("more than one " + name), nil // RFC 4475 §3.2.8
		}
	}
	if cs := req.CSeq(); !strings.EqualFold(string(cs.MethodName), string(req.Method)) {
		return RefuseMalformed("CSeq method " + string(cs.MethodName) + " does not match " + string(req.Method)), nil
	}
	switch strings.ToLower(req.Recipient.Scheme) {
	case "sip", "sips", "tel":
	default:
		return &Refusal{Status: 416, Reason: "unsupported URI scheme " + req.Recipient.Scheme}, nil
	}
	if mf := req.MaxForwards(); mf != nil && mf.Val() == 0 && req.Method != sip.OPTIONS && req.Method != sip.ACK {
		return &Refusal{Status: 483, Reason: "too many hops"}, nil
	}
	if req.Method != sip.ACK && req.Method != sip.CANCEL {
		var unknown []string
		for _, t := range headerList(req, "Require") {
			if !supportedRequire[t] {
				unknown = append(unknown, t)
			}
		}
		if len(unknown) > 0 {
			return &Refusal{Status: 420, Reason: "unsupported extension"},
				[]sip.Header{sip.NewHeader("Unsupported", strings.Join(unknown, ", "))}
		}
	}
	if enc := strings.ToLower(headerValue(req, "Content-Encoding")); enc != "" && enc != "identity" {
		return &Refusal{Status: 415, Reason: "unsupported content encoding"}, []sip.Header{sip.NewHeader("Accept-Encoding", "identity")}
	}
	if req.Method == sip.INVITE && len(req.Body()) > 0 {
		if ct := contentType(req); ct != "application/sdp" {
			return &Refusal{Status: 415, Reason: "unsupported body " + ct},
				[]sip.Header{sip.NewHeader("Accept", "application/sdp")}
		}
	}
	return nil, nil
}

// onAck routes an ACK for a 2xx to its leg; an ACK for nothing is dropped (RFC 3261 §17.2.3).
func (s *Server) onAck(req *sip.Request, tx sip.ServerTransaction) {
	if !s.track() {
		return
	}
	defer s.wg.Done()
	if l := s.findLeg(callID(req)); l != nil && l.matches(req) {
		l.handle(req, tx)
	}
}

// cancelWait is how long a CANCEL that matched no INVITE transaction waits for its INVITE:
// sipgo hands every request to its own goroutine, so a CANCEL sent right behind its INVITE can
// be looked at before the INVITE's transaction exists.
const cancelWait = 200 * time.Millisecond

// onCancel answers a CANCEL that sipgo matched to no INVITE transaction (it answers the others
// 200 and ends their INVITE with 487 itself). RFC 3261 §9.2: a CANCEL that matches a pending
// INVITE is answered 200 and the INVITE 487, whichever of the two was looked at first; so the
// CANCEL waits (briefly) for its INVITE to be registered and then ends it the same way. Only a
// CANCEL that matches nothing gets 481.
func (s *Server) onCancel(req *sip.Request, tx sip.ServerTransaction) {
	key := inviteKey(req)
	deadline := time.Now().Add(cancelWait)
	for {
		s.mu.Lock()
		inv := s.pending[key]
		s.mu.Unlock()
		if inv != nil {
			s.respond(tx, req, 200, toTag(req), nil)
			if r, ok := inv.(interface{ Receive(*sip.Request) error }); ok {
				_ = r.Receive(req) // the INVITE transaction answers 487 and runs its OnCancel
			}
			return
		}
		if time.Now().After(deadline) {
			break
		}
		select {
		case <-time.After(5 * time.Millisecond):
		case <-s.ctx.Done():
			return
		}
	}
	s.respond(tx, req, 481, newTag(), nil)
}

// inviteKey names an INVITE transaction as a CANCEL matches it (RFC 3261 §9.2, §17.2.3): the
// Call-ID and the branch of the top Via.
func inviteKey(req *sip.Request) string {
	branch := ""
	if v := req.Via(); v != nil {
		branch, _ = v.Params.Get("branch")
	}
	return callID(req) + "\x00" + branch
}

// addPending registers a new INVITE until it is answered, for onCancel; the returned func
// removes it.
func (s *Server) addPending(req *sip.Request, tx sip.ServerTransaction) func() {
	key := inviteKey(req)
	s.mu.Lock()
	s.pending[key] = tx
	s.mu.Unlock()
	return func() {
		s.mu.Lock()
		if s.pending[key] == tx {
			delete(s.pending, key)
		}
		s.mu.Unlock()
	}
}

// onOptions answers OPTIONS in or out of a dialog with our capabilities (RFC 3261 §11.2). Out of
// a dialog it is the keep-alive carriers send; while draining it is 503 so they route away.
func (s *Server) onOptions(req *sip.Request, tx sip.ServerTransaction) {
	if toTag(req) != "" {
		s.inDialog(req, tx)
		return
	}
	if s.Draining() {
		s.refuse(tx, req, RefuseDraining(s.o.DrainRetryAfter))
		return
	}
	s.respond(tx, req, 200, newTag(), nil,
		sip.NewHeader("Allow", allowMethods), sip.NewHeader("Accept", acceptTypes),
		sip.NewHeader("Accept-Encoding", "identity"), sip.NewHeader("Accept-Language", "en"),
		sip.NewHeader("Supported", supportedOptions))
}

// inDialog routes a request to its dialog's leg, or answers 481.
func (s *Server) inDialog(req *sip.Request, tx sip.ServerTransaction) {
	l := s.findLeg(callID(req))
	if l == nil || !l.matches(req) {
		s.respond(tx, req, 481, newTag(), nil)
		return
	}
	l.handle(req, tx)
}

// matches reports whether an in-dialog request belongs to the leg's dialog: our tag in To and
// the peer's in From (RFC 3261 §12.2.2). Before the peer's tag is known (early dialog of our own
// INVITE) only our tag is checked.
func (l *leg) matches(req *sip.Request) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if toTag(req) != l.d.localTag {
		return false
	}
	return l.d.remoteTag == "" || fromTag(req) == l.d.remoteTag
}
