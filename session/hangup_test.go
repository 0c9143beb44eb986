package session

import (
	"strings"
	"testing"
	"time"

	"github.com/parley-voice/parley/session/fakes"
)

// The caller hangs up halfway through a reply: the transcript keeps the part that was played,
// marked interrupted, as a barge-in does; it is stored (the sink has it) before the end.
func TestHangupMidReplyRecordsPlayedPart(t *testing.T) {
	long := "Our opening hours are from nine in the morning until nine in the evening every day of the week including holidays."
	r := newRig(t, rigOptions{
		agent:    Agent{SystemPrompt: "x"},
		turns:    []fakes.ScriptTurn{{Text: long}},
		dgScript: []string{"when are you open"},
		dgFinal:  30 * time.Millisecond,
	})
	r.caller.say(speech(t, "When are you open?"))
	waitFor(t, 10*time.Second, "agent speaking", func() bool {
		return r.conv.out.sentFrames() > 16000 // one second of the reply heard
	})
	r.conv.ChannelEnded(EndCallerHungUp)
	select {
	case <-r.conv.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("the conversation did not end")
	}
	ag := r.lines(RoleAgent)
	if len(ag) != 1 {
		t.Fatalf("agent lines %+v, want the cut reply", ag)
	}
	if l := ag[0]; !l.Interrupted || l.Text == "" || len(l.Text) >= len(long) || !strings.HasPrefix(long, l.Text) {
		t.Fatalf("cut reply %+v", l)
	}
	r.sink.mu.Lock()
	stored, ended := len(r.sink.lines), r.sink.ended
	r.sink.mu.Unlock()
	if stored != len(r.conv.Transcript()) || ended != EndCallerHungUp {
		t.Fatalf("sink has %d lines (transcript %d), ended %q", stored, len(r.conv.Transcript()), ended)
	}
	if turns := r.conv.Turns(); len(turns) != 1 || turns[0].FirstAudioOut.IsZero() {
		t.Fatalf("turns %+v", turns)
	}
}

// Every turn is listed in the conversation's turns, also one whose reply never reached the
// caller: the caller spoke again while the LLM was still thinking, and the call ended while the
// next reply was being prepared. Stages not reached are left empty.
func TestTurnsListEveryTurn(t *testing.T) {
	r := newRig(t, rigOptions{
		agent:    Agent{SystemPrompt: "x"},
		dgScript: []string{"first question", "second question"},
		dgFinal:  30 * time.Millisecond,
	})
	r.chat.SetLatency(time.Hour, 200) // the LLM never answers
	r.caller.say(speech(t, "First question"))
	waitFor(t, 10*time.Second, "first turn", func() bool { return len(r.lines(RoleUser)) == 1 })
	r.caller.say(speech(t, "Second question"))
	waitFor(t, 10*time.Second, "second turn", func() bool { return len(r.lines(RoleUser)) == 2 })
	// The second request has reached the LLM, so the worker reported it as sent before the hang-up
	// (the line alone raced the worker: a busy machine saw turn 2 without LLMRequestSent).
	waitFor(t, 10*time.Second, "the second LLM request", func() bool { return len(r.chat.Requests()) == 2 })
	r.conv.ChannelEnded(EndCallerHungUp)
	select {
	case <-r.conv.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("the conversation did not end")
	}
	turns := r.conv.Turns()
	if len(turns) != 2 {
		t.Fatalf("%d turns listed, want 2: %+v", len(turns), turns)
	}
	for i, m := range turns {
		if m.Turn != i+1 || m.EndOfTurn.IsZero() || m.LLMRequestSent.IsZero() || !m.FirstAudioOut.IsZero() || !m.Interrupted {
			t.Errorf("turn %d: %+v", i+1, m)
		}
	}
	r.sink.mu.Lock()
	sunk := len(r.sink.turns)
	r.sink.mu.Unlock()
	if sunk != 2 {
		t.Errorf("the sink got %d turns, want 2", sunk)
	}
}
