package runtime

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/parley-voice/parley/control/store"
	"github.com/parley-voice/parley/session"
	"github.com/parley-voice/parley/session/llm"
)

// Mesh request kinds.
const (
	kindPlace   = "place"
	kindCommand = "command"
	kindWebCall = "webcall"
	kindListen  = "listen"
	kindEnd     = "end"
)

// Chats are durable (issue 13). No node keeps a chat between its messages: what it carries
// from one message to the next (its LLM messages, length, failures, cost and idle deadline) is
// in the store, and whichever node takes a message builds the engine from there, answers, and
// stores what changed with the turn's lines in one transaction. A node takes a chat's lease in
// the store for the time of one message (renewed while the reply runs), so two nodes never
// answer one chat at once and its messages are served one after the other; a node that dies
// mid-message leaves a lease that runs out (ChatLeaseTTL). A restart, a drain or a dead node
// ends no chat: only the agent, the API, a failing provider and the idle deadline do.

// durableText reports whether conversations of channel are chats in this sense: a text chat of
// the API, or a messaging-app conversation (issue 19), which runs on the same durable path.
func durableText(channel string) bool {
	return channel == store.ChannelChat || channel == store.ChannelWhatsApp
}

// chatLease is a chat's lease held by this node for one message or command.
type chatLease struct {
	rt     *Runtime
	holder string
	conv   store.Conversation
	st     store.ChatState
	ctx    context.Context // ends when the lease is given up, lost, or the node stops
	cancel context.CancelFunc
	once   sync.Once
	done   chan struct{} // the renewal has stopped
	lost   atomic.Bool   // set by the renewal before it cancels ctx
}

// leaseChat takes the lease of chat id. Without wait a chat held by another holder is ErrBusy;
// with wait it is asked again until ctx ends. An ended chat is ErrEnded; a conversation that
// is no chat ErrUnsupported.
func (rt *Runtime) leaseChat(ctx context.Context, id store.ConversationID, wait bool) (*chatLease, error) {
	var tok [6]byte
	_, _ = rand.Read(tok[:])
	holder := rt.o.NodeID + "/" + hex.EncodeToString(tok[:])
	backoff := 20 * time.Millisecond
	for {
		c, st, ok, err := rt.store.LeaseChat(ctx, id, holder, rt.now(), rt.o.ChatLeaseTTL)
		switch {
		case err != nil:
			return nil, err
		case ok:
			l := &chatLease{rt: rt, holder: holder, conv: c, st: st, done: make(chan struct{})}
			l.ctx, l.cancel = context.WithCancel(rt.ctx)
			go l.renew()
			return l, nil
		case !durableText(c.Channel):
			return nil, ErrUnsupported
		case c.Status != store.ConvInProgress:
			return nil, ErrEnded
		case !wait:
			return nil, ErrBusy
		}
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, fmt.Errorf("%w (%v)", ErrBusy, ctx.Err())
		case <-t.C:
		}
		backoff = min(backoff*2, 500*time.Millisecond)
	}
}

// renew keeps the lease while it is held; when the store says it is no longer this holder's,
// the work under it is cancelled.
func (l *chatLease) renew() {
	defer close(l.done)
	every := l.rt.o.ChatLeaseTTL / 3
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-l.ctx.Done():
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(l.ctx, every)
		ok, err := l.rt.store.RenewChatLease(ctx, l.conv.ID, l.holder, l.rt.now().Add(l.rt.o.ChatLeaseTTL))
		cancel()
		switch {
		case err != nil && l.ctx.Err() == nil:
			l.rt.log.Warn("chat: cannot renew its lease", "conversation", l.conv.ID, "err", err)
		case err == nil && !ok:
			l.rt.log.Warn("chat: its lease was lost; the message in progress is dropped", "conversation", l.conv.ID)
			l.lost.Store(true)
			l.cancel()
			return
		}
	}
}

