package store

import "context"

// Scoped lookups of what starting a conversation or sending a chat message names: the agent,
// the number called, the conversation at the path and the pictures sent. Each applies the
// caller's Scope in SQL, so an object outside it is ErrNotFound exactly like a missing one.

// AgentInScope returns the scope's agent with id, not deleted, or ErrNotFound. Agents have no
// mode: live and test keys share them.
func (q *Queries) AgentInScope(ctx context.Context, sc Scope, id AgentID) (Agent, error) {
	b := newSel(`SELECT `+agentCols+` FROM agents`).scope(sc, "org_id", "project_id", "").id("id", string(id)).cond("deleted_at IS NULL")
	return one(ctx, q, "get agent", b, scanAgent)
}

// ByNumber returns the scope's phone number whose E.164 form is number, or ErrNotFound.
func (r Numbers) ByNumber(ctx context.Context, sc Scope, number string) (PhoneNumber, error) {
	b := newSel(`SELECT `+numberCols+` FROM phone_numbers`).scope(sc, "org_id", "project_id", "").cond("number = ?", number)
	return one(ctx, r.q, "find phone number", b, scanNumber)
}

// ConversationInScope returns the scope's conversation with id, of the scope's mode and not
// deleted, or ErrNotFound.
func (q *Queries) ConversationInScope(ctx context.Context, sc Scope, id ConversationID) (Conversation, error) {
	b := newSel(`SELECT `+convCols+` FROM conversations`).scope(sc, "org_id", "project_id", "mode").id("id", string(id)).cond("deleted_at IS NULL")
	return one(ctx, q, "get conversation", b, scanConversation)
}

// AttachmentInScope returns the picture with id uploaded in the scope's organization, or
// ErrNotFound. Pictures belong to the organization (they have no project until a message
// sends them).
func (q *Queries) AttachmentInScope(ctx context.Context, sc Scope, id AttachmentID) (Attachment, error) {
	b := newSel(`SELECT `+attachmentCols+` FROM attachments`).scope(OrgScope(sc.Org), "org_id", "", "").id("id", string(id))
	return one(ctx, q, "get attachment", b, scanAttachment)
}
