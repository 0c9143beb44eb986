package session

import (
	"context"
	"strings"

	"github.com/parley-voice/parley/session/llm"
)

// The loop's side of the agent's replies: starting and cancelling the LLM worker (respond.go),
// its events, the chunks sent to the speaker, and the fixed texts the agent speaks (greeting,
// reprompt, apology, filler, say).

func (c *Conversation) cancelResponse() {
	if c.respCancel != nil {
		c.respCancel()
		c.respCancel = nil
	}
	// A reply that had nothing to say yet (the LLM still thinking, or its tools running) leaves
	// no utterance behind to hold up the next one.
	for i := len(c.utts) - 1; i >= 0; i-- {
		if u := c.utts[i]; u.kind == uttResponse && u.gen == c.gen && u.chunks == 0 && !u.complete {
			c.utteranceFinished(u, false)
		}
	}
	c.respActive = false
	c.gen++
	c.tFiller.stop()
}

// startResponse launches the LLM worker for the next reply.
func (c *Conversation) startResponse() {
	c.cancelResponse()
	c.setState(StateThinking)
	ctx, cancel := context.WithCancel(c.ctx)
	c.respCancel = cancel
	c.respActive = true
	gen := c.gen
	c.uttSeq++
	u := &utterance{id: c.uttSeq, kind: uttResponse, gen: gen, turn: c.turnN, chunker: newChunker()}
	c.utts = append(c.utts, u)
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		c.respond(ctx, gen, func(ev respEvent) {
			ev.gen = gen
			select {
			case c.respCh <- ev:
			case <-ctx.Done():
			}
		})
	}()
}

// onResponse handles the LLM worker's events.
func (c *Conversation) onResponse(ev respEvent) {
	if ev.gen != c.gen {
		return // a cancelled response
	}
	u := c.responseUtterance(ev.gen)
	switch ev.kind {
	case respKnowledge:
		c.cur.KnowledgeStart, c.cur.KnowledgeDone = ev.at, ev.done
	case respSent:
		c.cur.LLMRequestSent = ev.at
	case respFirstToken:
		if c.cur.LLMFirstToken.IsZero() {
			c.cur.LLMFirstToken = ev.at
		}
	case respDelta:
		if u == nil {
			return
		}
		u.text.WriteString(ev.text)
		for _, chunk := range u.chunker.Push(ev.text) {
			if u.chunks == 0 && u.turn == c.turnN && c.cur.LLMFirstChunk.IsZero() {
				c.cur.LLMFirstChunk = c.now()
			}
			c.queueChunk(u, chunk, false)
		}
	case respToolsStarted:
		c.toolsRunning++
		c.toolFiller = ev.text // the called tool's own filler, if it has one
		if len(c.agent.Fillers) > 0 || c.toolFiller != "" {
			c.tFiller.set(c.agent.FillerAfter)
		}
	case respToolsDone:
		c.toolsRunning--
		c.tFiller.stop()
	case respEndCall:
		c.pendingEnd = EndAgentEnded
	case respTransferred:
		c.finish(EndTransferred, false)
	case respDone:
		c.respActive = false
		c.respCancel = nil
		c.llmFailures = 0
		c.addUsage(ev.usage)
		if u == nil {
			return
		}
		if rest := u.chunker.Flush(); rest != "" {
			if u.chunks == 0 && u.turn == c.turnN && c.cur.LLMFirstChunk.IsZero() {
				c.cur.LLMFirstChunk = c.now()
			}
			c.queueChunk(u, rest, false)
		}
		u.complete = true
		c.spk.endUtterance(u)
		if c.agent.EndPhrase != "" && strings.Contains(strings.ToLower(u.text.String()), strings.ToLower(c.agent.EndPhrase)) {
			c.pendingEnd = EndAgentEnded
		}
		if u.chunks == 0 {
			// Nothing to say (for example only a tool call that ended the call).
			c.utteranceFinished(u, false)
		}
	case respError:
		c.respActive = false
		c.respCancel = nil
		c.addUsage(ev.usage)
		c.llmFailures++
		c.met.ProviderError("llm", c.vendors.LLM)
		c.log.Warn("LLM failed", "err", ev.err, "failures", c.llmFailures, "mid_stream", ev.midStream)
		if u != nil {
			u.complete = true
			if rest := u.chunker.Flush(); rest != "" {
				c.queueChunk(u, rest, false)
			}
			c.spk.endUtterance(u)
			if u.chunks == 0 {
				c.utteranceFinished(u, false)
			}
		}
		if c.llmFailures >= c.agent.MaxLLMFailures {
			c.finish(EndProviderError, true)
			return
		}
		c.speakUtterance(c.agent.ApologyText, uttApology, nil)
	}
}

func (c *Conversation) addUsage(u llm.Usage) {
	c.mu.Lock()
	c.cost.LLMInputTokens += u.InputTokens
	c.cost.LLMOutputTokens += u.OutputTokens
	c.mu.Unlock()
}

func (c *Conversation) responseUtterance(gen int) *utterance {
	for i := len(c.utts) - 1; i >= 0; i-- {
		if u := c.utts[i]; u.kind == uttResponse && u.gen == gen {
			return u
		}
	}
	return nil
}

// queueChunk sends one chunk of an utterance to the speaker.
func (c *Conversation) queueChunk(u *utterance, text string, last bool) {
	u.chunks++
	c.mu.Lock()
	c.cost.TTSCharacters += len([]rune(text))
	c.mu.Unlock()
	if c.state == StateThinking || c.state == StateListening {
		c.setState(StateAgentSpeaking)
	}
	c.spk.say(u, text)
}

// speakUtterance speaks a fixed text (greeting, reprompt, apology, say command, filler).
func (c *Conversation) speakUtterance(text string, kind uttKind, cmd *pendingCommand) *utterance {
	c.uttSeq++
	u := &utterance{id: c.uttSeq, kind: kind, gen: -1, turn: c.turnN, cmd: cmd, complete: true}
	u.text.WriteString(text)
	c.utts = append(c.utts, u)
	c.tSilence.stop()
	// Sentence by sentence, so the first sentence plays while the next is synthesized.
	ch := newChunker()
	parts := ch.Push(text)
	if rest := ch.Flush(); rest != "" {
		parts = append(parts, rest)
	}
	for _, p := range parts {
		c.queueChunk(u, p, false)
	}
	c.spk.endUtterance(u)
	if len(parts) == 0 {
		c.utteranceFinished(u, false)
	}
	return u
}

func (c *Conversation) onFiller() {
	if c.held || c.toolsRunning == 0 || (len(c.agent.Fillers) == 0 && c.toolFiller == "") {
		return
	}
	f := c.toolFiller
	if f == "" {
		f = c.agent.Fillers[c.fillerIdx%len(c.agent.Fillers)]
		c.fillerIdx++
	}
	c.speakUtterance(f, uttFiller, nil)
}
