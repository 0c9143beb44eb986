package webrtc

import (
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/parley-voice/parley/session"
)

// Signalling and data-channel messages are JSON objects with a "type". The browser client
// (static/parley.js) is their other end; see README.md for the protocol.
//
// Page → service, on the WebSocket:
//
//	join      {token, tracks?}        first message: authenticate with the token
//	resume    {session, secret}       first message of a reconnected WebSocket
//	offer     {sdp}                   SDP offer (RFC 8829 JSEP); again with new ICE credentials to restart ICE
//	candidate {candidate}             trickle ICE (RFC 8838); candidate null ends the candidates
//	ping      {seq}                   heartbeat
//	hangup, text {text}, dtmf {digits}, takeover {on}  as on the data channel
//
// Service → page, on the WebSocket:
//
//	welcome   {session, secret, role, ...}  the join was accepted
//	answer    {sdp}
//	candidate {candidate}
//	pong      {seq}
//	restart                                  the service lost ICE: please restart it
//	bye       {reason}                       the call is over
//	error     {code, message}                refused; the socket closes after it
//
// On the data channel "parley" (page ↔ service): ping/pong, text, dtmf, hangup, takeover
// from the page; line, interim, agent_saying {reply, text} (the agent speaking, issue 22),
// state, takeover, ended from the service.
type message struct {
	Type string `json:"type"`

	// join / resume
	Token   string `json:"token,omitempty"`
	Tracks  string `json:"tracks,omitempty"` // listeners: "mixed" (default) or "split"
	Session string `json:"session,omitempty"`
	Secret  string `json:"secret,omitempty"`

	// offer / answer / candidate
	SDP       string          `json:"sdp,omitempty"`
	Candidate json.RawMessage `json:"candidate,omitempty"`

	Seq    int64  `json:"seq,omitempty"`
	Text   string `json:"text,omitempty"`
	Digits string `json:"digits,omitempty"`
	On     *bool  `json:"on,omitempty"`

	// service → page
	Reason  string        `json:"reason,omitempty"`
	Code    string        `json:"code,omitempty"`
	Message string        `json:"message,omitempty"`
	Welcome *welcome      `json:"welcome,omitempty"`
	Line    *session.Line `json:"line,omitempty"`
	State   string        `json:"state,omitempty"`
	Reply   int           `json:"reply,omitempty"` // agent_saying: the reply the chunk belongs to
}

// welcome tells the page who it is in the call and how to behave.
type welcome struct {
	Session         string      `json:"session"`
	Secret          string      `json:"secret"`
	Role            string      `json:"role"` // caller, listener, takeover
	CallID          string      `json:"call_id,omitempty"`
	ConversationID  string      `json:"conversation_id,omitempty"`
	ParticipantName string      `json:"participant_name,omitempty"`
	AgentName       string      `json:"agent_name,omitempty"`
	HeartbeatMS     int64       `json:"heartbeat_ms"`
	GraceMS         int64       `json:"grace_ms"`
	ICEServers      []iceServer `json:"ice_servers"`
	// Receive is how many audio tracks the service sends (listeners: 1 mixed or 2 split);
	// Send says whether it wants the page's microphone.
	Receive int  `json:"receive"`
	Send    bool `json:"send"`
}

// iceServer is RTCIceServer as the page's RTCPeerConnection takes it.
type iceServer struct {
	URLs       []string `json:"urls"`
	Username   string   `json:"username,omitempty"`
	Credential string   `json:"credential,omitempty"`
}

// Limits on what a page may send.
const (
	maxMessageBytes = 64 << 10 // an SDP offer is a few kilobytes
	maxTextRunes    = 2000
	maxDigits       = 32
)

// parseMessage decodes and checks one message from a page.
func parseMessage(b []byte) (message, error) {
	var m message
	if len(b) > maxMessageBytes {
		return m, fmt.Errorf("%w: message of %d bytes is too large", ErrBadMessage, len(b))
	}
	if err := json.Unmarshal(b, &m); err != nil {
		return message{}, fmt.Errorf("%w: %v", ErrBadMessage, err)
	}
	switch m.Type {
	case "join":
		if m.Token == "" {
			return m, fmt.Errorf("%w: join without a token", ErrBadMessage)
		}
		if m.Tracks != "" && m.Tracks != "mixed" && m.Tracks != "split" {
			return m, fmt.Errorf("%w: tracks must be mixed or split", ErrBadMessage)
		}
	case "resume":
		if m.Session == "" || m.Secret == "" {
			return m, fmt.Errorf("%w: resume needs session and secret", ErrBadMessage)
		}
	case "offer":
		if !strings.HasPrefix(m.SDP, "v=0") {
			return m, fmt.Errorf("%w: offer without an SDP", ErrBadMessage)
		}
	case "candidate":
		if len(m.Candidate) == 0 {
			return m, fmt.Errorf("%w: candidate missing", ErrBadMessage)
		}
	case "text":
		m.Text = strings.TrimSpace(m.Text)
		if m.Text == "" || !utf8.ValidString(m.Text) || utf8.RuneCountInString(m.Text) > maxTextRunes {
			return m, fmt.Errorf("%w: text must be 1 to %d characters", ErrBadMessage, maxTextRunes)
		}
	case "dtmf":
		if m.Digits == "" || len(m.Digits) > maxDigits || strings.Trim(m.Digits, "0123456789*#ABCDabcd") != "" {
			return m, fmt.Errorf("%w: dtmf digits must be 1 to %d of 0-9 * # A-D", ErrBadMessage, maxDigits)
		}
		m.Digits = strings.ToUpper(m.Digits)
	case "takeover":
		if m.On == nil {
			return m, fmt.Errorf("%w: takeover needs on", ErrBadMessage)
		}
	case "ping", "hangup":
	default:
		return m, fmt.Errorf("%w: unknown type %q", ErrBadMessage, m.Type)
	}
	return m, nil
}
