package store

import (
	"context"
	"fmt"
	"time"
)

// AttachmentID names an uploaded picture.
type AttachmentID string

// Attachment is a picture uploaded for a chat message. The file lives under the data
// directory at Path; the row says whose it is and which conversation used it.
type Attachment struct {
	ID             AttachmentID
	OrgID          OrgID
	KeyID          KeyID
	MIME           string
	Size           int64
	Path           string
	ConversationID ConversationID // "" until a message uses it
	CreatedAt      time.Time
}

const attachmentCols = `id, org_id, key_id, mime, size, path, conversation_id, created_at`

func scanAttachment(r rowScanner) (Attachment, error) {
	var a Attachment
	err := r.Scan(&a.ID, &a.OrgID, &a.KeyID, &a.MIME, &a.Size, &a.Path, nullTextCol[ConversationID]{&a.ConversationID}, timeCol{&a.CreatedAt})
	return a, err
}

// NewAttachmentID returns a fresh attachment id, so the file can be named before the row is made.
func NewAttachmentID() AttachmentID { return newID[AttachmentID]() }

// CreateAttachment stores an attachment row (its file is written by the caller).
func (q *Queries) CreateAttachment(ctx context.Context, a Attachment) (Attachment, error) {
	if a.ID == "" {
		a.ID = newID[AttachmentID]()
	}
	if !validID(a.ID) || !validID(a.OrgID) || a.MIME == "" || a.Size <= 0 || a.Path == "" {
		return Attachment{}, fmt.Errorf("store: %w: an attachment needs an id, an organization, a type, a size and a path", ErrInvalid)
	}
	a.CreatedAt, a.ConversationID = q.s.timeNow(), ""
	_, err := q.exec(ctx, "create attachment",
		`INSERT INTO attachments (id, org_id, key_id, mime, size, path, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7)`,
		string(a.ID), string(a.OrgID), string(a.KeyID), a.MIME, a.Size, a.Path, ts(a.CreatedAt))
	if err != nil {
		return Attachment{}, err
	}
	return a, nil
}

// GetAttachment returns an attachment, or ErrNotFound.
func (q *Queries) GetAttachment(ctx context.Context, id AttachmentID) (Attachment, error) {
	if !validID(id) {
		return Attachment{}, notFound("attachment", id)
	}
	var a Attachment
	err := q.get(ctx, "get attachment", `SELECT `+attachmentCols+` FROM attachments WHERE id = $1`, []any{string(id)},
		func(r rowScanner) (err error) { a, err = scanAttachment(r); return err })
	return a, err
}

// ClaimAttachment ties an unused attachment to a conversation (a picture belongs to the one
// conversation it was sent in). One already used by another conversation is ErrConflict.
func (q *Queries) ClaimAttachment(ctx context.Context, id AttachmentID, conv ConversationID) error {
	res, err := q.exec(ctx, "claim attachment",
		`UPDATE attachments SET conversation_id = $2 WHERE id = $1 AND (conversation_id IS NULL OR conversation_id = $2)`, string(id), string(conv))
	if err != nil {
		return err
	}
	if n, err := res.RowsAffected(); err != nil || n == 0 {
		if err == nil {
			err = fmt.Errorf("store: attachment %s: %w: used by another conversation", id, ErrConflict)
		}
		return err
	}
	return nil
}

// DeleteConversationAttachments removes the rows of a conversation's attachments and returns
// them, so the caller can remove their files.
func (q *Queries) DeleteConversationAttachments(ctx context.Context, conv ConversationID) ([]Attachment, error) {
	var out []Attachment
	err := q.atomic(ctx, func(q *Queries) error {
		var err error
		out, err = list(ctx, q, "list conversation attachments", `SELECT `+attachmentCols+` FROM attachments WHERE conversation_id = $1`,
			[]any{string(conv)}, scanAttachment)
		if err != nil {
			return err
		}
		_, err = q.exec(ctx, "delete conversation attachments", `DELETE FROM attachments WHERE conversation_id = $1`, string(conv))
		return err
	})
	return out, err
}

// PurgeUnusedAttachments removes the rows of attachments no message used that were uploaded
// before olderThan, and returns them so the caller can remove their files.
func (q *Queries) PurgeUnusedAttachments(ctx context.Context, olderThan time.Time, limit int) ([]Attachment, error) {
	var out []Attachment
	err := q.atomic(ctx, func(q *Queries) error {
		var err error
		out, err = list(ctx, q, "list unused attachments",
			`SELECT `+attachmentCols+` FROM attachments WHERE conversation_id IS NULL AND created_at < $1 ORDER BY created_at LIMIT $2`,
			[]any{ts(normTime(olderThan)), clampLimit(limit)}, scanAttachment)
		for _, a := range out {
			if err != nil {
				break
			}
			_, err = q.exec(ctx, "purge attachment", `DELETE FROM attachments WHERE id = $1`, string(a.ID))
		}
		return err
	})
	return out, err
}
