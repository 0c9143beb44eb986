package session

import (
	"math"
	"strings"

	"github.com/parley-voice/parley/session/llm"
)

// What the agent says, from queued to heard: the speaker's and the pacer's reports, the
// utterances that finish when their audio has played (or are cut by barge-in), and the part the
// caller heard, which is what the transcript records.

// agentSaying passes a chunk that starts playing to the sink, when it listens.
func (c *Conversation) agentSaying(reply int, text string) {
	if as, ok := c.sink.(AgentSayingSink); ok {
		as.AgentSaying(reply, text)
	}
}

// onSpeaker handles the speaker's and the pacer's reports.
func (c *Conversation) onSpeaker(ev spkEvent) {
	u := c.findUtt(ev.utt)
	switch ev.kind {
	case spkTTSRequest:
		if u != nil && u.kind == uttResponse && u.turn == c.turnN && c.cur.TTSFirstRequest.IsZero() {
			c.cur.TTSFirstRequest = ev.at
		}
	case spkTTSFirstByte:
		if u != nil && u.kind == uttResponse && u.turn == c.turnN && c.cur.TTSFirstByte.IsZero() {
			c.cur.TTSFirstByte = ev.at
		}
	case spkFirstFrameOut:
		if u != nil {
			u.firstOut = ev.at
			if u.kind == uttResponse && u.turn == c.turnN && c.cur.FirstAudioOut.IsZero() && c.cur.Turn == c.turnN {
				c.cur.FirstAudioOut = ev.at
				c.completeTurnMetrics()
			}
		}
	case spkTTSError:
		c.ttsFailures++
		c.met.ProviderError("tts", c.vendors.TTS)
		c.log.Warn("text-to-speech failed", "err", ev.err, "failures", c.ttsFailures)
		if c.ttsFailures >= c.agent.MaxTTSFailures {
			c.finish(EndProviderError, true)
		}
	case spkTTSOK:
		c.ttsFailures = 0
	case spkUttQueued:
		if u != nil {
			u.allQueued = true
			u.endFrame = ev.end
		}
		c.checkPlayed()
	case spkPlayed:
		c.checkPlayed()
	}
}

func (c *Conversation) findUtt(id int) *utterance {
	for _, u := range c.utts {
		if u.id == id {
			return u
		}
	}
	return nil
}

// checkPlayed finishes every utterance whose audio has all been played.
func (c *Conversation) checkPlayed() {
	sent := c.out.sentFrames()
	for len(c.utts) > 0 {
		u := c.utts[0]
		if !u.complete || !u.allQueued {
			return
		}
		if sent < u.endFrame {
			c.out.watchPlayed(u.endFrame)
			return
		}
		c.utteranceFinished(u, false)
	}
}

// utteranceFinished records an utterance that ended (played out, or cut when interrupted) and
// moves the state on.
func (c *Conversation) utteranceFinished(u *utterance, interrupted bool) {
	for i, x := range c.utts {
		if x == u {
			c.utts = append(c.utts[:i], c.utts[i+1:]...)
			break
		}
	}
	heard := int64(math.MaxInt64)
	if interrupted {
		heard = c.out.sentFrames()
	}
	text := u.playedText(heard)
	if strings.TrimSpace(text) != "" && u.kind != uttFiller {
		meta := map[string]any(nil)
		if u.kind != uttResponse {
			meta = map[string]any{"source": string(u.kind)}
		}
		end := c.now()
		start := u.firstOut
		if start.IsZero() {
			start = end
		}
		c.addLine(Line{Role: RoleAgent, Text: text, Start: start, End: end, Interrupted: interrupted, Meta: meta})
	}
	if u.kind == uttResponse {
		c.fixHistory(u.gen, text, interrupted)
	} else if u.kind == uttSay || u.kind == uttGreeting || u.kind == uttReprompt {
		if strings.TrimSpace(text) != "" {
			c.appendHistory(llm.Message{Role: llm.RoleAssistant, Content: text}, -1)
		}
	}
	if u.cmd != nil {
		if interrupted {
			u.cmd.reply(CommandResult{Status: CommandFailed, Reason: "interrupted by the caller"})
		} else {
			u.cmd.reply(CommandResult{Status: CommandDone})
		}
	}
	if len(c.utts) == 0 && !interrupted {
		if c.pendingEnd != "" {
			c.finish(c.pendingEnd, true)
			return
		}
		if c.respActive {
			c.setState(StateThinking)
		} else if c.state == StateAgentSpeaking || c.state == StateThinking {
			c.enterListening()
		}
	}
}

// stopSpeaking flushes the output and cuts every queued utterance, recording what was played.
func (c *Conversation) stopSpeaking(interrupted bool) {
	c.spk.cancelAll()
	c.out.flush()
	utts := append([]*utterance(nil), c.utts...)
	for _, u := range utts {
		c.utteranceFinished(u, interrupted)
	}
	c.utts = c.utts[:0]
}