// stop stops the renewal; with release the lease is given up in the store too (it was not
// given up with the state that was saved).
func (l *chatLease) stop(release bool) {
	l.once.Do(func() {
		l.cancel()
		<-l.done
		if !release {
			return
		}
		ctx, cancel := context.WithTimeout(context.WithoutCancel(l.rt.ctx), 5*time.Second)
		defer cancel()
		if err := l.rt.store.ReleaseChatLease(ctx, l.conv.ID, l.holder); err != nil {
			l.rt.log.Warn("chat: cannot give up its lease; it runs out", "conversation", l.conv.ID, "err", err)
		}
	})
}

// chatSink is the engine's sink for one message of a chat: it keeps the lines and the end,
// which are stored with the chat's state once the message is answered.
type chatSink struct {
	mu    sync.Mutex
	lines []session.Line
	ended session.EndReason
}

func (s *chatSink) LineAdded(l session.Line) {
	s.mu.Lock()
	s.lines = append(s.lines, l)
	s.mu.Unlock()
}
func (s *chatSink) Interim(string)                    {}
func (s *chatSink) StateChanged(session.State)        {}
func (s *chatSink) TurnCompleted(session.TurnMetrics) {}
func (s *chatSink) Ended(r session.EndReason, _ session.Cost) {
	s.mu.Lock()
	s.ended = r
	s.mu.Unlock()
}

func (s *chatSink) take() ([]session.Line, session.EndReason) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ls := s.lines
	s.lines = nil
	return ls, s.ended
}

// storedMessage is the stored form of an LLM message of a chat. Pictures are named by their
// attachment (their files stay under the data directory), not copied.
type storedMessage struct {
	Role        llm.Role             `json:"role"`
	Content     string               `json:"content,omitempty"`
	ToolCalls   []storedToolCall     `json:"tool_calls,omitempty"`
	ToolCallID  string               `json:"tool_call_id,omitempty"`
	Name        string               `json:"name,omitempty"`
	Attachments []store.AttachmentID `json:"attachments,omitempty"`
	ImageURLs   []string             `json:"image_urls,omitempty"`
}

type storedToolCall struct {
	ID        string `json:"id"`
	Name      string `json:"name"`
	Arguments string `json:"arguments"` // as the model wrote it, which may not be valid JSON
}

// encodeMessages turns new LLM messages into their stored form; the pictures of the message
// sent (the one user message with images) are named by attachments, in order.
func encodeMessages(ms []llm.Message, attachments []store.AttachmentID) ([]json.RawMessage, error) {
	out := make([]json.RawMessage, 0, len(ms))
	for _, m := range ms {
		sm := storedMessage{Role: m.Role, Content: m.Content, ToolCallID: m.ToolCallID, Name: m.Name}
		for _, tc := range m.ToolCalls {
			sm.ToolCalls = append(sm.ToolCalls, storedToolCall{ID: tc.ID, Name: tc.Name, Arguments: string(tc.Arguments)})
		}
		for _, im := range m.Images {
			switch {
			case len(im.Data) > 0 && len(attachments) > 0:
				sm.Attachments = append(sm.Attachments, attachments[0])
				attachments = attachments[1:]
			case im.URL != "":
				sm.ImageURLs = append(sm.ImageURLs, im.URL)
			}
		}
		b, err := json.Marshal(sm)
		if err != nil {
			return nil, err
		}
		out = append(out, b)
	}
	return out, nil
}

