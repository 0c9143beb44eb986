// Package conversations holds the rules of reading and steering the conversations a caller
// reaches: listing them (and the deleted ones), reading one with its transcript and cost, the
// live transcript, the recording, deleting (refused while a call is in progress; an open chat
// is charged, closed, then deleted), and steering a live one (notes, say, transfer, end,
// listening in) through the runtime that runs it.
//
// It reaches the runtime through the small Runtime interface declared here, and must never
// import net/http or the transport.
package conversations

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/parley-voice/parley/control/app"
	"github.com/parley-voice/parley/control/fault"
	"github.com/parley-voice/parley/control/runtime"
	"github.com/parley-voice/parley/control/store"
	"github.com/parley-voice/parley/session"
)

// Runtime is what the rules need of the runtime that runs conversations (runtime.Runtime).
type Runtime interface {
	// End ends a conversation wherever it runs; with ifIdle a chat whose agent is answering is
	// left alone (runtime.ErrBusy).
	End(ctx context.Context, id store.ConversationID, reason session.EndReason, ifIdle bool) error
	// Watch returns a channel closed when the conversation has new stored lines or has ended,
	// and its release; take it before reading the lines.
	Watch(id store.ConversationID) (<-chan struct{}, func())
	// Command hands a stored, pending command to the node that runs its conversation.
	Command(ctx context.Context, cmd store.Command) error
	// Listen issues a listen (or takeover) token on the node that runs the conversation.
	Listen(ctx context.Context, id store.ConversationID, mode string) (runtime.Listener, error)
}

// Service serves conversations.
type Service struct {
	Store *store.Store
	// Runtime runs and reaches conversations; nil when this node cannot (steering then answers
	// that the conversation is not live, and an open chat cannot be deleted).
	Runtime Runtime
	// DataDir holds recordings and attachments.
	DataDir string
	Log     *slog.Logger
	// Now is the clock (nil: time.Now).
	Now func() time.Time
	// TransferCheck refuses a transfer destination of call c (issue 22 item 7: a SIP URI on a
	// non-public address its trunk and the node do not allow) with a *fault.Error
	// (transfer_destination_not_allowed); nil checks nothing.
	TransferCheck func(ctx context.Context, c store.Conversation, dest string) error
	// MessagingSay, when set, takes what a say command makes the agent write in a messaging-app
	// conversation before the command is recorded: it refuses the text outside the 24-hour
	// window (409) and queues it to be sent (issue 19).
	MessagingSay func(ctx context.Context, conv store.Conversation, text string) error
}

func (s *Service) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}

func (s *Service) log() *slog.Logger {
	if s.Log == nil {
		return slog.New(slog.DiscardHandler)
	}
	return s.Log
}

// load returns the actor's conversation with id (404 conversation_not_found outside its scope,
// of the other key mode, or deleted).
func load(ctx context.Context, q *store.Queries, act app.Actor, id string) (store.Conversation, error) {
	c, err := q.Conversations().Get(ctx, act.Scope, canonical[store.ConversationID](id))
	return c, app.NotFound(err, fault.CodeConversationNotFound, "conversation", id)
}

// canonical is id in the store's form of a UUID (lowercase, as the API takes any case), or id as
// it is when it is no UUID, which the store finds nowhere.
func canonical[T ~string](id string) T {
	if v, err := store.ParseID[T](id); err == nil {
		return v
	}
	return T(id)
}

// textual reports whether the conversation is by text (a chat or the messaging app).
func textual(c store.Conversation) bool {
	return c.Channel == store.ChannelChat || c.Channel == store.ChannelWhatsApp
}

// Filter narrows a list of conversations.
type Filter struct {
	ProjectID     string // only this project's (404 when the actor reaches no such project)
	AgentID       string
	Status        string
	Channel       string
	Direction     string
	ExternalID    string
	CreatedAfter  *time.Time // created at or after
	CreatedBefore *time.Time // created before
}

// storeFilter is f for the store, with its project checked against the actor's reach.
func (s *Service) storeFilter(ctx context.Context, act app.Actor, f Filter) (store.ConversationListFilter, error) {
	sf := store.ConversationListFilter{AgentID: canonical[store.AgentID](f.AgentID), Status: f.Status, Channel: f.Channel,
		Direction: f.Direction, ExternalID: f.ExternalID, CreatedAfter: f.CreatedAfter, CreatedBefore: f.CreatedBefore}
	if f.ProjectID != "" {
		p, err := s.Store.Projects().Get(ctx, act.Scope, canonical[store.ProjectID](f.ProjectID))
		if err != nil {
			return sf, app.NotFound(err, fault.CodeProjectNotFound, "project", f.ProjectID)
		}
		sf.ProjectID = p.ID
	}
	return sf, nil
}

