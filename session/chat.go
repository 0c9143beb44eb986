package session

import (
	"context"
	"errors"
	"strings"

	"github.com/parley-voice/parley/session/llm"
)

// ErrLengthReached says a chat has reached the agent's maximum number of turns.
var ErrLengthReached = errors.New("session: the chat has reached its length")

// ChatTurn is the answer to one chat message.
type ChatTurn struct {
	User      Line
	Agent     Line
	Usage     llm.Usage
	Ended     bool
	EndReason EndReason
}

// StartText starts a text conversation (chat, messaging app). The first message, when the agent
// has one, becomes the first agent line.
func (c *Conversation) StartText(ctx context.Context) error {
	c.textMode.Store(true)
	c.ctx, c.cancel = context.WithCancel(ctx)
	c.start = c.now()
	c.setState(StateListening)
	if c.first != "" {
		now := c.now()
		c.addLine(Line{Role: RoleAgent, Text: c.first, Start: now, End: now})
		c.appendHistory(llm.Message{Role: llm.RoleAssistant, Content: c.first}, 0)
	}
	return nil
}

// TextState is what a text conversation carries from one message to the next. With it another
// engine (on another node, or after a restart) continues the conversation where this one left
// it: ResumeText takes it, TextState gives it back after a message.
type TextState struct {
	History     []llm.Message // what the model was told and answered, without the system prompt
	LastSeq     int64         // the seq of the last transcript line
	Turns       int           // messages answered: the chat's length
	LLMFailures int           // replies that failed in a row
	Cost        Cost          // what it used so far (call time aside)
}

// ResumeText starts a text conversation from its state, in place of StartText: the first
// message was said when it began, so none is added.
func (c *Conversation) ResumeText(ctx context.Context, st TextState) error {
	c.textMode.Store(true)
	c.ctx, c.cancel = context.WithCancel(ctx)
	c.start = c.now()
	c.transcript.resume(st.LastSeq)
	c.histMu.Lock()
	c.history = make([]histEntry, len(st.History))
	for i, m := range st.History {
		c.history[i] = histEntry{msg: m}
	}
	c.histMu.Unlock()
	c.mu.Lock()
	c.turnN, c.llmFailures, c.cost = st.Turns, st.LLMFailures, st.Cost
	c.mu.Unlock()
	if err := c.restoreSpecialist(ctx); err != nil { // issue 16: a desk's hand-over lasts
		return err
	}
	c.setState(StateListening)
	return nil
}

// TextState returns the state of a text conversation, to be kept between its messages.
func (c *Conversation) TextState() TextState {
	c.histMu.Lock()
	h := make([]llm.Message, len(c.history))
	for i, e := range c.history {
		h[i] = e.msg
	}
	c.histMu.Unlock()
	c.mu.Lock()
	defer c.mu.Unlock()
	return TextState{History: h, LastSeq: c.transcript.last(), Turns: c.turnN, LLMFailures: c.llmFailures, Cost: c.cost}
}

