package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/parley-voice/parley/control/fault"

	"github.com/parley-voice/parley/control/agentdef"
	"github.com/parley-voice/parley/control/jsoncheck"
	"github.com/parley-voice/parley/control/problem"
	"github.com/parley-voice/parley/control/runtime"
	"github.com/parley-voice/parley/control/store"
	"github.com/parley-voice/parley/session"
)

func (a *API) createChat(w http.ResponseWriter, r *http.Request) error {
	ctx := r.Context()
	c := callFrom(ctx)
	who := callerOf(c.p)
	cs, err := a.checkStart(ctx, a.Store.Queries, who, c.value, startChecks{channel: agentdef.ChannelChat})
	if err != nil {
		return err
	}
	if a.Runtime == nil {
		return mapRuntimeError(runtime.ErrProvider, false)
	}
	conv := newConversation(who, cs, store.ChannelChat, "inbound", store.ConvInProgress)
	conv.ViaAPI = true
	err = a.Store.Tx(ctx, func(tx *store.Tx) error {
		created, err := tx.CreateConversation(ctx, conv)
		if err != nil {
			return err
		}
		conv = created
		au := &auditor{api: a, r: r, tx: tx}
		return au.record("chat.created", "conversation", string(conv.ID), conv.ProjectID, map[string]any{"agent_id": conv.AgentID})
	})
	if err != nil {
		return err
	}
	first, err := a.Runtime.StartChat(ctx, conv.ID)
	if err != nil {
		return mapRuntimeError(err, false)
	}
	v := viewConversation(conv)
	lines := make([]lineView, len(first))
	for i, l := range first {
		lines[i] = viewSessionLine(l)
	}
	v.Transcript = &lines
	return a.answerCreated(w, r, c, "/v1/conversations/"+string(conv.ID), v)
}

// chatTurnView is the ChatTurn object.
type chatTurnView struct {
	Object         string   `json:"object"`
	ConversationID string   `json:"conversation_id"`
	User           lineView `json:"user"`
	Agent          lineView `json:"agent"`
	Ended          bool     `json:"ended"`
	EndReason      *string  `json:"end_reason"`
}

// messageBody is the body of POST /v1/conversations/{id}/messages.
type messageBody struct {
	Message       string   `json:"message"`
	AttachmentIDs []string `json:"attachment_ids"`
	Stream        bool     `json:"stream"`
}

// wantsStream reports whether the client asked for server-sent events.
func wantsStream(r *http.Request, asked bool) bool {
	if asked {
		return true
	}
	for _, part := range strings.Split(r.Header.Get("Accept"), ",") {
		if mt, _, err := mime.ParseMediaType(strings.TrimSpace(part)); err == nil && mt == "text/event-stream" {
			return true
		}
	}
	return false
}

// sse writes server-sent events (https://html.spec.whatwg.org/multipage/server-sent-events.html),
// each flushed at once.
type sse struct {
	w       http.ResponseWriter
	rc      *http.ResponseController
	started bool
}

func (s *sse) start() {
	if s.started {
		return
	}
	s.started = true
	h := s.w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no")
	s.w.WriteHeader(http.StatusOK)
}

func (s *sse) event(name string, v any) {
	s.start()
	b, _ := json.Marshal(v)
	fmt.Fprintf(s.w, "event: %s\ndata: %s\n\n", name, b)
	_ = s.rc.Flush()
}

