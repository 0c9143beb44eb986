package webrtc

import (
	"errors"
	"net/http"
)

// Error is an error this package shows to a browser or to the control plane. It classifies
// itself: Code is the stable wire code sent to the page in an "error" message, Status the HTTP
// status the control plane should answer with, and Close the WebSocket close code (4000–4999 are
// private-use, RFC 6455 §7.4.2). Detail is written for the person reading it; internal causes go
// to the log, never into Detail.
type Error struct {
	Code   string
	Detail string
	Status int
	Close  int
}

func (e *Error) Error() string { return "webrtc: " + e.Detail }

// Documented errors. Compare with errors.Is.
var (
	// ErrTokenInvalid: the token is not one this service signed (bad format or signature).
	ErrTokenInvalid = &Error{Code: "token_invalid", Detail: "the token is not valid", Status: http.StatusUnauthorized, Close: 4401}
	// ErrTokenExpired: the token's 15 minutes are over.
	ErrTokenExpired = &Error{Code: "token_expired", Detail: "the token has expired; ask for a new one", Status: http.StatusUnauthorized, Close: 4401}
	// ErrTokenUsed: the token already joined once; a token is single use.
	ErrTokenUsed = &Error{Code: "token_used", Detail: "the token was already used; ask for a new one", Status: http.StatusUnauthorized, Close: 4401}
	// ErrTokenOtherCall: the token is for another call (or another kind of join).
	ErrTokenOtherCall = &Error{Code: "token_wrong_call", Detail: "the token is for another call", Status: http.StatusForbidden, Close: 4403}
	// ErrCallNotFound: no web call with this id waits here (never created, expired or over).
	ErrCallNotFound = &Error{Code: "call_not_found", Detail: "this call does not exist or has ended", Status: http.StatusNotFound, Close: 4404}
	// ErrNotLive: the conversation to listen to is not live on this node.
	ErrNotLive = &Error{Code: "conversation_not_live", Detail: "the conversation is not live", Status: http.StatusNotFound, Close: 4404}
	// ErrBadMessage: the peer sent a signalling message that does not parse or is out of order.
	ErrBadMessage = &Error{Code: "bad_message", Detail: "the signalling message is not valid", Status: http.StatusBadRequest, Close: 4400}
	// ErrJoinTimeout: the peer did not send its join message in time.
	ErrJoinTimeout = &Error{Code: "join_timeout", Detail: "no join message arrived in time", Status: http.StatusRequestTimeout, Close: 4408}
	// ErrClosed: the service is shutting down.
	ErrClosed = &Error{Code: "unavailable", Detail: "the voice service is shutting down", Status: http.StatusServiceUnavailable, Close: 1001}
	// ErrTakeover: a takeover could not start (not a takeover join, or the engine refused).
	ErrTakeover = &Error{Code: "takeover_failed", Detail: "the takeover could not start", Status: http.StatusConflict, Close: 4409}
	// ErrMedia: the peer connection could not be set up (no common codec, bad SDP).
	ErrMedia = &Error{Code: "media_failed", Detail: "the media connection could not be set up", Status: http.StatusBadRequest, Close: 4415}
)

// asError returns the *Error in err's chain, or a generic one (the cause stays in the log).
func asError(err error) *Error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	return &Error{Code: "internal", Detail: "internal error", Status: http.StatusInternalServerError, Close: 1011}
}