// List returns a page of the actor's conversations that f selects, newest first, with one
// more when another page follows.
func (s *Service) List(ctx context.Context, act app.Actor, f Filter, pg store.Page) ([]Conversation, error) {
	sf, err := s.storeFilter(ctx, act, f)
	if err != nil {
		return nil, err
	}
	cs, err := s.Store.Conversations().List(ctx, act.Scope, sf, pg)
	if err != nil {
		return nil, err
	}
	out := make([]Conversation, len(cs))
	for i, c := range cs {
		out[i] = View(c)
	}
	return out, nil
}

// DeletedConversation is the DeletedConversation object: what is left of a deleted one.
type DeletedConversation struct {
	Object    string   `json:"object" jsonschema:"enum=deleted_conversation"`
	ID        string   `json:"id" jsonschema:"format=uuid"`
	ProjectID string   `json:"project_id" jsonschema:"format=uuid"`
	AgentID   string   `json:"agent_id" jsonschema:"format=uuid"`
	Channel   string   `json:"channel" jsonschema:"enum=phone,enum=voice,enum=chat,enum=whatsapp"`
	Direction string   `json:"direction" jsonschema:"enum=inbound,enum=outbound"`
	Mode      string   `json:"mode" jsonschema:"enum=live,enum=test"`
	CreatedAt app.Time `json:"created_at"`
	DeletedAt app.Time `json:"deleted_at"`
}

// SchemaDoc describes the object in the document.
func (DeletedConversation) SchemaDoc() string {
	return "A deleted conversation: its transcript, recording, pictures and values are gone."
}

// ListDeleted returns a page of the actor's deleted conversations of f's project and agent
// (its other members are ignored), newest first, with one more when another page follows.
func (s *Service) ListDeleted(ctx context.Context, act app.Actor, f Filter, pg store.Page) ([]DeletedConversation, error) {
	sf, err := s.storeFilter(ctx, act, Filter{ProjectID: f.ProjectID, AgentID: f.AgentID})
	if err != nil {
		return nil, err
	}
	cs, err := s.Store.Conversations().ListDeleted(ctx, act.Scope, sf, pg)
	if err != nil {
		return nil, err
	}
	out := make([]DeletedConversation, len(cs))
	for i, c := range cs {
		out[i] = DeletedConversation{Object: "deleted_conversation", ID: string(c.ID), ProjectID: string(c.ProjectID), AgentID: string(c.AgentID),
			Channel: c.Channel, Direction: c.Direction, Mode: string(c.Mode), CreatedAt: app.T(c.CreatedAt), DeletedAt: app.T(*c.DeletedAt)}
	}
	return out, nil
}

// Include names what Get adds to the conversation.
type Include struct {
	Transcript bool
	Cost       bool
}

// Get returns the actor's conversation with id, with its transcript and cost when inc asks.
func (s *Service) Get(ctx context.Context, act app.Actor, id string, inc Include) (ConversationWithTranscript, error) {
	c, err := load(ctx, s.Store.Queries, act, id)
	if err != nil {
		return ConversationWithTranscript{}, err
	}
	v := ConversationWithTranscript{Conversation: View(c)}
	if inc.Transcript {
		ls, err := s.Store.Conversations().AllLines(ctx, act.Scope, c.ID)
		if err != nil {
			return ConversationWithTranscript{}, err
		}
		lines := Lines(ls)
		v.Transcript = &lines
	}
	if inc.Cost {
		cost := Cost(c)
		v.Cost = &cost
	}
	return v, nil
}

// Deleted is the Deleted object, the answer of deleteConversation.
type Deleted struct {
	Object  string `json:"object" jsonschema:"enum=conversation"`
	ID      string `json:"id" jsonschema:"format=uuid"`
	Deleted bool   `json:"deleted" doc:"Always true."`
}

// SchemaExtras adds what the field tags cannot say: deleted is the constant true. The
// properties are written out by hand because the reflector has no boolean const (its tags
// give a boolean only a default).
func (Deleted) SchemaExtras() map[string]any {
	return map[string]any{"properties": map[string]any{
		"object":  map[string]any{"const": "conversation"},
		"id":      map[string]any{"type": "string", "format": "uuid"},
		"deleted": map[string]any{"const": true},
	}}
}

