package session

import (
	"strings"
	"time"

	"github.com/parley-voice/parley/media"
	"github.com/parley-voice/parley/media/stt"
	"github.com/parley-voice/parley/session/llm"
)

// Turn-taking, on the loop's goroutine: the VAD's debounced speech start and stop, the
// recognizer's events, endpointing, barge-in and backchannels, turns of keypad digits, the
// silence timeout, and the per-turn metrics.

type vadEvent struct {
	speech bool
	at     time.Time
}

// frameTracker turns per-frame VAD decisions into debounced speech start/stop events.
type frameTracker struct {
	startN, stopN int
	voicedRun     int
	silentRun     int
	speaking      bool
	firstVoiced   time.Time
	firstSilent   time.Time
}

func (t *frameTracker) init(ts TurnSettings) {
	t.startN = int(ts.SpeechStart / media.FrameDuration)
	if t.startN < 1 {
		t.startN = 1
	}
	t.stopN = int(ts.SpeechStop / media.FrameDuration)
	if t.stopN < 1 {
		t.stopN = 1
	}
}

func (t *frameTracker) step(voiced bool, now time.Time) (vadEvent, bool) {
	if voiced {
		if t.voicedRun == 0 {
			t.firstVoiced = now.Add(-media.FrameDuration)
		}
		t.voicedRun++
		t.silentRun = 0
		if !t.speaking && t.voicedRun >= t.startN {
			t.speaking = true
			return vadEvent{speech: true, at: t.firstVoiced}, true
		}
		return vadEvent{}, false
	}
	if t.silentRun == 0 {
		t.firstSilent = now.Add(-media.FrameDuration)
	}
	t.silentRun++
	t.voicedRun = 0
	if t.speaking && t.silentRun >= t.stopN {
		t.speaking = false
		return vadEvent{speech: false, at: t.firstSilent}, true
	}
	return vadEvent{}, false
}

func (c *Conversation) enterListening() {
	if c.userSpeaking {
		c.setState(StateUserSpeaking)
		return
	}
	c.setState(StateListening)
	if c.agent.SilenceTimeout > 0 && !c.userSpeaking {
		c.tSilence.set(c.agent.SilenceTimeout)
	}
}

// onVAD handles the caller starting or stopping speech.
func (c *Conversation) onVAD(ev vadEvent) {
	if ev.speech {
		c.userSpeaking = true
		c.speechStart = ev.at
		c.tSilence.stop()
		c.tEndpoint.stop()
		c.tMaxWait.stop()
		switch c.state {
		case StateAgentSpeaking:
			// Barge-in candidate: the caller must keep speaking for BargeInMin (VAD already
			// heard SpeechStart of it).
			c.bargeArmed = true
			rest := c.agent.Turn.BargeInMin - c.agent.Turn.SpeechStart
			if rest <= 0 {
				c.onBargeTimer()
			} else {
				c.tBarge.set(rest)
			}
		case StateThinking:
			// The caller goes on talking before the agent answered: drop the pending answer and
			// keep listening; the new words join this turn.
			c.cancelResponse()
			c.reopenTurn()
			c.setState(StateUserSpeaking)
		default:
			c.setState(StateUserSpeaking)
		}
		return
	}
	c.userSpeaking = false
	c.speechEnd = ev.at
	c.tBarge.stop()
	c.bargeArmed = false
	if c.state != StateUserSpeaking {
		return
	}
	// Endpointing fallback: silence after a final transcript ends the turn.
	if len(c.finals) > 0 {
		c.armEndpoint()
	}
	c.tMaxWait.set(c.agent.Turn.MaxWait)
}

// armEndpoint ends the turn once the caller has been silent for EndpointSilence.
func (c *Conversation) armEndpoint() {
	if c.userSpeaking || c.speechEnd.IsZero() {
		return
	}
	wait := c.agent.Turn.EndpointSilence - c.now().Sub(c.speechEnd)
	if wait <= 0 {
		c.endTurn("vad")
		return
	}
	c.tEndpoint.set(wait)
}

