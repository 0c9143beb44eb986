package api

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/parley-voice/parley/control/agentdef"
	"github.com/parley-voice/parley/control/app/calls"
	"github.com/parley-voice/parley/control/app/chats"
	"github.com/parley-voice/parley/control/app/conversations"
	"github.com/parley-voice/parley/control/problem"
	"github.com/parley-voice/parley/control/runtime"
	"github.com/parley-voice/parley/control/store"
	"github.com/parley-voice/parley/session"
)

// runtimeAdapter adapts the runtime to the small interfaces the domain places calls through
// (calls.Media, calls.Definitions, chats.Engine), classifying its errors as the problems the API
// answers (mapRuntimeError). A nil runtime (no node runs conversations) answers that phone
// calls, voice and chats are unavailable.
type runtimeAdapter struct {
	rt  *runtime.Runtime
	log *slog.Logger
}

var (
	_ calls.Media       = runtimeAdapter{}
	_ calls.Definitions = runtimeAdapter{}
)

func (m runtimeAdapter) CanPlace(channel string) error {
	phone := channel == store.ChannelPhone
	if m.rt == nil {
		return conversations.RuntimeFault(runtime.ErrNoMedia, phone)
	}
	return conversations.RuntimeFault(m.rt.CanPlace(), phone)
}

func (m runtimeAdapter) Place(ctx context.Context, mode store.Mode, p calls.Placement) error {
	if m.rt == nil {
		return conversations.RuntimeFault(runtime.ErrNoMedia, true)
	}
	return conversations.RuntimeFault(m.rt.Place(ctx, mode, placeRequest(p)), true)
}

func (m runtimeAdapter) Abandon(ctx context.Context, org store.OrgID, id store.ConversationID) {
	if m.rt == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if err := m.rt.End(ctx, id, session.EndFailed, false); err != nil {
		m.log.WarnContext(ctx, "a conversation that could not start was not ended", "conversation", id, "err", err, "request_id", problem.RequestID(ctx))
	}
	m.rt.ReleaseCallSlot(ctx, org, id)
}

func (m runtimeAdapter) AcquireCallSlot(ctx context.Context, org store.OrgID, id store.ConversationID, limit int) error {
	if m.rt == nil {
		return conversations.RuntimeFault(runtime.ErrNoMedia, true)
	}
	return conversations.RuntimeFault(m.rt.AcquireCallSlot(ctx, org, id, limit), true)
}

func (m runtimeAdapter) ReleaseCallSlot(ctx context.Context, org store.OrgID, id store.ConversationID) {
	if m.rt != nil {
		m.rt.ReleaseCallSlot(ctx, org, id)
	}
}

func (m runtimeAdapter) CountDaily(ctx context.Context, org store.OrgID, limit int) (bool, error) {
	if m.rt == nil {
		return false, conversations.RuntimeFault(runtime.ErrNoMedia, false)
	}
	ok, err := m.rt.CountDaily(ctx, org, limit)
	return ok, conversations.RuntimeFault(err, false)
}

func (m runtimeAdapter) StartWebCall(ctx context.Context, id store.ConversationID, participant string) (calls.WebCallJoin, error) {
	if m.rt == nil {
		return calls.WebCallJoin{}, conversations.RuntimeFault(runtime.ErrNoMedia, false)
	}
	wc, err := m.rt.StartWebCall(ctx, id, participant)
	if err != nil {
		return calls.WebCallJoin{}, conversations.RuntimeFault(err, false)
	}
	return calls.WebCallJoin{ID: wc.ID, URL: wc.URL, Token: wc.Token, ExpiresAt: wc.ExpiresAt}, nil
}

func (m runtimeAdapter) Definition(ctx context.Context, q *store.Queries, ag store.Agent, version int) (*agentdef.Definition, []string, error) {
	def, err := runtime.LoadDefinition(ctx, q, ag, version)
	if errors.Is(err, runtime.ErrVersionNotFound) {
		return nil, nil, calls.ErrNoVersion
	}
	if err != nil {
		return nil, nil, err
	}
	return def, runtime.Languages(def), nil
}

var _ chats.Engine = runtimeAdapter{}

func (m runtimeAdapter) Ready() error {
	if m.rt == nil {
		return conversations.RuntimeFault(runtime.ErrProvider, false)
	}
	return nil
}

func (m runtimeAdapter) StartChat(ctx context.Context, id store.ConversationID) ([]conversations.TranscriptLine, error) {
	first, err := m.rt.StartChat(ctx, id)
	if err != nil {
		return nil, conversations.RuntimeFault(err, false)
	}
	lines := make([]conversations.TranscriptLine, len(first))
	for i, l := range first {
		lines[i] = conversations.SessionLine(l)
	}
	return lines, nil
}

func (m runtimeAdapter) Send(ctx context.Context, id store.ConversationID, text string, attachments []store.AttachmentID, onDelta func(string)) (chats.Turn, error) {
	turn, err := m.rt.Send(ctx, id, text, attachments, onDelta)
	switch {
	case errors.Is(err, runtime.ErrBadRequest):
		return chats.Turn{}, chats.ErrAttachmentRefused
	case err != nil:
		return chats.Turn{}, conversations.RuntimeFault(err, false)
	}
	return chats.Turn{User: conversations.SessionLine(turn.User), Agent: conversations.SessionLine(turn.Agent), Ended: turn.Ended, EndReason: turn.EndReason}, nil
}

// placeRequest is the runtime's form of a placement (issue 15: a campaign's ring timeout and
// answering-machine detection ride along).
func placeRequest(p calls.Placement) runtime.PlaceRequest {
	r := runtime.PlaceRequest{ConversationID: p.ConversationID, Trunk: p.Trunk, Lines: p.Lines, RingTimeoutMS: p.RingTimeout.Milliseconds()}
	if p.AMD != nil {
		r.AMD = &runtime.AMD{LeaveMessage: p.AMD.LeaveMessage, Message: p.AMD.Message}
	}
	return r
}
