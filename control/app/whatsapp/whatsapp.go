// Package whatsapp holds the rules of the messaging-app channel (WhatsApp Cloud API, issue 19):
// senders (a project's numbers and the agents that answer them), the approved templates of
// their business accounts, conversations started by the business with a template or by the
// user with a message, the 24-hour window, inbound webhooks (signature, routing, dedupe by
// wamid) and the replies sent back through Meta's Graph API.
//
// It must never import net/http: Meta's Graph API is reached through Graph (package
// control/channels/whatsapp implements it), the chat engine through Engine, the vault through
// Secrets. HTTP, the workers and the admin CLI call the same functions.
package whatsapp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/parley-voice/parley/control/app"
	"github.com/parley-voice/parley/control/app/calls"
	"github.com/parley-voice/parley/control/app/chats"
	"github.com/parley-voice/parley/control/app/conversations"
	"github.com/parley-voice/parley/control/store"
)

// Window is how long after the user's last message the business may write freely.
const Window = 24 * time.Hour

// MaxText is the longest text body Meta takes in one message, in characters.
const MaxText = 4096

// Graph is Meta's Graph API as this channel uses it. Errors are *GraphError when Meta answered
// with one; anything else (network) is temporary.
type Graph interface {
	// SendText sends a text message and returns its wamid.
	SendText(ctx context.Context, token, phoneNumberID, to, text string) (string, error)
	// SendTemplate sends a template message and returns its wamid.
	SendTemplate(ctx context.Context, token, phoneNumberID, to string, t TemplateSend) (string, error)
	// MarkRead marks an inbound message as read.
	MarkRead(ctx context.Context, token, phoneNumberID, wamid string) error
	// Templates lists every message template of a business account (all pages).
	Templates(ctx context.Context, token, businessAccountID string) ([]GraphTemplate, error)
	// Media downloads the media with id (at most max bytes) and returns it with its type.
	Media(ctx context.Context, token, mediaID string, max int64) ([]byte, string, error)
}

// GraphError is an error answered by the Graph API ({"error": {...}}), or its HTTP status
// without one.
type GraphError struct {
	Status  int    // HTTP status
	Code    int    // Meta's error code (131047, 130429, …); 0 when none was given
	Subcode int    // error_subcode
	Type    string // OAuthException, …
	Message string
	Details string // error_data.details
}

func (e *GraphError) Error() string {
	s := fmt.Sprintf("graph api: HTTP %d", e.Status)
	if e.Code != 0 {
		s += fmt.Sprintf(", code %d", e.Code)
	}
	if e.Message != "" {
		s += ": " + e.Message
	}
	if e.Details != "" {
		s += " (" + e.Details + ")"
	}
	return s
}

// Temporary reports whether a retry may succeed: 429 and 5xx, and Meta's throttling and
// service-unavailable codes.
func (e *GraphError) Temporary() bool {
	switch e.Code {
	case 1, 2, 4, 17, 80007, 130429, 131016, 131048, 131056:
		return true
	}
	return e.Status == 429 || e.Status >= 500
}

// Temporary reports whether err may go away on a retry (a network failure, or a temporary
// Graph error).
func Temporary(err error) bool {
	var ge *GraphError
	if errors.As(err, &ge) {
		return ge.Temporary()
	}
	return err != nil && !errors.Is(err, context.Canceled)
}

// GraphTemplate is a message template as the Graph API lists it
// (GET /{waba-id}/message_templates).
type GraphTemplate struct {
	ID              string              `json:"id"`
	Name            string              `json:"name"`
	Language        string              `json:"language"`
	Status          string              `json:"status"`
	Category        string              `json:"category"`
	ParameterFormat string              `json:"parameter_format,omitempty"`
	Components      []GraphTemplatePart `json:"components"`
}

// GraphTemplatePart is one component of a template (HEADER, BODY, FOOTER, BUTTONS).
type GraphTemplatePart struct {
	Type    string          `json:"type"`
	Format  string          `json:"format,omitempty"`
	Text    string          `json:"text,omitempty"`
	Example json.RawMessage `json:"example,omitempty"`
}

