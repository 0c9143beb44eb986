package api

import (
	"encoding/json"
	"net/http"
	"path/filepath"

	"github.com/parley-voice/parley/control/app"
	"github.com/parley-voice/parley/control/app/conversations"
	"github.com/parley-voice/parley/control/fault"
	"github.com/parley-voice/parley/control/store"
	"github.com/parley-voice/parley/session"
)

// What the operations that start conversations (calls.go, scheduledcalls.go, webcalls.go,
// chats.go) still share with those of package conversations until they move onto the domain
// layer themselves; each delegates to package conversations, so there is one view of a
// conversation. Delete this file when nothing uses it.

// lineView is the TranscriptLine object.
type lineView = conversations.TranscriptLine

// viewConversation is the Conversation object of c, to which a chat adds its transcript.
func viewConversation(c store.Conversation) conversations.ConversationWithTranscript {
	return conversations.ConversationWithTranscript{Conversation: conversations.View(c)}
}

// viewSessionLine is the TranscriptLine of a line the engine has just made.
func viewSessionLine(l session.Line) lineView { return conversations.SessionLine(l) }

// formatUSD renders micro-dollars as a decimal string with six places.
func formatUSD(micros int64) string { return conversations.FormatUSD(micros) }

// mapRuntimeError turns a runtime error into the problem the API answers.
func mapRuntimeError(err error, phone bool) error { return conversations.RuntimeFault(err, phone) }

func strPtr(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func orEmpty(raw json.RawMessage) json.RawMessage {
	if len(raw) == 0 {
		return json.RawMessage("{}")
	}
	return raw
}

// errConversationNotFound is the 404 of a conversation the key does not reach.
func errConversationNotFound(id string) error {
	return app.NotFound(store.ErrNotFound, fault.CodeConversationNotFound, "conversation", id)
}

// reachableConversation returns the conversation at the path parameter conversation_id through
// the key's scope (404 outside it, of the other mode, or deleted).
func reachableConversation(r *http.Request, q *store.Queries) (store.Conversation, error) {
	raw := pathParam(r, "conversation_id")
	id, err := store.ParseID[store.ConversationID](raw) // any case, as the API takes it
	if err != nil {
		return store.Conversation{}, errConversationNotFound(raw)
	}
	c, err := q.Conversations().Get(r.Context(), store.KeyScope(PrincipalFrom(r.Context()).Key), id)
	return c, app.NotFound(err, fault.CodeConversationNotFound, "conversation", raw)
}

// dataPath is the absolute path of a file kept under the data directory.
func (a *API) dataPath(rel string) string { return filepath.Join(a.DataDir, filepath.FromSlash(rel)) }
