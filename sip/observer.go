package sip

import "github.com/parley-voice/parley/session"

// Observer receives what the server counts, for metrics (control implements it over
// Prometheus). Its methods are called from the server's goroutines, never per RTP packet, and
// must not block.
type Observer interface {
	// CallStarted: a call was taken (inbound, routed) or placed (outbound).
	CallStarted(dir CallDirection)
	// CallEnded: the call is over, with its end reason and its media statistics.
	CallEnded(dir CallDirection, reason session.EndReason, st CallStats)
	// Response: a final or provisional SIP response was sent (sent) or received; the
	// retransmissions of a 2xx are not counted.
	Response(sent bool, status int)
}

func (s *Server) observeResponse(sent bool, status int) {
	if s.o.Observer != nil {
		s.o.Observer.Response(sent, status)
	}
}
