package session

import (
	"context"
	"errors"
	"time"

	"github.com/parley-voice/parley/media"
)

// AudioPort is what a voice channel (SIP call leg, WebRTC peer, simulated caller) gives the
// engine. The channel pushes caller audio with Conversation.PushFrame and DTMF with
// Conversation.PushDTMF; the engine plays audio back through SendFrame.
type AudioPort interface {
	// SendFrame plays one 20 ms frame at media.PipelineRate toward the caller. The engine's pacer
	// calls it every 20 ms from its own goroutine while audio is queued. It must not block and
	// must not keep f after returning.
	SendFrame(f *media.Frame)
	// SendDTMF sends digits toward the caller (RFC 4733, or SIP INFO). It may return
	// ErrNotSupported.
	SendDTMF(ctx context.Context, digits string) error
	// Transfer hands the caller over to a destination (SIP REFER for cold, a bridged second leg
	// for warm). It returns when the transfer succeeded (the engine then ends the conversation
	// with EndTransferred) or failed (the engine resumes). It may return ErrNotSupported.
	Transfer(ctx context.Context, t TransferRequest) error
	// Hangup ends the channel; the engine calls it once when the conversation ends by its own
	// decision (not when the channel reported the end).
	Hangup(ctx context.Context, reason EndReason) error
}

// TransferMode is cold (blind REFER) or warm (brief a human first, then bridge).
type TransferMode string

// Transfer modes.
const (
	TransferCold TransferMode = "cold"
	TransferWarm TransferMode = "warm"
)

// TransferRequest asks the channel to transfer the caller.
type TransferRequest struct {
	Destination string // a phone number (E.164) or SIP URI
	Mode        TransferMode
	Summary     string // for warm transfers: what the agent tells the human before bridging
	Timeout     time.Duration
}

// ErrNotSupported is returned by a port that lacks a capability (DTMF, transfer).
var ErrNotSupported = errors.New("session: not supported by this channel")

// EndReason says why a conversation ended. The set is open: clients must tolerate new values.
type EndReason string

// End reasons.
const (
	EndCompleted    EndReason = "completed"
	EndCallerHungUp EndReason = "caller_hung_up"
	// EndCalleeHungUp: the called party of an outbound call hung up.
	EndCalleeHungUp   EndReason = "callee_hung_up"
	EndAgentEnded     EndReason = "agent_ended"
	EndNoAnswer       EndReason = "no_answer"
	EndBusy           EndReason = "busy"
	EndInvalidNumber  EndReason = "invalid_number"
	EndVoicemail      EndReason = "voicemail"
	EndTransferred    EndReason = "transferred"
	EndMediaTimeout   EndReason = "media_timeout"
	EndNetworkLost    EndReason = "network_lost"
	EndProviderError  EndReason = "provider_error"
	EndFailed         EndReason = "failed"
	EndSilenceTimeout EndReason = "silence_timeout"
	EndMaxDuration    EndReason = "max_duration"
	EndAPI            EndReason = "ended_by_api"
	// EndCreditExhausted: the organization's credit could no longer cover the call.
	EndCreditExhausted EndReason = "credit_exhausted"
	// EndShutdown: the node was shutting down and its drain deadline passed.
	EndShutdown EndReason = "shutdown"
)