func (c *Conversation) onSTT(ev stt.Event) {
	switch ev.Kind {
	case stt.Interim:
		c.interim = ev.Text
		if c.sink != nil && ev.Text != "" {
			c.sink.Interim(ev.Text)
		}
		if c.state == StateAgentSpeaking && c.bargeArmed && c.agent.Turn.BargeInConfirmWords && !c.tBarge.active() {
			c.onBargeTimer()
		}
	case stt.Final:
		if strings.TrimSpace(ev.Text) == "" || c.state == StateAgentSpeaking {
			// Words heard over the agent that did not interrupt it (a backchannel, a cough)
			// are not a turn.
			return
		}
		c.finals = append(c.finals, strings.TrimSpace(ev.Text))
		c.cur.STTFinal = ev.At
		if c.state == StateListening || c.state == StateThinking {
			if c.state == StateThinking {
				c.cancelResponse()
				c.reopenTurn()
				c.cur.STTFinal = ev.At
			}
			c.setState(StateUserSpeaking)
		}
		if ev.SpeechFinal {
			c.endTurn("provider")
			return
		}
		if !c.userSpeaking {
			c.tSilence.stop()
			c.armEndpoint()
			if !c.tMaxWait.active() {
				c.tMaxWait.set(c.agent.Turn.MaxWait)
			}
		}
	case stt.EndOfSpeech:
		if c.state != StateUserSpeaking && c.state != StateListening {
			return // the turn already ended on the final (speech_final), or the agent speaks
		}
		if len(c.finals) == 0 && strings.TrimSpace(ev.Text) != "" {
			c.finals = append(c.finals, strings.TrimSpace(ev.Text))
		}
		if c.cur.STTFinal.IsZero() {
			c.cur.STTFinal = ev.At
		}
		if len(c.finals) > 0 {
			c.endTurn("provider")
		}
	case stt.Reconnected:
		c.log.Warn("speech-to-text reconnected; audio of the gap may be lost", "err", ev.Err)
	case stt.Error:
		c.log.Warn("speech-to-text error", "err", ev.Err)
		c.met.ProviderError("stt", c.vendors.STT)
	}
}

// reopenSTT replaces a recognizer stream that ended on its own (the adapter gave up
// reconnecting): the call goes on, losing the audio of the gap.
func (c *Conversation) reopenSTT() {
	if c.ctx.Err() != nil {
		return
	}
	c.log.Warn("speech-to-text stream ended; reopening")
	s, err := c.stt.Open(c.ctx, c.sttOptions())
	if err != nil {
		c.log.Error("speech-to-text cannot be reopened", "err", err)
		c.met.ProviderError("stt", c.vendors.STT)
		c.finish(EndProviderError, true)
		return
	}
	c.pushOK.Store(false)
	old := c.sttS
	c.mu.Lock()
	c.sttS = s
	c.mu.Unlock()
	c.sttEvCh = s.Events()
	c.pushOK.Store(true)
	go old.Close()
}

func (c *Conversation) words(text string) int { return len(strings.Fields(text)) }