// Send answers one chat message. onDelta, when not nil, receives the reply's text as the LLM
// streams it. Only one message is answered at a time (ErrBusy); an ended chat gives ErrEnded.
func (c *Conversation) Send(ctx context.Context, text string, images []llm.Image, onDelta func(string)) (ChatTurn, error) {
	c.mu.Lock()
	switch {
	case c.endReason != "":
		c.mu.Unlock()
		return ChatTurn{}, ErrEnded
	case c.chatBusy:
		c.mu.Unlock()
		return ChatTurn{}, ErrBusy
	case c.agent.MaxTurns > 0 && c.turnN >= c.agent.MaxTurns:
		c.mu.Unlock()
		return ChatTurn{}, ErrLengthReached
	}
	c.chatBusy = true
	c.turnN++
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		c.chatBusy = false
		c.mu.Unlock()
	}()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(c.ctx, cancel)
	defer stop()

	// The turn's lines wait until the reply is complete: if it fails, nothing of it stays in
	// the transcript or the history, so a retry of the message makes it once.
	now := c.now()
	pending := []Line{}
	c.mu.Lock()
	c.chatTurn = &pending
	c.mu.Unlock()
	histLen := c.historyLen()
	c.addLine(Line{Role: RoleUser, Text: text, Start: now, End: now})
	c.appendHistory(llm.Message{Role: llm.RoleUser, Content: text, Images: images}, 0)
	c.setState(StateThinking)
	var out strings.Builder
	var turn ChatTurn
	var failure error
	c.respond(ctx, 0, func(ev respEvent) {
		switch ev.kind {
		case respDelta:
			out.WriteString(ev.text)
			if onDelta != nil {
				onDelta(ev.text)
			}
		case respDone:
			turn.Usage = ev.usage
		case respError:
			turn.Usage = ev.usage
			failure = ev.err
		case respEndCall:
			turn.Ended, turn.EndReason = true, EndAgentEnded
		case respTransferred:
			turn.Ended, turn.EndReason = true, EndTransferred
		}
	})
	c.addUsage(turn.Usage)
	c.mu.Lock()
	c.chatTurn = nil
	c.mu.Unlock()
	if failure != nil || ctx.Err() != nil {
		c.setState(StateListening)
		if failure == nil {
			failure = ctx.Err()
		}
		c.truncateHistory(histLen)
		c.mu.Lock()
		c.turnN-- // the message was not answered: it does not count towards the chat's length
		c.llmFailures++
		n := c.llmFailures
		c.mu.Unlock()
		if n >= c.agent.MaxLLMFailures {
			c.endText(EndProviderError)
		}
		return turn, failure
	}
	c.mu.Lock()
	c.llmFailures = 0
	c.mu.Unlock()
	end := c.now()
	for i, l := range pending {
		if l = c.addLine(l); i == 0 {
			turn.User = l
		}
	}
	turn.Agent = c.addLine(Line{Role: RoleAgent, Text: strings.TrimSpace(out.String()), Start: now, End: end})
	c.setState(StateListening)
	if !turn.Ended && c.agent.EndPhrase != "" && strings.Contains(strings.ToLower(out.String()), strings.ToLower(c.agent.EndPhrase)) {
		turn.Ended, turn.EndReason = true, EndAgentEnded
	}
	if turn.Ended {
		c.endText(turn.EndReason)
	}
	return turn, nil
}

// AddSTTSeconds meters speech-to-text used for a text conversation outside the engine (a voice
// note transcribed before it is sent as a message), so that it is charged with the
// conversation (issue 19).
func (c *Conversation) AddSTTSeconds(seconds float64) {
	c.mu.Lock()
	c.cost.STTSeconds += seconds
	c.mu.Unlock()
}

// endText ends a text conversation once.
func (c *Conversation) endText(reason EndReason) {
	c.mu.Lock()
	if c.endReason != "" {
		c.mu.Unlock()
		return
	}
	c.endReason = reason
	c.state, c.pubState = StateEnded, StateEnded
	c.mu.Unlock()
	if c.sink != nil {
		c.sink.StateChanged(StateEnded)
		c.sink.Ended(reason, c.Cost())
	}
	if c.cancel != nil {
		c.cancel()
	}
	close(c.done)
	c.doneCancel()
}

// executeText runs a steering command on a text conversation.
func (c *Conversation) executeText(pc *pendingCommand) {
	if c.EndReason() != "" {
		pc.reply(CommandResult{Status: CommandFailed, Reason: "the conversation ended"})
		return
	}
	switch pc.cmd.Kind {
	case CommandSay:
		now := c.now()
		c.addLine(Line{Role: RoleAgent, Text: pc.cmd.Text, Start: now, End: now, Meta: map[string]any{"source": "say"}})
		c.appendHistory(llm.Message{Role: llm.RoleAssistant, Content: pc.cmd.Text}, -1)
		pc.reply(CommandResult{Status: CommandDone})
	case CommandNote:
		c.note(pc.cmd)
		pc.reply(CommandResult{Status: CommandDone})
	case CommandEnd:
		c.endText(EndAPI)
		pc.reply(CommandResult{Status: CommandDone})
	default:
		pc.reply(CommandResult{Status: CommandFailed, Reason: "a text conversation cannot " + string(pc.cmd.Kind)})
	}
}
