package chats

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/parley-voice/parley/control/app"
	"github.com/parley-voice/parley/control/fault"
	"github.com/parley-voice/parley/control/store"
)

// Attachments: pictures uploaded for chat messages.
const (
	// MaxAttachment is the largest picture, in bytes.
	MaxAttachment   = 5 << 20
	attachmentsKeep = 24 * time.Hour
	purgeBatch      = 100
)

// imageTypes are the pictures a chat takes, by media type, with their files' extension.
var imageTypes = map[string]string{"image/png": ".png", "image/jpeg": ".jpg", "image/gif": ".gif", "image/webp": ".webp"}

// AttachmentUpload documents the multipart/form-data body of an upload (the transport reads
// its parts).
type AttachmentUpload struct {
	File string `json:"file" doc:"A PNG, JPEG, WebP or GIF picture of at most 5 MB." jsonschema:"format=binary"`
}

// Attachment is the Attachment object.
type Attachment struct {
	Object    string   `json:"object" jsonschema:"enum=attachment"`
	ID        string   `json:"id" jsonschema:"format=uuid"`
	MIMEType  string   `json:"mime_type" jsonschema:"enum=image/png,enum=image/jpeg,enum=image/gif,enum=image/webp"`
	Size      int64    `json:"size" jsonschema:"minimum=1"`
	CreatedAt app.Time `json:"created_at"`
}

// SchemaDoc describes the object in the document.
func (Attachment) SchemaDoc() string {
	return "A picture uploaded to send in a chat message; deleted with the conversation that used it, or after a day when none did."
}

// Upload keeps a picture the actor uploaded; ctype is its media type as read from its content.
// It is written under the data directory, then recorded (attachment.uploaded); the file is
// removed again when the record fails.
func (s *Service) Upload(ctx context.Context, act app.Actor, data []byte, ctype string) (Attachment, error) {
	ext, ok := imageTypes[ctype]
	if !ok {
		return Attachment{}, fault.E(fault.CodeUnsupportedImage, "The file is %s by its content; send a PNG, JPEG, WebP or GIF picture.", ctype)
	}
	id := store.NewAttachmentID()
	rel := filepath.ToSlash(filepath.Join("attachments", string(id)+ext))
	path := s.dataPath(rel)
	if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
		return Attachment{}, fmt.Errorf("attachments directory: %w", err)
	}
	if err := os.WriteFile(path, data, 0o640); err != nil {
		return Attachment{}, fmt.Errorf("write attachment: %w", err)
	}
	keyID := store.KeyID("")
	if act.Type == store.ActorAPIKey {
		keyID = store.KeyID(act.ID)
	}
	at, err := app.Change(ctx, s.Store, act, func(tx *store.Tx, au *app.Audit) (Attachment, error) {
		at, err := tx.CreateAttachment(ctx, store.Attachment{ID: id, OrgID: act.Org.ID, KeyID: keyID, MIME: ctype, Size: int64(len(data)), Path: rel})
		if err != nil {
			return Attachment{}, err
		}
		if err := au.Record("attachment.uploaded", "attachment", string(at.ID), "", map[string]any{"mime_type": ctype, "size": at.Size}); err != nil {
			return Attachment{}, err
		}
		return Attachment{Object: "attachment", ID: string(at.ID), MIMEType: at.MIME, Size: at.Size, CreatedAt: app.T(at.CreatedAt)}, nil
	})
	if err != nil {
		os.Remove(path)
	}
	return at, err
}

// PurgeAttachments removes the pictures uploaded more than a day ago that no message used, and
// returns how many. The workers call it periodically; any number may run it at once.
func (s *Service) PurgeAttachments(ctx context.Context) (int, error) {
	gone, err := s.Store.PurgeUnusedAttachments(ctx, s.now().Add(-attachmentsKeep), purgeBatch)
	for _, at := range gone {
		if rerr := os.Remove(s.dataPath(at.Path)); rerr != nil && !errors.Is(rerr, os.ErrNotExist) {
			s.log().WarnContext(ctx, "attachment purged, but its file was not removed", "attachment", at.ID, "err", rerr)
		}
	}
	return len(gone), err
}

// dataPath is the file of rel under the data directory.
func (s *Service) dataPath(rel string) string {
	return filepath.Join(s.DataDir, filepath.FromSlash(rel))
}
