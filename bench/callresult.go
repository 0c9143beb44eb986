package bench

import (
	"strings"
	"time"
)

// Call kinds.
const (
	KindSIP    = "sip"
	KindWebRTC = "webrtc"
)

// CallResult is everything one caller measured in one call.
type CallResult struct {
	Kind string `json:"kind"`
	// From is the caller's number (SIP) or participant name (WebRTC): unique per call, it finds
	// the conversation in the API.
	From           string `json:"from"`
	ConversationID string `json:"conversation_id,omitempty"`
	// Started is when the INVITE (or the join) was sent; Answered when the 200 OK arrived (or
	// the media connected); Ended when the caller hung up or was hung up on.
	Started  time.Time `json:"started"`
	Answered time.Time `json:"answered,omitempty"`
	Ended    time.Time `json:"ended,omitempty"`
	// Setup is INVITE to 200 OK for SIP, join to the first agent audio for WebRTC; Connect is
	// join to media connected (ICE and DTLS done) for WebRTC.
	Setup   time.Duration `json:"setup_ns"`
	Connect time.Duration `json:"connect_ns,omitempty"`
	Script  ScriptResult  `json:"script"`
	// What the caller's RTP receiver saw: packets, losses by sequence number, and the
	// interarrival jitter of RFC 3550 §6.4.1.
	PacketsReceived uint64        `json:"packets_received"`
	PacketsLost     int64         `json:"packets_lost"`
	Jitter          time.Duration `json:"jitter_ns"`
	SIPStatus       int           `json:"sip_status,omitempty"`
	// Failure is empty for a call that went as scripted; otherwise Reason is a short class
	// ("sip 503", "no greeting", …) for counting and Failure the whole story.
	Reason  string `json:"reason,omitempty"`
	Failure string `json:"failure,omitempty"`
}

// Failed reports whether the call failed.
func (r CallResult) Failed() bool { return r.Failure != "" }

// Duration is the time from the answer to the end.
func (r CallResult) Duration() time.Duration {
	if r.Answered.IsZero() || r.Ended.IsZero() {
		return 0
	}
	return r.Ended.Sub(r.Answered)
}

// LossFraction is the fraction of expected packets that never arrived.
func (r CallResult) LossFraction() float64 {
	exp := float64(r.PacketsReceived) + float64(max(r.PacketsLost, 0))
	if exp == 0 {
		return 0
	}
	return float64(max(r.PacketsLost, 0)) / exp
}

func (r *CallResult) fail(reason, detail string) {
	if r.Failure != "" {
		return
	}
	r.Reason, r.Failure = reason, strings.Join(strings.Fields(detail), " ")
}

// reasonOf classifies a script failure for counting.
func reasonOf(failure string) string {
	for _, p := range []string{"no greeting", "no reply", "the agent talked", "the agent hung up", "no utterances"} {
		if strings.HasPrefix(failure, p) {
			return p
		}
	}
	return "other"
}