// onlyBackchannel reports whether text holds nothing but backchannel words.
func (c *Conversation) onlyBackchannel(text string) bool {
	ws := strings.Fields(strings.ToLower(text))
	if len(ws) == 0 {
		return true
	}
	for _, w := range ws {
		w = strings.Trim(w, ".,!?;:\"'")
		found := false
		for _, b := range c.agent.Turn.Backchannels {
			if w == b {
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	return true
}

// onBargeTimer decides a barge-in once the caller has spoken over the agent long enough.
func (c *Conversation) onBargeTimer() {
	if c.state != StateAgentSpeaking || !c.userSpeaking {
		return
	}
	if c.agent.Turn.BargeInConfirmWords && (c.interim == "" || c.onlyBackchannel(c.interim)) {
		return // wait for an interim with a real word (onSTT calls back)
	}
	if c.interim != "" && c.onlyBackchannel(c.interim) {
		return
	}
	c.bargeIn()
}

// bargeIn stops the agent at once: the LLM and TTS streams are cancelled and the pacer is
// flushed within one frame; the transcript keeps what was actually played.
func (c *Conversation) bargeIn() {
	c.bargeArmed = false
	c.cancelResponse()
	c.stopSpeaking(true)
	c.reopenTurn()
	c.setState(StateUserSpeaking)
}

// reopenTurn starts a fresh caller turn; the one whose reply was dropped stays listed.
func (c *Conversation) reopenTurn() {
	c.listTurn(true)
	c.interim = ""
	c.cur = TurnMetrics{}
}

// endTurn ends the caller's turn and asks the LLM for the answer.
func (c *Conversation) endTurn(how string) {
	c.tEndpoint.stop()
	c.tMaxWait.stop()
	if c.held {
		c.finals, c.interim = nil, ""
		return
	}
	if c.state != StateUserSpeaking && c.state != StateListening && c.state != StateTakeover {
		return
	}
	text := strings.TrimSpace(strings.Join(c.finals, " "))
	if text == "" && how == "max_wait" {
		text = strings.TrimSpace(c.interim)
	}
	if text == "" {
		return
	}
	if how != "max_wait" && c.agent.Turn.MinWords > 0 && c.words(text) < c.agent.Turn.MinWords {
		return // too short; MaxWait still runs
	}
	now := c.now()
	c.finals, c.interim = nil, ""
	c.listTurn(c.respActive) // a reply still being prepared gives way to this turn
	c.turnN++
	c.turnListed = false
	// A fresh record for this turn; only the recognizer's final (heard during this turn) is kept.
	c.cur = TurnMetrics{STTFinal: c.cur.STTFinal, SpeechEnd: c.cur.SpeechEnd}
	if c.cur.STTFinal.Before(c.lastTurnEnd) {
		c.cur.STTFinal = time.Time{}
	}
	if c.cur.SpeechEnd.Before(c.lastTurnEnd) {
		c.cur.SpeechEnd = time.Time{}
	}
	c.lastTurnEnd = now
	c.cur.Turn = c.turnN
	c.cur.SpeechEnd = c.speechEnd
	c.cur.EndOfTurn = now
	c.cur.Endpointing = how
	end := c.speechEnd
	if end.IsZero() || end.Before(c.speechStart) {
		end = now // the recognizer ended the turn before the VAD heard the speech stop
	}
	if c.cur.SpeechEnd.IsZero() || c.cur.SpeechEnd.Before(c.speechStart) {
		c.cur.SpeechEnd = end
	}
	start := c.speechStart
	if start.IsZero() || start.After(end) {
		start = end
	}
	c.addLine(Line{Role: RoleUser, Text: text, Start: start, End: end})
	c.appendHistory(llm.Message{Role: llm.RoleUser, Content: text}, c.gen)
	c.reprompts = 0
	if c.takeover != nil {
		c.setState(StateTakeover)
		return
	}
	c.startResponse()
}

func (c *Conversation) completeTurnMetrics() {
	m := c.cur
	c.turnListed = true
	c.mu.Lock()
	c.turns = append(c.turns, m)
	c.mu.Unlock()
	c.met.Observe(m)
	if c.sink != nil {
		c.sink.TurnCompleted(m)
	}
}

// listTurn lists the current turn's metrics if it ends before its first audio out (the caller
// barged in or spoke again while the reply was being prepared, or the call ended): every turn is
// listed, the stages it never reached left empty, as the API documents. interrupted marks a
// reply the caller cut off.
func (c *Conversation) listTurn(interrupted bool) {
	if c.cur.Turn == 0 || c.cur.Turn != c.turnN || c.turnListed {
		return
	}
	c.cur.Interrupted = interrupted
	c.completeTurnMetrics()
}

func (c *Conversation) onSilenceTimeout() {
	if c.held || c.state != StateListening || c.userSpeaking {
		return
	}
	if c.reprompts >= c.agent.Reprompts {
		c.finish(EndSilenceTimeout, true)
		return
	}
	c.reprompts++
	c.speakUtterance(c.agent.RepromptText, uttReprompt, nil)
}

// onDTMF takes a digit: it goes to the transcript and the history at once, and the digits end
// the caller's turn after the terminator key or the inter-digit timeout (TurnSettings), so a
// "press 1" menu gets its answer without the caller speaking. A digit pressed while the agent
// talks interrupts it, as speech would.
func (c *Conversation) onDTMF(d rune) {
	if c.held {
		return
	}
	if c.state == StateAgentSpeaking || c.state == StateThinking {
		c.bargeIn()
	}
	now := c.now()
	c.addLine(Line{Role: RoleUser, Text: "DTMF " + string(d), Start: now, End: now, Meta: map[string]any{"dtmf": string(d)}})
	c.appendHistory(llm.Message{Role: llm.RoleUser, Content: "[The caller pressed " + string(d) + " on the keypad]"}, c.gen)
	c.digitsN++
	if t := c.agent.Turn.DTMFTerminator; t != "" && string(d) == t {
		c.tDTMF.stop()
		c.dtmfTurn("dtmf_terminator")
		return
	}
	if c.agent.Turn.DTMFTimeout > 0 {
		c.tDTMF.set(c.agent.Turn.DTMFTimeout)
	}
}

// dtmfTurn ends a turn of keypad digits and asks the LLM for the answer.
func (c *Conversation) dtmfTurn(how string) {
	if c.digitsN == 0 || c.state != StateUserSpeaking && c.state != StateListening && c.state != StateTakeover {
		return
	}
	c.digitsN = 0
	c.tEndpoint.stop()
	c.tMaxWait.stop()
	now := c.now()
	c.turnN++
	c.cur = TurnMetrics{Turn: c.turnN, EndOfTurn: now, SpeechEnd: now, Endpointing: how}
	c.lastTurnEnd = now
	c.reprompts = 0
	if c.takeover != nil {
		c.setState(StateTakeover)
		return
	}
	c.startResponse()
}
