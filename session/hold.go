package session

// Hold: the caller put the call on hold (or took it off) and the agent stops listening and
// speaking meanwhile.

// SetHold tells a voice conversation that the caller put the call on hold (a sendonly or
// inactive re-INVITE: no audio reaches the caller) or took it off. While on hold the agent
// neither listens nor speaks: a reply in progress is stopped and the transcript keeps only
// what was played before the hold (marked interrupted), and nothing is generated until the
// call resumes.
func (c *Conversation) SetHold(on bool) {
	if !c.started.Load() {
		return
	}
	c.holdIn.Store(on)
	select {
	case c.holdCh <- on:
	default:
	}
}

// onHold applies SetHold in the loop.
func (c *Conversation) onHold(on bool) {
	if on == c.held {
		return
	}
	c.held = on
	c.taps.hold(on) // a recording pauses while on hold
	if c.takeover != nil {
		return // a human has the call: the takeover carries on as it is
	}
	if on {
		c.log.Info("call on hold: the agent stops talking and listening")
		c.cancelResponse()
		c.stopSpeaking(true)
		for _, t := range []*timer{&c.tEndpoint, &c.tMaxWait, &c.tSilence, &c.tBarge, &c.tFiller, &c.tDTMF} {
			t.stop()
		}
		c.finals, c.interim, c.digitsN, c.userSpeaking, c.bargeArmed = nil, "", 0, false, false
		c.setState(StateListening)
		return
	}
	c.log.Info("call resumed")
	c.enterListening()
}
