package runtime

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/parley-voice/parley/control/store"
	"github.com/parley-voice/parley/session"
)

// CommandParams are the parameters of a steering command, as stored with it.
type CommandParams struct {
	Text           string `json:"text,omitempty"`
	Interrupt      bool   `json:"interrupt,omitempty"`
	VisibleToAgent bool   `json:"visible_to_agent,omitempty"`
	Destination    string `json:"destination,omitempty"`
	Mode           string `json:"mode,omitempty"`
	Summary        string `json:"summary,omitempty"`
}

// Command hands a stored, pending command to the node that runs its conversation, which
// carries it out and records in the store how it went (done, or failed with the reason).
// It returns once that node has taken it, with ErrNotLive when no node runs the conversation.
func (rt *Runtime) Command(ctx context.Context, cmd store.Command) error {
	if rt.lookup(cmd.ConversationID) == nil {
		if c, err := rt.store.GetConversation(ctx, cmd.ConversationID); err == nil && durableText(c.Channel) {
			return rt.chatCommand(ctx, cmd) // no node keeps a chat: this one carries it out
		}
	}
	owner, err := rt.Owner(ctx, cmd.ConversationID)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	_, err = rt.mesh.call(ctx, owner, kindCommand, cmd, nil)
	return err
}

func (rt *Runtime) handleCommand(ctx context.Context, body json.RawMessage, reply func(any, bool, error)) {
	var cmd store.Command
	if err := json.Unmarshal(body, &cmd); err != nil {
		reply(nil, true, fmt.Errorf("%w: %v", ErrBadRequest, err))
		return
	}
	l := rt.lookup(cmd.ConversationID)
	if l == nil {
		reply(nil, true, ErrNotLive)
		return
	}
	l.beginCommand() // the end, if this command causes it (or comes meanwhile), is stored after its outcome
	defer l.endCommand()
	reply(nil, true, nil) // taken: how it goes is recorded in the store
	status, reason := rt.execute(ctx, l, cmd)
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if _, err := rt.store.FinishCommand(fctx, cmd.ID, status, reason, rt.now()); err != nil {
		rt.log.Warn("command: cannot record how it went", "command", cmd.ID, "err", err)
	}
}

// execute carries out a command on a live conversation and returns how it went.
func (rt *Runtime) execute(ctx context.Context, l *live, cmd store.Command) (status, reason string) {
	var p CommandParams
	if len(cmd.Params) > 0 {
		if err := json.Unmarshal(cmd.Params, &p); err != nil {
			return store.CommandFailed, "the command's parameters cannot be read"
		}
	}
	if cmd.Kind == store.CommandEnd {
		l.stop(session.EndAPI)
		return store.CommandDone, ""
	}
	sess := l.engine()
	if sess == nil {
		return store.CommandFailed, "the call has not been answered yet"
	}
	var sc session.Command
	switch cmd.Kind {
	case store.CommandSay:
		sc = session.Command{Kind: session.CommandSay, Text: p.Text, Interrupt: p.Interrupt}
	case store.CommandNote:
		sc = session.Command{Kind: session.CommandNote, Text: p.Text, VisibleToAgent: p.VisibleToAgent}
	case store.CommandTransfer:
		if l.simulated.Load() {
			// A test call has nobody to hand over: the simulated callee is transferred at once.
			l.stop(session.EndTransferred)
			return store.CommandDone, ""
		}
		if l.conv.Channel == store.ChannelChat {
			return store.CommandFailed, "a chat cannot be transferred"
		}
		sc = session.Command{Kind: session.CommandTransfer, Transfer: session.TransferRequest{
			Destination: p.Destination, Mode: session.TransferMode(p.Mode), Summary: p.Summary}}
	default:
		return store.CommandFailed, "unknown command " + cmd.Kind
	}
	resc := sess.Execute(sc)
	select {
	case res := <-resc:
		return res.Status, res.Reason
	case <-ctx.Done():
		return store.CommandFailed, "the node stopped"
	case <-sess.Done():
		// The command may have finished as the conversation ended.
		select {
		case res := <-resc:
			return res.Status, res.Reason
		case <-time.After(time.Second):
			return store.CommandFailed, "the conversation ended"
		}
	}
}

// endRequest asks the node of a conversation to end it.
type endRequest struct {
	ConversationID store.ConversationID `json:"conversation_id"`
	Reason         string               `json:"reason"`
	IfIdle         bool                 `json:"if_idle,omitempty"`
}

// End ends a conversation on whichever node runs it and waits, bounded by ctx, until its end is
// stored. With ifIdle a chat whose agent is answering a message is left alone (ErrBusy). A
// conversation no node runs is ended in the store directly (its node went away).
func (rt *Runtime) End(ctx context.Context, id store.ConversationID, reason session.EndReason, ifIdle bool) error {
	if rt.lookup(id) == nil {
		if c, err := rt.store.GetConversation(ctx, id); err == nil && durableText(c.Channel) && c.Status == store.ConvInProgress {
			return rt.endChatByID(ctx, id, reason, ifIdle)
		}
	}
	owner, err := rt.Owner(ctx, id)
	if errors.Is(err, ErrNotLive) {
		c, err := rt.store.GetConversation(ctx, id)
		if err != nil {
			return err
		}
		if c.Ended() {
			return nil
		}
		if err := rt.storeEnd(ctx, c, reason, session.Cost{}, nil, "", store.CallOutcome{}); err != nil {
			return err
		}
		rt.settleCommands(ctx, id)
		rt.hub.notify(ctx, linesNote{ID: id, Seq: c.LastSeq, Ended: true})
		return nil
	}
	if err != nil {
		return err
	}
	_, err = rt.mesh.call(ctx, owner, kindEnd, endRequest{ConversationID: id, Reason: string(reason), IfIdle: ifIdle}, nil)
	return err
}

func (rt *Runtime) handleEnd(ctx context.Context, body json.RawMessage, reply func(any, bool, error)) {
	var req endRequest
	if err := json.Unmarshal(body, &req); err != nil {
		reply(nil, true, fmt.Errorf("%w: %v", ErrBadRequest, err))
		return
	}
	l := rt.lookup(req.ConversationID)
	if l == nil {
		reply(nil, true, nil) // ended meanwhile
		return
	}
	if req.IfIdle && l.busy.Load() {
		reply(nil, true, ErrBusy)
		return
	}
	l.stop(session.EndReason(req.Reason))
	select {
	case <-l.p.done:
		reply(nil, true, nil)
	case <-ctx.Done():
		reply(nil, true, ctx.Err())
	}
}

// settleCommands settles the commands still pending once a conversation has ended.
func (rt *Runtime) settleCommands(ctx context.Context, id store.ConversationID) {
	if _, err := rt.store.FailPendingCommands(ctx, id, "the conversation ended", rt.now()); err != nil {
		rt.log.Warn("conversation: cannot settle its pending commands", "conversation", id, "err", err)
	}
}