// Delete deletes the actor's conversation with id: its transcript, commands, values,
// recording and pictures; a tombstone is left for the deleted list, and conversation.deleted
// is recorded (event and audit). A call in progress is refused (409 call_in_progress); an open
// chat is charged for what it used and closed first (409 agent_busy while its agent answers).
func (s *Service) Delete(ctx context.Context, act app.Actor, id string) (Deleted, error) {
	conv, err := load(ctx, s.Store.Queries, act, id)
	if err != nil {
		return Deleted{}, err
	}
	if err := app.WritableProject(ctx, s.Store.Queries, act, conv.ProjectID); err != nil {
		return Deleted{}, err
	}
	if !conv.Ended() {
		if !textual(conv) {
			return Deleted{}, fault.E(fault.CodeCallInProgress, "The call is %s; end it (POST /v1/conversations/%s/end) before deleting it.", strings.ReplaceAll(conv.Status, "_", " "), conv.ID)
		}
		// An open chat is charged for what it used, then deleted.
		if s.Runtime == nil {
			return Deleted{}, fault.E(fault.CodeCallInProgress, "The chat is open and this node cannot close it.")
		}
		if err := s.Runtime.End(ctx, conv.ID, session.EndAPI, true); errors.Is(err, runtime.ErrBusy) {
			return Deleted{}, fault.E(fault.CodeAgentBusy, "The agent is answering a message in this chat; delete it once the answer has come.")
		} else if err != nil {
			return Deleted{}, err
		}
	}
	var files []string
	out, err := app.Change(ctx, s.Store, act, func(tx *store.Tx, au *app.Audit) (Deleted, error) {
		files = nil
		before, err := tx.Conversations().Delete(ctx, act.Scope, conv.ID, s.now())
		if errors.Is(err, store.ErrNotFound) || errors.Is(err, store.ErrConflict) {
			return Deleted{}, app.NotFound(store.ErrNotFound, fault.CodeConversationNotFound, "conversation", id) // deleted by a racing request
		}
		if err != nil {
			return Deleted{}, err
		}
		if before.Recording != "" {
			files = append(files, before.Recording)
		}
		if !textual(before) {
			// Issue 22 item 3: a recording never named on the row (its call cut off by a
			// crash, or its name not stored yet) is caller audio the deletion promised to
			// remove too.
			if own := RecordingPath(before.ID); own != before.Recording {
				files = append(files, own)
			}
		}
		atts, err := tx.DeleteConversationAttachments(ctx, conv.ID)
		if err != nil {
			return Deleted{}, err
		}
		for _, at := range atts {
			files = append(files, at.Path)
		}
		data, _ := json.Marshal(runtime.EventData(before))
		if _, err := tx.InsertEvent(ctx, store.Event{OrgID: conv.OrgID, ProjectID: conv.ProjectID, Mode: conv.Mode, Type: "conversation.deleted",
			ConversationID: conv.ID, AgentID: conv.AgentID, Data: data}); err != nil {
			return Deleted{}, err
		}
		if err := au.Record("conversation.deleted", "conversation", string(conv.ID), conv.ProjectID, map[string]any{
			"channel": conv.Channel, "attachments": len(atts), "recording": before.Recording != ""}); err != nil {
			return Deleted{}, err
		}
		return Deleted{Object: "conversation", ID: string(conv.ID), Deleted: true}, nil
	})
	if err != nil {
		return Deleted{}, err
	}
	for _, f := range files {
		if err := os.Remove(s.dataPath(f)); err != nil && !errors.Is(err, os.ErrNotExist) {
			s.log().WarnContext(ctx, "conversation deleted, but a file of it was not removed", "conversation", conv.ID, "file", f, "err", err)
		}
	}
	return out, nil
}

// RecordingPath is where the runtime records a voice conversation, under the data directory.
func RecordingPath(id store.ConversationID) string {
	return filepath.ToSlash(filepath.Join("recordings", string(id)+".wav"))
}

// dataPath is the absolute path of a file kept under the data directory.
func (s *Service) dataPath(rel string) string {
	return filepath.Join(s.DataDir, filepath.FromSlash(rel))
}

// Recording is the recording of a voice conversation, open for reading; the caller closes File.
type Recording struct {
	File        *os.File
	Size        int64
	ContentType string // audio/wav or audio/ogg
	Name        string // the file name to offer: the conversation's id and the file's extension
}

// Recording opens the recording of the actor's conversation with id (404 recording_not_found
// when it has none: a chat, a test call, a call not answered, or one still being written).
func (s *Service) Recording(ctx context.Context, act app.Actor, id string) (Recording, error) {
	conv, err := load(ctx, s.Store.Queries, act, id)
	if err != nil {
		return Recording{}, err
	}
	notFound := fault.E(fault.CodeRecordingNotFound, "Conversation %s has no recording.", conv.ID)
	if conv.Recording == "" {
		return Recording{}, notFound
	}
	f, err := os.Open(s.dataPath(conv.Recording))
	if errors.Is(err, os.ErrNotExist) {
		return Recording{}, notFound
	}
	if err != nil {
		return Recording{}, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return Recording{}, err
	}
	ctype := "audio/wav"
	if strings.HasSuffix(conv.Recording, ".ogg") || strings.HasSuffix(conv.Recording, ".opus") {
		ctype = "audio/ogg"
	}
	return Recording{File: f, Size: st.Size(), ContentType: ctype, Name: string(conv.ID) + filepath.Ext(conv.Recording)}, nil
}