// chatHistory reads a chat's LLM messages back, with the pictures from their files. A chat
// stored before its messages were kept (an older version) gets them from its transcript.
func (rt *Runtime) chatHistory(ctx context.Context, c store.Conversation, st store.ChatState) ([]llm.Message, error) {
	if st.Messages == 0 && c.LastSeq > 0 {
		return rt.historyFromLines(ctx, c)
	}
	raws, err := rt.store.ChatMessages(ctx, c.ID)
	if err != nil {
		return nil, err
	}
	out := make([]llm.Message, 0, len(raws))
	for _, raw := range raws {
		var sm storedMessage
		if err := json.Unmarshal(raw, &sm); err != nil {
			return nil, fmt.Errorf("runtime: a stored chat message of %s: %w", c.ID, err)
		}
		m := llm.Message{Role: sm.Role, Content: sm.Content, ToolCallID: sm.ToolCallID, Name: sm.Name}
		for _, tc := range sm.ToolCalls {
			m.ToolCalls = append(m.ToolCalls, llm.ToolCall{ID: tc.ID, Name: tc.Name, Arguments: json.RawMessage(tc.Arguments)})
		}
		for _, id := range sm.Attachments {
			im, err := rt.attachmentImage(ctx, id)
			if err != nil {
				rt.log.Warn("chat: a picture sent earlier cannot be read; the model no longer sees it", "conversation", c.ID, "attachment", id, "err", err)
				continue
			}
			m.Images = append(m.Images, im)
		}
		for _, u := range sm.ImageURLs {
			m.Images = append(m.Images, llm.Image{URL: u})
		}
		out = append(out, m)
	}
	return out, nil
}

// historyFromLines makes the LLM messages of a chat from its transcript.
func (rt *Runtime) historyFromLines(ctx context.Context, c store.Conversation) ([]llm.Message, error) {
	lines, err := rt.store.AllLines(ctx, c.ID)
	if err != nil {
		return nil, err
	}
	var out []llm.Message
	for _, l := range lines {
		switch l.Role {
		case string(session.RoleUser):
			out = append(out, llm.Message{Role: llm.RoleUser, Content: l.Text})
		case string(session.RoleAgent):
			out = append(out, llm.Message{Role: llm.RoleAssistant, Content: l.Text})
		}
	}
	return out, nil
}

func (rt *Runtime) attachmentImage(ctx context.Context, id store.AttachmentID) (llm.Image, error) {
	a, err := rt.store.GetAttachment(ctx, id)
	if err != nil {
		return llm.Image{}, err
	}
	data, err := os.ReadFile(filepath.Join(rt.o.DataDir, filepath.FromSlash(a.Path)))
	if err != nil {
		return llm.Image{}, err
	}
	return llm.Image{MIME: a.MIME, Data: data}, nil
}

// chatEngine builds the engine of a leased chat and resumes it from the stored state. It
// returns the engine, its sink and how many LLM messages were stored.
func (rt *Runtime) chatEngine(ctx context.Context, l *chatLease) (*session.Conversation, *chatSink, int, error) {
	sink := &chatSink{}
	sess, err := rt.build(ctx, l.conv, false, sink)
	if err != nil {
		return nil, nil, 0, err
	}
	hist, err := rt.chatHistory(ctx, l.conv, l.st)
	if err != nil {
		return nil, nil, 0, err
	}
	var cost session.Cost
	if len(l.st.Cost) > 0 {
		_ = json.Unmarshal(l.st.Cost, &cost)
	}
	if err := sess.ResumeText(l.ctx, session.TextState{History: hist, LastSeq: l.conv.LastSeq, Turns: l.st.Turns,
		LLMFailures: l.st.LLMFailures, Cost: cost}); err != nil {
		return nil, nil, 0, err
	}
	return sess, sink, len(hist), nil
}

