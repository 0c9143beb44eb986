package sip

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Sentinel errors of the package. Errors returned by the package wrap one of these (or a
// *Refusal, or a *DialError) so callers compare with errors.Is and errors.As.
var (
	// ErrClosed is returned by a Server that was closed, and by calls on an ended Call.
	ErrClosed = errors.New("sip: closed")
	// ErrDraining is returned by Dial while the server drains.
	ErrDraining = errors.New("sip: server is draining")
	// ErrBadSDP says an SDP body could not be parsed (RFC 8866).
	ErrBadSDP = errors.New("sip: malformed SDP")
	// ErrNoCommonCodec says an offer and our codecs share no audio format (RFC 3264 §6).
	ErrNoCommonCodec = errors.New("sip: no common codec")
	// ErrUnknownTrunk is returned by a TrunkSource that has no trunk by that name or source.
	ErrUnknownTrunk = errors.New("sip: unknown trunk")
	// ErrBadOptions is returned by New for unusable Options.
	ErrBadOptions = errors.New("sip: invalid options")
	// ErrTransferFailed wraps the reason a transfer did not complete.
	ErrTransferFailed = errors.New("sip: transfer failed")
	// ErrNotEstablished is returned by in-dialog operations before the call is answered.
	ErrNotEstablished = errors.New("sip: call is not established")
	// ErrAtCapacity is returned by Dial when the node already carries Options.MaxCalls calls.
	ErrAtCapacity = errors.New("sip: node at its call capacity")
	// ErrDestinationNotAllowed says a transfer destination is a loopback, private, link-local
	// or otherwise non-public address that Options.TransferAllow does not allow. An API
	// answers it 422.
	ErrDestinationNotAllowed = errors.New("sip: transfer destination not allowed")
)

// Refusal is the answer Parley gives an INVITE it will not take: a SIP status, the text of the
// RFC 3326 Reason header, and for 503 the Retry-After delay (RFC 3261 §20.33). A Router
// refuses a call by returning one; the server renders every refusal the same way (status line,
// Reason header with the SIP cause and, where one fits, the Q.850 cause, a log line).
type Refusal struct {
	Status     int
	Reason     string        // short text for the Reason header and the log
	RetryAfter time.Duration // 503 only; rounded up to whole seconds
	// Warning is an optional RFC 3261 §20.43 warning code (305 incompatible media format, 304
	// media type not available, 399 miscellaneous); 0 sends none.
	Warning int
	// Cause is the internal cause for the log; it is never sent to the peer.
	Cause error
}

func (r *Refusal) Error() string {
	s := fmt.Sprintf("sip: refused %d %s", r.Status, r.Reason)
	if r.Cause != nil {
		s += ": " + r.Cause.Error()
	}
	return s
}

func (r *Refusal) Unwrap() error { return r.Cause }

// Refusal constructors for the situations the issue names. Each is a fresh value.

// RefuseUnknownNumber answers 404: no number matches the called party.
func RefuseUnknownNumber(number string) *Refusal {
	return &Refusal{Status: 404, Reason: "unknown number " + number}
}

// RefuseNoAgent answers 480: the number has no published inbound agent.
func RefuseNoAgent() *Refusal { return &Refusal{Status: 480, Reason: "no published agent"} }

// RefuseAgentOutboundOnly answers 480: the number's agent only places calls.
func RefuseAgentOutboundOnly() *Refusal {
	return &Refusal{Status: 480, Reason: "agent does not answer calls"}
}

// RefuseProjectFrozen answers 480: the number's project is frozen.
func RefuseProjectFrozen() *Refusal { return &Refusal{Status: 480, Reason: "project frozen"} }

// RefuseOrgNoCredit answers 403: the organization is out of credit.
func RefuseOrgNoCredit() *Refusal { return &Refusal{Status: 403, Reason: "organization out of credit"} }

// RefuseOrgFrozen answers 403: the organization is frozen.
func RefuseOrgFrozen() *Refusal { return &Refusal{Status: 403, Reason: "organization frozen"} }

// RefuseOverLimit answers 503 with Retry-After: over the concurrent-call limit.
func RefuseOverLimit(retryAfter time.Duration) *Refusal {
	return &Refusal{Status: 503, Reason: "over the concurrent-call limit", RetryAfter: retryAfter}
}

// RefuseDraining answers 503 with Retry-After: the node is shutting down.
func RefuseDraining(retryAfter time.Duration) *Refusal {
	return &Refusal{Status: 503, Reason: "draining", RetryAfter: retryAfter}
}

// RefuseNoCodec answers 488 with Warning 305: no common codec.
func RefuseNoCodec() *Refusal {
	return &Refusal{Status: 488, Reason: "no common codec", Warning: 305}
}

// RefuseMalformed answers 400: the request cannot be understood.
func RefuseMalformed(what string) *Refusal {
	return &Refusal{Status: 400, Reason: "malformed request: " + what}
}

// RefuseSource answers 403: the request's source is not an allowed trunk address.
func RefuseSource() *Refusal { return &Refusal{Status: 403, Reason: "source not allowed"} }

// statusText is the reason phrase of the status codes Parley sends (RFC 3261 §21, RFC 4028 §6).
func statusText(code int) string {
	switch code {
	case 100:
		return "Trying"
	case 180:
		return "Ringing"
	case 183:
		return "Session Progress"
	case 200:
		return "OK"
	case 202:
		return "Accepted"
	case 400:
		return "Bad Request"
	case 401:
		return "Unauthorized"
	case 403:
		return "Forbidden"
	case 404:
		return "Not Found"
	case 405:
		return "Method Not Allowed"
	case 407:
		return "Proxy Authentication Required"
	case 408:
		return "Request Timeout"
	case 415:
		return "Unsupported Media Type"
	case 416:
		return "Unsupported URI Scheme"
	case 420:
		return "Bad Extension"
	case 422:
		return "Session Interval Too Small"
	case 480:
		return "Temporarily Unavailable"
	case 481:
		return "Call/Transaction Does Not Exist"
	case 483:
		return "Too Many Hops"
	case 486:
		return "Busy Here"
	case 487:
		return "Request Terminated"
	case 488:
		return "Not Acceptable Here"
	case 491:
		return "Request Pending"
	case 500:
		return "Server Internal Error"
	case 501:
		return "Not Implemented"
	case 503:
		return "Service Unavailable"
	case 505:
		return "Version Not Supported"
	case 603:
		return "Decline"
	}
	switch code / 100 {
	case 1:
		return "Session Progress"
	case 2:
		return "OK"
	case 4:
		return "Client Error"
	case 5:
		return "Server Error"
	default:
		return "Global Failure"
	}
}

// q850Cause maps a SIP status to the ITU-T Q.850 cause a PSTN gateway would report (RFC 3398
// §7.2.4.1, read in reverse); 0 means none fits.
func q850Cause(status int) int {
	switch status {
	case 200:
		return 16 // normal clearing (a BYE)
	case 404:
		return 1 // unallocated number
	case 403:
		return 21 // call rejected
	case 480:
		return 18 // no user responding
	case 486:
		return 17 // user busy
	case 487:
		return 16 // normal clearing (cancelled)
	case 488:
		return 88 // incompatible destination
	case 400:
		return 95 // invalid message
	case 503:
		return 41 // temporary failure
	case 500:
		return 38 // network out of order
	}
	return 0
}

// reasonHeader renders the RFC 3326 Reason header value for a status and text: the SIP cause,
// and the Q.850 cause when one maps.
func reasonHeader(status int, text string) string {
	var b strings.Builder
	b.WriteString("SIP;cause=")
	b.WriteString(strconv.Itoa(status))
	b.WriteString(`;text="`)
	b.WriteString(quoteSafe(text))
	b.WriteString(`"`)
	if q := q850Cause(status); q != 0 {
		b.WriteString(", Q.850;cause=")
		b.WriteString(strconv.Itoa(q))
	}
	return b.String()
}

// quoteSafe strips what cannot appear inside a quoted-string (RFC 3261 §25.1).
func quoteSafe(s string) string {
	return strings.Map(func(r rune) rune {
		if r == '"' || r == '\\' || r < 0x20 || r == 0x7f {
			return -1
		}
		return r
	}, s)
}

// retryAfterSeconds renders a Retry-After delay in whole seconds, at least 1.
func retryAfterSeconds(d time.Duration) string {
	s := int64((d + time.Second - 1) / time.Second)
	if s < 1 {
		s = 1
	}
	return strconv.FormatInt(s, 10)
}
