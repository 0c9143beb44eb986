package runtime

import "errors"

// Errors of the runtime. Each has a stable code, so that it keeps its meaning when it crosses
// the mesh from the node that runs a conversation to the node that asked.
var (
	// ErrNotLive: no node runs the conversation (it ended, or its node went away).
	ErrNotLive = errors.New("runtime: the conversation is not live on any node")
	// ErrBusy: the agent is still answering the chat's last message.
	ErrBusy = errors.New("runtime: the agent is still answering the last message")
	// ErrEnded: the conversation has ended.
	ErrEnded = errors.New("runtime: the conversation has ended")
	// ErrLengthReached: the chat has reached its length.
	ErrLengthReached = errors.New("runtime: the chat has reached its length")
	// ErrNotAnswered: the call is not answered yet, so it cannot be steered.
	ErrNotAnswered = errors.New("runtime: the call has not been answered yet")
	// ErrNoMedia: no node of the deployment runs the media role (phone and browser calls).
	ErrNoMedia = errors.New("runtime: no node runs voice (the media role)")
	// ErrNoTrunk: the media nodes have no SIP trunk to call through.
	ErrNoTrunk = errors.New("runtime: no SIP trunk to call through")
	// ErrUnreachable: the node or the trunk that should take the request did not answer.
	ErrUnreachable = errors.New("runtime: the service that should take the request could not be reached")
	// ErrProvider: a speech or language provider is not configured or failed to start.
	ErrProvider = errors.New("runtime: a provider is not available")
	// ErrUnsupported: the channel cannot do this (a chat cannot transfer, a text call has no
	// audio to listen to).
	ErrUnsupported = errors.New("runtime: not supported on this channel")
	// ErrBadRequest: the request does not fit (an attachment that is not the caller's).
	ErrBadRequest = errors.New("runtime: the request does not fit")
)

// sentinels are the errors that keep their identity across the mesh, by code.
var sentinels = map[string]error{
	"not_live":     ErrNotLive,
	"busy":         ErrBusy,
	"ended":        ErrEnded,
	"length":       ErrLengthReached,
	"not_answered": ErrNotAnswered,
	"no_media":     ErrNoMedia,
	"no_trunk":     ErrNoTrunk,
	"unreachable":  ErrUnreachable,
	"provider":     ErrProvider,
	"unsupported":  ErrUnsupported,
	"bad_request":  ErrBadRequest,
}