// saveChat stores what the engine changed under the lease, with the lines its sink kept, and
// gives the lease up; when the engine ended, the end is stored in the same transaction.
func (rt *Runtime) saveChat(l *chatLease, sess *session.Conversation, sink *chatSink, from int, attachments []store.AttachmentID) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(l.ctx), 10*time.Second)
	defer cancel()
	st := sess.TextState()
	lines, ended := sink.take()
	if ended == "" {
		ended = sess.EndReason()
	}
	newMsgs := st.History[min(from, len(st.History)):]
	msgs, err := encodeMessages(newMsgs, attachments)
	if err != nil {
		return err
	}
	rows := make([]store.ConversationLine, len(lines))
	for i, ln := range lines {
		rows[i] = lineRow(ln)
	}
	cost := st.Cost
	cb, _ := json.Marshal(cost)
	now := rt.now()
	upd := store.ChatUpdate{Lines: rows, Messages: msgs, From: from, Turns: st.Turns, LLMFailures: st.LLMFailures, Cost: cb, At: now, Release: true}
	if secs := l.st.IdleSeconds; secs > 0 {
		at := now.Add(time.Duration(secs) * time.Second)
		upd.IdleAt = &at
	}
	if len(st.History) < from {
		return fmt.Errorf("runtime: chat %s: the engine dropped stored messages", l.conv.ID)
	}
	err = rt.store.Tx(ctx, func(tx *store.Tx) error {
		if err := tx.SaveChat(ctx, l.conv.ID, l.holder, upd); err != nil {
			return err
		}
		if len(rows) > 0 {
			// issue 14: a chat turn, stored at once, is one conversation.transcript batch.
			if err := transcriptBatch(ctx, tx, l.conv, rows); err != nil {
				return err
			}
		}
		if ended == "" {
			return nil
		}
		return rt.endTx(ctx, tx, l.conv, ended, chatEndCost(l.conv, cost, now), nil, "", store.CallOutcome{}, nil)
	})
	if err != nil {
		return err
	}
	l.stop(false)
	if len(rows) > 0 || ended != "" {
		rt.hub.notify(ctx, linesNote{ID: l.conv.ID, Seq: l.conv.LastSeq + int64(len(rows)), Ended: ended != ""})
	}
	if ended != "" {
		rt.settleCommands(ctx, l.conv.ID)
	}
	return nil
}

// chatEndCost is a chat's cost when it ends: what its messages used, and how long it was open.
func chatEndCost(c store.Conversation, cost session.Cost, now time.Time) session.Cost {
	if c.StartedAt != nil {
		cost.CallSeconds = now.Sub(*c.StartedAt).Seconds()
	}
	return cost
}

// endChat ends a leased chat with reason, charging what it used, and gives the lease up.
func (rt *Runtime) endChat(ctx context.Context, l *chatLease, reason session.EndReason) error {
	var cost session.Cost
	if len(l.st.Cost) > 0 {
		_ = json.Unmarshal(l.st.Cost, &cost)
	}
	err := rt.store.Tx(ctx, func(tx *store.Tx) error {
		if err := rt.endTx(ctx, tx, l.conv, reason, chatEndCost(l.conv, cost, rt.now()), nil, "", store.CallOutcome{}, nil); err != nil {
			return err
		}
		return tx.ReleaseChatLease(ctx, l.conv.ID, l.holder)
	})
	if err != nil {
		l.stop(true)
		return err
	}
	l.stop(false)
	rt.settleCommands(ctx, l.conv.ID)
	rt.hub.notify(ctx, linesNote{ID: l.conv.ID, Seq: l.conv.LastSeq, Ended: true})
	return nil
}

// stopping reports whether the node is closing (or has not started): it takes no chat message.
func (rt *Runtime) stopping() error {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	if rt.closed || !rt.started.Load() {
		return fmt.Errorf("%w: node %s is stopping", ErrUnreachable, rt.o.NodeID)
	}
	return nil
}

// StartChat opens a chat stored in progress: the agent's first message, when it has one, is
// stored as its first line with the chat's state, and returned. When the engine cannot start,
// the chat is ended (reason provider_error) and the error wraps ErrProvider.
func (rt *Runtime) StartChat(ctx context.Context, id store.ConversationID) ([]session.Line, error) {
	return rt.startChat(ctx, id, rt.o.ChatIdleTimeout)
}

// StartText opens a messaging-app conversation stored in progress (issue 19) on the durable
// chat path. The agent's greeting is not used: the conversation opens with opener as the
// agent's first line (the template the business started it with), or with nothing when the
// user wrote first. It has no idle deadline of a chat: the channel's 24-hour window ends it.
// When the engine cannot start, the conversation is ended (reason provider_error) and the error
// wraps ErrProvider.
func (rt *Runtime) StartText(ctx context.Context, id store.ConversationID, opener string) ([]session.Line, error) {
	return rt.startChat(ctx, id, 0, func(a *session.Agent) { a.FirstMessage = opener })
}

