package sip

import (
	"context"
	"net/netip"
	"time"

	"github.com/parley-voice/parley/media"
	"github.com/parley-voice/parley/media/tts"
	"github.com/parley-voice/parley/session"
)

// Router decides what happens to an inbound call: the control plane implements it over its
// numbers, agents, projects, organizations and call counters.
type Router interface {
	// Inbound is asked once per new INVITE, after the trunk, authentication and SDP checks
	// passed. It returns a Plan to take the call, or an error: a *Refusal to answer with its
	// status and Reason (404 unknown number, 480 no published agent or project frozen, 403
	// organization out of credit or frozen, 503 over the limit, …); any other error is
	// answered 500. ctx ends when the server closes, not when the caller cancels: a call
	// cancelled while it is routed is taken all the same and then ends at once as
	// caller_hung_up (its INVITE answered 487), so every attempt that reached a plan is
	// recorded.
	Inbound(ctx context.Context, c InboundCall) (Plan, error)
}

// RouterFunc adapts a function to a Router.
type RouterFunc func(ctx context.Context, c InboundCall) (Plan, error)

// Inbound implements Router.
func (f RouterFunc) Inbound(ctx context.Context, c InboundCall) (Plan, error) { return f(ctx, c) }

// InboundCall is what the router learns about an inbound INVITE.
type InboundCall struct {
	// CallID is the SIP Call-ID.
	CallID string
	// To and From are the called and calling numbers, normalized to E.164 ("+14155550100")
	// when they are phone numbers; otherwise the URI user part as sent.
	To, From string
	// ToURI and FromURI are the raw addresses.
	ToURI, FromURI string
	// FromName is the display name of From, if any.
	FromName string
	// Source is the address the INVITE came from and Transport its transport.
	Source    netip.AddrPort
	Transport Transport
	// Trunk is the trunk the source matched.
	Trunk Trunk
	// Headers holds the request's X- headers and Diversion/History-Info, by canonical name.
	Headers map[string]string
}

// ConversationFactory builds the conversation of an answered call. It is called once the call
// is about to be answered (inbound: before the 200 OK, so a failure can still refuse the call;
// outbound: once the 200 OK arrived). The server starts it with StartVoice, with the Call as its
// AudioPort.
type ConversationFactory func(ctx context.Context, c *Call) (*session.Conversation, error)

// Plan is how the router wants an inbound call handled.
type Plan struct {
	// Conversation builds the conversation. Required.
	Conversation ConversationFactory
	// ID names the call (the conversation's id in the control plane); empty picks a UUID.
	ID string
	// OnEvent receives the call's status changes (ringing, in progress, ended, AMD results,
	// transfers). It is called from the call's goroutines and must not block.
	OnEvent func(Event)
	// RingFor delays the 200 OK after 180 Ringing; 0 answers at once.
	RingFor time.Duration
	// Transfer configures transfers of this call (warm briefing voice, trunk for new legs).
	Transfer TransferOptions
	// Tap, when set, receives every 20 ms frame of the call in both directions (fromCaller
	// says which): the caller and the agent, then the caller and the human once a warm transfer
	// bridged them. It is for recording and monitoring; it runs on the media path and must not
	// block or keep the frame.
	Tap func(fromCaller bool, f *media.Frame)
}

// TransferOptions configure how a call is transferred.
type TransferOptions struct {
	// Briefing speaks the warm-transfer summary to the human before bridging; nil plays a
	// short fixed tone sequence instead. BriefingVoice picks its voice.
	Briefing      tts.Synthesizer
	BriefingVoice string
	// Trunk carries the second leg of a warm transfer (and of an incoming REFER) when the
	// destination is a phone number; zero uses the call's own trunk.
	Trunk Trunk
	// Allow lists the non-public networks the call's organization allows transfers to (issue
	// 22 item 7), on top of Options.TransferAllow and the trunk's Trunk.TransferAllow: what a
	// call whose number has no trunk of its own goes by.
	Allow []netip.Prefix
}

// EventKind names a call event.
type EventKind string

// Call events.
const (
	EventRinging    EventKind = "ringing"     // outbound: 180/183; inbound: 180 sent
	EventInProgress EventKind = "in_progress" // answered and the conversation started
	EventAMD        EventKind = "amd"         // answering-machine detection finished
	EventTransfer   EventKind = "transfer"    // a transfer started, succeeded or failed
	EventEnded      EventKind = "ended"       // the call is over
)

// Event reports a change of a call.
type Event struct {
	Kind EventKind
	Call *Call
	At   time.Time
	// Ended: why, and for outbound calls that never connected, the dial outcome.
	EndReason session.EndReason
	Outcome   Outcome
	// SIPStatus is the final status of a failed outbound INVITE, 0 otherwise.
	SIPStatus int
	// AMD is set on EventAMD.
	AMD AMDResult
	// Transfer is set on EventTransfer: its destination, mode and state ("started",
	// "succeeded", "failed") and the reason of a failure.
	Transfer TransferEvent
	// Stats are the call's media statistics at the event.
	Stats CallStats
	// Redirect is set on EventRedirect (issue 21).
	Redirect Redirect
	// End is set on EventHangup and EventEnded: how the call's leg ended (issue 22 item 4).
	End EndDetail
}

// TransferEvent describes a transfer in an Event.
type TransferEvent struct {
	Destination string
	Mode        session.TransferMode
	State       string
	Reason      string
}