// TemplateSend is a template message to send: its name and language and the body's parameters,
// positional ({{1}}, {{2}}, …) or named ({{first_name}}).
type TemplateSend struct {
	Name       string
	Language   string
	Positional []string
	Named      map[string]string
}

// Secrets resolves vault secrets (the access token and app secret of a sender) by id, within
// the sender's project. ErrSecretNotFound when the project has no such secret. Link records in
// tx, when the sender is saved, which secrets it uses (none when it is deleted), so that the
// vault refuses to delete a secret in use; it answers 404 vault_secret_not_found for a secret
// the actor does not reach in the project.
type Secrets interface {
	Resolve(ctx context.Context, org store.OrgID, project store.ProjectID, id string) (string, error)
	Link(ctx context.Context, tx *store.Tx, act app.Actor, sn store.WhatsAppSender) error
}

// ErrSecretNotFound says the vault holds no such secret for the organization.
var ErrSecretNotFound = errors.New("whatsapp: no such secret")

// Engine runs the conversations on the durable chat engine (control/runtime, adapted): no node
// keeps one between its messages, so a restart or a dead node ends none. Errors are classified
// like chats.Engine's.
type Engine interface {
	Ready() error
	// StartText starts the engine of a stored conversation with opener as the agent's first
	// line ("" for none; the agent's greeting is not used).
	StartText(ctx context.Context, id store.ConversationID, opener string) ([]conversations.TranscriptLine, error)
	// Send answers a message, after the one being answered (on any node); sttSeconds is
	// speech-to-text it already used (a voice note), charged with the conversation.
	Send(ctx context.Context, id store.ConversationID, text string, attachments []store.AttachmentID, sttSeconds float64) (chats.Turn, error)
	// Say adds a line the business wrote to the conversation (transcript and history).
	Say(ctx context.Context, c store.Conversation, text string) error
	// End ends the conversation (reason completed).
	End(ctx context.Context, id store.ConversationID) error
	// TranscribeVoiceNote turns an Ogg/Opus voice note into text with the agent's STT, and
	// returns the seconds of audio it holds.
	TranscribeVoiceNote(ctx context.Context, id store.ConversationID, ogg []byte) (string, float64, error)
}

// Waker wakes the workers after a job was enqueued in a committed transaction (jobs.Queue).
type Waker interface {
	Wake(ctx context.Context, kind string)
}

// Job kinds of the channel on the job queue.
const (
	KindWebhook = "whatsapp.webhook"  // a signed webhook delivery: route, dedupe, store
	KindInbound = "whatsapp.inbound"  // one inbound message: the agent's reply
	KindSend    = "whatsapp.send"     // outbound messages, in order
	KindEndIdle = "whatsapp.end_idle" // end the conversations whose window closed
)

// Service serves the channel.
type Service struct {
	Store   *store.Store
	Rules   calls.Rules
	Engine  Engine
	Graph   Graph
	Secrets Secrets // nil: the deployment does not run the channel (501)
	Wake    Waker
	// DataDir holds the pictures received (as chat attachments).
	DataDir string
	// TemplateTTL is how long a business account's template list is cached (default 5 min).
	TemplateTTL time.Duration
	// Now is the clock (nil: time.Now); Log takes what the workers cannot answer to anyone.
	Now func() time.Time
	Log *slog.Logger

	mu         sync.Mutex
	templates  map[string]cachedTemplates // by sender id
	appSecrets map[string]cachedSecret    // by project and secret id
}

type cachedTemplates struct {
	at   time.Time
	list []Template
}

type cachedSecret struct {
	at    time.Time
	value string
}

func (s *Service) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}

func (s *Service) log() *slog.Logger {
	if s.Log != nil {
		return s.Log
	}
	return slog.New(slog.DiscardHandler)
}

func (s *Service) templateTTL() time.Duration {
	if s.TemplateTTL > 0 {
		return s.TemplateTTL
	}
	return 5 * time.Minute
}

// unixTime reads Meta's timestamps (seconds since the epoch, as a string).
func unixTime(s string, def time.Time) time.Time {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n <= 0 {
		return def
	}
	return time.Unix(n, 0).UTC()
}