// startChat opens a chat stored in progress with its idle limit (0: none); tweaks change the
// agent the engine is built with.
func (rt *Runtime) startChat(ctx context.Context, id store.ConversationID, idle time.Duration, tweaks ...func(*session.Agent)) ([]session.Line, error) {
	if err := rt.stopping(); err != nil {
		return nil, err
	}
	if err := rt.store.StartChatState(ctx, id, idle, rt.now()); err != nil {
		return nil, err
	}
	l, err := rt.leaseChat(ctx, id, false)
	if err != nil {
		return nil, err
	}
	l.st.IdleSeconds = store.ChatIdleSeconds(idle)
	sink := &chatSink{}
	sess, err := rt.build(ctx, l.conv, false, sink, tweaks...)
	if err != nil {
		if eerr := rt.endChat(context.WithoutCancel(ctx), l, session.EndProviderError); eerr != nil {
			rt.log.Warn("chat: cannot store the end of a chat that could not start", "conversation", id, "err", eerr)
		}
		return nil, err
	}
	if err := sess.StartText(l.ctx); err != nil {
		l.stop(true)
		return nil, err
	}
	if err := rt.saveChat(l, sess, sink, 0, nil); err != nil {
		l.stop(true)
		return nil, err
	}
	return sess.Transcript(), nil
}

// Send answers one chat message on this node, whichever node answered the last one; onDelta
// (may be nil) gets the reply's text as the LLM streams it, before Send returns. The turn's
// lines and the chat's state are stored before it returns. Errors: ErrBusy while another
// message is being answered (on any node), ErrEnded, ErrLengthReached, ErrBadRequest for an
// attachment that does not fit, ErrProvider when the LLM failed, ErrUnreachable when this node
// is stopping or the answer could not be stored.
func (rt *Runtime) Send(ctx context.Context, id store.ConversationID, text string, attachments []store.AttachmentID, onDelta func(string)) (Turn, error) {
	return rt.send(ctx, id, text, attachments, 0, false, onDelta)
}

// SendMetered is Send for a messaging-app message (issue 19): it waits, bounded by ctx, while
// another message of the conversation is being answered (on any node), so that the messages of
// a user are answered in turn, and charges sttSeconds of speech-to-text the message already
// used (a voice note) with the conversation, stored with the turn.
func (rt *Runtime) SendMetered(ctx context.Context, id store.ConversationID, text string, attachments []store.AttachmentID, sttSeconds float64, onDelta func(string)) (Turn, error) {
	return rt.send(ctx, id, text, attachments, sttSeconds, true, onDelta)
}

func (rt *Runtime) send(ctx context.Context, id store.ConversationID, text string, attachments []store.AttachmentID, sttSeconds float64, wait bool, onDelta func(string)) (Turn, error) {
	if err := rt.stopping(); err != nil {
		return Turn{}, err
	}
	l, err := rt.leaseChat(ctx, id, wait)
	if err != nil {
		return Turn{}, err
	}
	defer l.stop(true) // nothing once the state is saved
	if max := rt.o.ChatMaxTurns; l.st.Turns >= max {
		return Turn{}, ErrLengthReached
	}
	images, err := rt.images(ctx, l.conv, attachments)
	if err != nil {
		return Turn{}, err
	}
	sess, sink, from, err := rt.chatEngine(ctx, l)
	if err != nil {
		return Turn{}, err
	}
	if sttSeconds > 0 {
		sess.AddSTTSeconds(sttSeconds) // stored with the turn's state, or not at all
	}
	t, serr := sess.Send(ctx, text, images, onDelta)
	if errors.Is(serr, session.ErrBusy) || errors.Is(serr, session.ErrEnded) || errors.Is(serr, session.ErrLengthReached) {
		// Refused before anything changed.
		return Turn{}, mapSendError(ctx, serr)
	}
	if l.lost.Load() {
		return Turn{}, fmt.Errorf("%w: chat %s was taken by another node while answering", ErrUnreachable, id)
	}
	if err := rt.saveChat(l, sess, sink, from, attachments); err != nil {
		if serr != nil {
			rt.log.Warn("chat: cannot store a failed message's count", "conversation", id, "err", err)
			return Turn{}, mapSendError(ctx, serr)
		}
		return Turn{}, fmt.Errorf("%w: the answer could not be stored: %v", ErrUnreachable, err)
	}
	if serr != nil {
		return Turn{}, mapSendError(ctx, serr)
	}
	return Turn{User: t.User, Agent: t.Agent, Ended: t.Ended, EndReason: string(t.EndReason), Usage: t.Usage}, nil
}

