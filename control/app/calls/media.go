package calls

import (
	"context"
	"errors"
	"time"

	"github.com/parley-voice/parley/control/agentdef"
	"github.com/parley-voice/parley/control/store"
)

// The runtime (control/runtime) places calls and runs them; the domain reaches it only through
// these small interfaces, which the composition root adapts it to. Their errors are already
// classified (*fault.Error: phone_calls_unavailable, too_many_calls, upstream_unreachable, …).

// Dialer places calls stored pending.
type Dialer interface {
	// CanPlace reports whether a call of channel (store.ChannelPhone or store.ChannelVoice)
	// can be placed by this deployment now.
	CanPlace(channel string) error
	// Place has a media node run the call stored pending with id: a phone call through trunk
	// or, for a test call, against a simulated other side saying lines.
	Place(ctx context.Context, mode store.Mode, p Placement) error
	// Abandon ends a conversation that could not start (reason failed) and gives its call slot
	// back.
	Abandon(ctx context.Context, org store.OrgID, id store.ConversationID)
}

// Placement is what a media node needs to run a call.
type Placement struct {
	ConversationID store.ConversationID
	Trunk          string   // the trunk of the number a phone call is made from
	Lines          []string // what the simulated caller of a test inbound call says
	// issue 15: a campaign's ring timeout (0: the dialler's default) and answering-machine
	// detection (nil: none).
	RingTimeout time.Duration
	AMD         *AMD
}

// AMD is the answering-machine detection of a call: on a machine, hang up, or wait for the
// beep and say Message, ending the call as voicemail either way.
type AMD struct {
	LeaveMessage bool
	Message      string
}

// Slots counts an organization's voice calls: the ones going at once and the browser calls of
// the day.
type Slots interface {
	// AcquireCallSlot takes one of the org's limit concurrent calls for id (0: no limit).
	AcquireCallSlot(ctx context.Context, org store.OrgID, id store.ConversationID, limit int) error
	ReleaseCallSlot(ctx context.Context, org store.OrgID, id store.ConversationID)
	// CountDaily counts one browser call of today (UTC) and reports whether it is within limit.
	CountDaily(ctx context.Context, org store.OrgID, limit int) (bool, error)
}

// WebCalls starts browser calls.
type WebCalls interface {
	// StartWebCall makes the join token of a browser call stored pending.
	StartWebCall(ctx context.Context, id store.ConversationID, participant string) (WebCallJoin, error)
}

// WebCallJoin is how a page joins a browser call.
type WebCallJoin struct {
	ID        string
	URL       string
	Token     string
	ExpiresAt time.Time
}

// Media is the whole of what calls need of the runtime.
type Media interface {
	Dialer
	Slots
	WebCalls
}

// Definitions reads the definition a conversation of an agent runs.
type Definitions interface {
	// Definition returns the definition of the agent's published version (0: its current
	// definition) and the languages it speaks, its own first; ErrNoVersion when the agent has
	// no such version.
	Definition(ctx context.Context, q *store.Queries, ag store.Agent, version int) (*agentdef.Definition, []string, error)
}

// ErrNoVersion says an agent has no such published version.
var ErrNoVersion = errors.New("calls: no such published version")
