package webrtc

import (
	"encoding/json"
	"testing"

	"github.com/parley-voice/parley/session"
	"github.com/parley-voice/parley/webrtc/internal/rigtest"
)

func decodeEvent(t *testing.T, ev feedEvent) message {
	t.Helper()
	var m message
	if err := json.Unmarshal(ev.data, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func TestLiveFeedFansOut(t *testing.T) {
	next := &rigtest.RecSink{}
	ended := 0
	f := newLiveFeed("c1", next, func() { ended++ })
	a, cancelA := f.subscribe()
	b, cancelB := f.subscribe()
	f.StateChanged(session.StateListening)
	f.LineAdded(session.Line{Seq: 1, Role: session.RoleUser, Text: "hi"})
	f.Interim("how a")
	f.TurnCompleted(session.TurnMetrics{})
	for _, s := range []*feedSub{a, b} {
		st, line, interim := decodeEvent(t, <-s.ch), <-s.ch, decodeEvent(t, <-s.ch)
		if st.Type != "state" || st.State != "listening" {
			t.Fatalf("first event %+v", st)
		}
		if m := decodeEvent(t, line); m.Type != "line" || m.Line.Text != "hi" || line.seq != 1 {
			t.Fatalf("line event %+v", m)
		}
		if interim.Type != "interim" || interim.Text != "how a" {
			t.Fatalf("interim %+v", interim)
		}
	}
	if len(next.Lines()) != 1 {
		t.Fatal("the next sink did not get the line")
	}
	cancelB()
	if f.Subscribers() != 1 {
		t.Fatalf("%d subscribers", f.Subscribers())
	}
	// A page that does not read loses events past its queue, never blocking the engine.
	for i := 0; i < feedQueue+10; i++ {
		f.Interim("x")
	}
	if a.dropped.Load() != 10 {
		t.Fatalf("dropped %d, want 10", a.dropped.Load())
	}
	cancelA()
	f.Ended(session.EndCompleted, session.Cost{})
	if ended != 1 || next.EndedWith() != session.EndCompleted {
		t.Fatal("end not passed on")
	}
	// A page that comes after the end learns the state and the end at once.
	late, _ := f.subscribe()
	if m := decodeEvent(t, <-late.ch); m.Type != "state" {
		t.Fatalf("late first %+v", m)
	}
	if m := decodeEvent(t, <-late.ch); m.Type != "ended" || m.Reason != "completed" {
		t.Fatalf("late second %+v", m)
	}
}