// mapSendError is the runtime's error of an engine's Send.
func mapSendError(ctx context.Context, err error) error {
	switch {
	case errors.Is(err, session.ErrBusy):
		return ErrBusy
	case errors.Is(err, session.ErrEnded):
		return ErrEnded
	case errors.Is(err, session.ErrLengthReached):
		return ErrLengthReached
	case ctx.Err() != nil:
		return ctx.Err()
	}
	return fmt.Errorf("%w: the agent could not answer: %v", ErrProvider, err)
}

// chatCommandWait bounds how long a steering command of a chat waits for the message being
// answered.
const chatCommandWait = 2 * time.Minute

// chatCommand carries out a steering command of a chat on this node. When a message is being
// answered, the command waits for it (in the background: Command returns at once, and the
// store records how it went).
func (rt *Runtime) chatCommand(ctx context.Context, cmd store.Command) error {
	if err := rt.stopping(); err != nil {
		return err
	}
	l, err := rt.leaseChat(ctx, cmd.ConversationID, false)
	if errors.Is(err, ErrBusy) {
		rt.wg.Add(1)
		go func() {
			defer rt.wg.Done()
			wctx, cancel := context.WithTimeout(rt.ctx, chatCommandWait)
			defer cancel()
			l, err := rt.leaseChat(wctx, cmd.ConversationID, true)
			if err != nil {
				rt.finishCommand(cmd, store.CommandFailed, "the chat could not be reached: "+err.Error())
				return
			}
			status, reason := rt.chatExecute(wctx, l, cmd)
			rt.finishCommand(cmd, status, reason)
		}()
		return nil
	}
	if err != nil {
		return err
	}
	status, reason := rt.chatExecute(ctx, l, cmd)
	rt.finishCommand(cmd, status, reason)
	return nil
}

func (rt *Runtime) finishCommand(cmd store.Command, status, reason string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(rt.ctx), 5*time.Second)
	defer cancel()
	if _, err := rt.store.FinishCommand(ctx, cmd.ID, status, reason, rt.now()); err != nil {
		rt.log.Warn("command: cannot record how it went", "command", cmd.ID, "err", err)
	}
}

// chatExecute carries out a command on a leased chat and gives the lease up.
func (rt *Runtime) chatExecute(ctx context.Context, l *chatLease, cmd store.Command) (status, reason string) {
	defer l.stop(true)
	var p CommandParams
	if len(cmd.Params) > 0 {
		if err := json.Unmarshal(cmd.Params, &p); err != nil {
			return store.CommandFailed, "the command's parameters cannot be read"
		}
	}
	var sc session.Command
	switch cmd.Kind {
	case store.CommandEnd:
		if err := rt.endChat(ctx, l, session.EndAPI); err != nil {
			return store.CommandFailed, "the end could not be stored"
		}
		return store.CommandDone, ""
	case store.CommandSay:
		sc = session.Command{Kind: session.CommandSay, Text: p.Text, Interrupt: p.Interrupt}
	case store.CommandNote:
		sc = session.Command{Kind: session.CommandNote, Text: p.Text, VisibleToAgent: p.VisibleToAgent}
	case store.CommandTransfer:
		if l.conv.Channel == store.ChannelWhatsApp {
			return store.CommandFailed, "a whatsapp conversation cannot be transferred"
		}
		return store.CommandFailed, "a chat cannot be transferred"
	default:
		return store.CommandFailed, "unknown command " + cmd.Kind
	}
	sess, sink, from, err := rt.chatEngine(ctx, l)
	if err != nil {
		return store.CommandFailed, "the chat could not be opened"
	}
	var res session.CommandResult
	select {
	case res = <-sess.Execute(sc):
	case <-ctx.Done():
		return store.CommandFailed, "the node stopped"
	}
	if res.Status != store.CommandDone {
		return res.Status, res.Reason
	}
	if err := rt.saveChat(l, sess, sink, from, nil); err != nil {
		return store.CommandFailed, "the chat could not be stored"
	}
	return res.Status, res.Reason
}