func (a *API) sendMessage(w http.ResponseWriter, r *http.Request) error {
	ctx := r.Context()
	c := callFrom(ctx)
	var body messageBody
	if err := c.bind(&body); err != nil {
		return err
	}
	conv, err := reachableConversation(r, a.Store.Queries)
	if err != nil {
		return err
	}
	switch {
	case conv.Channel != store.ChannelChat:
		return fault.E(fault.CodeNotAChat, "Conversation %s is a %s conversation, not a chat.", conv.ID, conv.Channel)
	case !conv.ViaAPI:
		return errConversationNotFound(string(conv.ID)) // a chat not started through the API is not the API's
	case conv.Ended():
		if conv.EndReason == string(session.EndProviderError) {
			return fault.E(fault.CodeConversationEnded, "The chat has ended: its agent's provider failed.")
		}
		return fault.E(fault.CodeConversationEnded, "The chat has ended (%s); start another.", conv.EndReason)
	}
	if conv.Mode == store.ModeLive {
		org, err := a.Store.GetOrg(ctx, conv.OrgID)
		if err != nil {
			return err
		}
		if org.CreditMicros <= 0 {
			return fault.E(fault.CodeCreditExhausted, "The organization's credit is used up (%s USD).", formatUSD(org.CreditMicros))
		}
	}
	var ids []store.AttachmentID
	var ps []jsoncheck.Problem
	for i, raw := range body.AttachmentIDs {
		id, err := store.ParseID[store.AttachmentID](raw)
		var at store.Attachment
		if err == nil {
			at, err = a.Store.GetAttachment(ctx, id)
		}
		switch {
		case errors.Is(err, store.ErrNotFound), errors.Is(err, store.ErrInvalid), err == nil && at.OrgID != conv.OrgID:
			ps = append(ps, jsoncheck.Problem{Pointer: fmt.Sprintf("/attachment_ids/%d", i), Code: "invalid_value", Detail: fmt.Sprintf("No attachment %s.", quoteID(raw))})
		case err != nil:
			return err
		case at.ConversationID != "" && at.ConversationID != conv.ID:
			ps = append(ps, jsoncheck.Problem{Pointer: fmt.Sprintf("/attachment_ids/%d", i), Code: "invalid_value", Detail: fmt.Sprintf("Attachment %s was sent in another conversation.", raw)})
		default:
			ids = append(ids, id)
		}
	}
	if len(ps) > 0 {
		return invalid(fault.CodeValidationFailed, ps)
	}
	if a.Runtime == nil {
		return mapRuntimeError(runtime.ErrProvider, false)
	}
	stream := wantsStream(r, body.Stream)
	out := &sse{w: w, rc: http.NewResponseController(w)}
	var onDelta func(string)
	if stream {
		onDelta = func(d string) { out.event("delta", map[string]string{"text": d}) }
	}
	turn, err := a.Runtime.Send(ctx, conv.ID, body.Message, ids, onDelta)
	if errors.Is(err, runtime.ErrNotLive) {
		// No node runs the chat any more (its node went away): it is over.
		_ = a.Runtime.End(context.WithoutCancel(ctx), conv.ID, session.EndNetworkLost, false)
		err = runtime.ErrEnded
	}
	if errors.Is(err, runtime.ErrBadRequest) {
		err = invalid(fault.CodeValidationFailed, []jsoncheck.Problem{{Pointer: "/attachment_ids", Code: "invalid_value", Detail: "An attachment cannot be sent in this chat."}})
	}
	if err != nil {
		err = mapRuntimeError(err, false)
		if !out.started {
			return err
		}
		var pe *fault.Error
		if !errors.As(err, &pe) {
			a.Log.ErrorContext(ctx, "chat: the reply failed", "err", err, "request_id", problem.RequestID(ctx))
			pe = fault.E(fault.CodeInternal, "The reply failed; quote request_id %s to support.", problem.RequestID(ctx))
		}
		out.event("error", map[string]string{"code": pe.Code, "detail": pe.Detail})
		return nil
	}
	v := chatTurnView{Object: "chat_turn", ConversationID: string(conv.ID), User: viewSessionLine(turn.User), Agent: viewSessionLine(turn.Agent),
		Ended: turn.Ended, EndReason: strPtr(turn.EndReason)}
	if !stream {
		return a.answer(w, r, c, http.StatusOK, "", v)
	}
	if c.idem != nil {
		b, _ := encodeJSON(v)
		sctx := context.WithoutCancel(ctx)
		if err := a.Store.Tx(sctx, func(tx *store.Tx) error {
			return a.saveIdempotency(sctx, tx, c, &answer{status: http.StatusOK, header: map[string]string{"Content-Type": "application/json"}, body: b})
		}); err != nil {
			a.Log.WarnContext(ctx, "the answer of an Idempotency-Key was not stored", "err", err, "request_id", problem.RequestID(ctx))
		}
	}
	out.event("done", v)
	return nil
}