// endChatByID ends chat id with reason once no message is being answered (ifIdle: at once, or
// ErrBusy). An ended chat is left alone.
func (rt *Runtime) endChatByID(ctx context.Context, id store.ConversationID, reason session.EndReason, ifIdle bool) error {
	l, err := rt.leaseChat(ctx, id, !ifIdle)
	if errors.Is(err, ErrEnded) {
		return nil
	}
	if err != nil {
		return err
	}
	return rt.endChat(ctx, l, reason)
}

// chatIdleBatch bounds the chats one pass of EndIdleChats ends.
const chatIdleBatch = 100

// EndIdleChats ends the chats whose idle deadline has passed (reason silence_timeout) and that
// no node is answering, whichever node started them and whether or not it still runs. Chats
// of an older version, stored without a deadline, wait this node's idle limit from their last
// change. It returns how many it ended. The worker role runs it.
func (rt *Runtime) EndIdleChats(ctx context.Context) (int, error) {
	now := rt.now()
	var legacy time.Time
	if rt.o.ChatIdleTimeout > 0 {
		legacy = now.Add(-rt.o.ChatIdleTimeout)
	}
	ids, err := rt.store.IdleChats(ctx, now, legacy, chatIdleBatch)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, id := range ids {
		l, err := rt.leaseChat(ctx, id, false)
		if errors.Is(err, ErrBusy) || errors.Is(err, ErrEnded) {
			continue // a message came, or it ended meanwhile
		}
		if err != nil {
			return n, err
		}
		idle := l.st.IdleAt != nil && !l.st.IdleAt.After(now) ||
			l.st.IdleAt == nil && l.st.IdleSeconds == 0 && !legacy.IsZero() && l.conv.UpdatedAt.Before(legacy)
		if !idle {
			l.stop(true) // a message moved the deadline meanwhile
			continue
		}
		if err := rt.endChat(ctx, l, session.EndSilenceTimeout); err != nil {
			return n, err
		}
		n++
	}
	return n, nil
}

// images reads the pictures of a message: each must be the organization's and not used by
// another conversation; it is tied to this one.
func (rt *Runtime) images(ctx context.Context, c store.Conversation, ids []store.AttachmentID) ([]llm.Image, error) {
	var out []llm.Image
	for _, id := range ids {
		a, err := rt.store.GetAttachment(ctx, id)
		if errors.Is(err, store.ErrNotFound) || err == nil && a.OrgID != c.OrgID {
			return nil, fmt.Errorf("%w: no attachment %s", ErrBadRequest, id)
		}
		if err != nil {
			return nil, err
		}
		if err := rt.store.ClaimAttachment(ctx, id, c.ID); errors.Is(err, store.ErrConflict) {
			return nil, fmt.Errorf("%w: attachment %s was sent in another conversation", ErrBadRequest, id)
		} else if err != nil {
			return nil, err
		}
		data, err := os.ReadFile(filepath.Join(rt.o.DataDir, filepath.FromSlash(a.Path)))
		if err != nil {
			return nil, fmt.Errorf("runtime: read attachment %s: %w", id, err)
		}
		out = append(out, llm.Image{MIME: a.MIME, Data: data})
	}
	return out, nil
}