// replayMessage answers a replayed sendMessage: as JSON, or as a stream of one done event when
// the retry asks for a stream.
func replayMessage(w http.ResponseWriter, r *http.Request, status int, body []byte) {
	c := callFrom(r.Context())
	var mb messageBody
	if c != nil {
		_ = json.Unmarshal(c.raw, &mb)
	}
	if wantsStream(r, mb.Stream) {
		out := &sse{w: w, rc: http.NewResponseController(w)}
		var v any
		_ = json.Unmarshal(body, &v)
		out.event("done", v)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// Attachments: pictures uploaded for chat messages.
const (
	maxAttachment   = 5 << 20 // bytes
	attachmentsKeep = 24 * time.Hour
)

// MaxUploadBytes is the largest request body an upload takes (the node's body limit must
// allow it).
const MaxUploadBytes = maxAttachment + 64<<10

var imageTypes = map[string]string{"image/png": ".png", "image/jpeg": ".jpg", "image/gif": ".gif", "image/webp": ".webp"}

// attachmentView is the Attachment object.
type attachmentView struct {
	Object    string    `json:"object"`
	ID        string    `json:"id"`
	MIMEType  string    `json:"mime_type"`
	Size      int64     `json:"size"`
	CreatedAt time.Time `json:"created_at"`
}

func (a *API) uploadAttachment(w http.ResponseWriter, r *http.Request) error {
	ctx := r.Context()
	c := callFrom(ctx)
	mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil || mt != "multipart/form-data" {
		return fault.E(fault.CodeUnsupportedMediaType, "Upload the picture as multipart/form-data with a part named file (got %q).", r.Header.Get("Content-Type"))
	}
	if r.ContentLength > MaxUploadBytes {
		return fault.E(fault.CodeBodyTooLarge, "An attachment is at most %d bytes.", maxAttachment)
	}
	r.Body = http.MaxBytesReader(w, r.Body, MaxUploadBytes)
	mr, err := r.MultipartReader()
	if err != nil {
		return fault.E(fault.CodeUnsupportedMediaType, "The body is not multipart/form-data: %v.", err)
	}
	var data []byte
	for {
		part, err := mr.NextPart()
		if errors.Is(err, io.EOF) {
			break
		}
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return fault.E(fault.CodeBodyTooLarge, "An attachment is at most %d bytes.", maxAttachment)
		}
		if err != nil {
			return invalid(fault.CodeValidationFailed, []jsoncheck.Problem{{Pointer: "", Code: "malformed", Detail: "The multipart body cannot be read: " + err.Error()}})
		}
		if part.FormName() != "file" {
			part.Close()
			return invalid(fault.CodeValidationFailed, []jsoncheck.Problem{{Pointer: "/" + jsoncheck.EscapePointer(part.FormName()), Code: jsoncheck.CodeUnknownField,
				Detail: fmt.Sprintf("Unknown part %q: the upload takes one part, file.", part.FormName())}})
		}
		if data != nil {
			return invalid(fault.CodeValidationFailed, []jsoncheck.Problem{{Pointer: "/file", Code: "not_unique", Detail: "Send one file per upload."}})
		}
		data, err = io.ReadAll(io.LimitReader(part, maxAttachment+1))
		if errors.As(err, &mbe) || len(data) > maxAttachment {
			return fault.E(fault.CodeBodyTooLarge, "An attachment is at most %d bytes.", maxAttachment)
		}
		if err != nil {
			return invalid(fault.CodeValidationFailed, []jsoncheck.Problem{{Pointer: "/file", Code: "malformed", Detail: "The file cannot be read: " + err.Error()}})
		}
		if data == nil {
			data = []byte{}
		}
	}
	if len(data) == 0 {
		return invalid(fault.CodeValidationFailed, []jsoncheck.Problem{{Pointer: "/file", Code: jsoncheck.CodeRequired, Detail: "The upload needs a non-empty part named file."}})
	}
	ctype := http.DetectContentType(data)
	ext, ok := imageTypes[ctype]
	if !ok {
		return fault.E(fault.CodeUnsupportedImage, "The file is %s by its content; send a PNG, JPEG, WebP or GIF picture.", ctype)
	}
	id := store.NewAttachmentID()
	rel := filepath.ToSlash(filepath.Join("attachments", string(id)+ext))
	path := a.dataPath(rel)
	if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
		return fmt.Errorf("attachments directory: %w", err)
	}
	if err := os.WriteFile(path, data, 0o640); err != nil {
		return fmt.Errorf("write attachment: %w", err)
	}
	err = a.change(w, r, func(tx *store.Tx, au *auditor) (int, any, error) {
		at, err := tx.CreateAttachment(ctx, store.Attachment{ID: id, OrgID: c.p.Org.ID, KeyID: c.p.Key.ID, MIME: ctype, Size: int64(len(data)), Path: rel})
		if err != nil {
			return 0, nil, err
		}
		if err := au.record("attachment.uploaded", "attachment", string(at.ID), "", map[string]any{"mime_type": ctype, "size": at.Size}); err != nil {
			return 0, nil, err
		}
		return http.StatusCreated, attachmentView{Object: "attachment", ID: string(at.ID), MIMEType: at.MIME, Size: at.Size, CreatedAt: at.CreatedAt}, nil
	})
	if err != nil {
		os.Remove(path)
	}
	return err
}

// PurgeAttachments removes the pictures uploaded more than a day ago that no message used,
// and returns how many. The worker role calls it periodically.
func (a *API) PurgeAttachments(ctx context.Context) (int, error) {
	gone, err := a.Store.PurgeUnusedAttachments(ctx, a.now().Add(-attachmentsKeep), 100)
	for _, at := range gone {
		if rerr := os.Remove(a.dataPath(at.Path)); rerr != nil && !errors.Is(rerr, os.ErrNotExist) {
			a.Log.WarnContext(ctx, "attachment purged, but its file was not removed", "attachment", at.ID, "err", rerr)
		}
	}
	return len(gone), err
}
