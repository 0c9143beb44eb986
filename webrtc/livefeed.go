package webrtc

import (
	"encoding/json"
	"sync"
	"sync/atomic"

	"github.com/parley-voice/parley/session"
)

// feedEvent is one encoded data-channel message; seq is the transcript line's seq (0 for other
// events), so a late subscriber that was sent the transcript so far can skip what it has.
type feedEvent struct {
	seq  int64
	data []byte
}

// feedQueue bounds what waits for one slow page; past it, events are dropped and counted (the
// page sees the gap in line seqs).
const feedQueue = 256

// feedSub is one page reading a conversation's live events.
type feedSub struct {
	ch      chan feedEvent
	dropped atomic.Uint64
}

// liveFeed is a session.Sink that passes everything on to the next sink (the control plane's)
// and fans the live transcript out to every page attached to the conversation: the web caller
// and any listeners. The engine calls it from its loop: each call encodes once and hands the
// bytes to each page's bounded queue without waiting.
type liveFeed struct {
	id      string
	next    session.Sink
	onEnded func()

	mu    sync.Mutex
	subs  map[*feedSub]struct{}
	ended bool
	last  feedEvent // the "ended" event, for pages that come late
	state session.State
}

func newLiveFeed(id string, next session.Sink, onEnded func()) *liveFeed {
	return &liveFeed{id: id, next: next, onEnded: onEnded, subs: map[*feedSub]struct{}{}}
}

// LineAdded implements session.Sink.
func (f *liveFeed) LineAdded(l session.Line) {
	if f.next != nil {
		f.next.LineAdded(l)
	}
	f.publish(l.Seq, message{Type: "line", Line: &l})
}

// Interim implements session.Sink.
func (f *liveFeed) Interim(text string) {
	if f.next != nil {
		f.next.Interim(text)
	}
	f.publish(0, message{Type: "interim", Text: text})
}

// AgentSaying implements session.AgentSayingSink: the pages see the agent's reply as it is
// spoken ("agent_saying", one chunk at a time, numbered by reply), before its line.
func (f *liveFeed) AgentSaying(reply int, text string) {
	if as, ok := f.next.(session.AgentSayingSink); ok {
		as.AgentSaying(reply, text)
	}
	f.publish(0, message{Type: "agent_saying", Text: text, Reply: reply})
}

// StateChanged implements session.Sink.
func (f *liveFeed) StateChanged(s session.State) {
	if f.next != nil {
		f.next.StateChanged(s)
	}
	f.mu.Lock()
	f.state = s
	f.mu.Unlock()
	f.publish(0, message{Type: "state", State: string(s)})
}

// TurnCompleted implements session.Sink.
func (f *liveFeed) TurnCompleted(m session.TurnMetrics) {
	if f.next != nil {
		f.next.TurnCompleted(m)
	}
}

// Ended implements session.Sink.
func (f *liveFeed) Ended(reason session.EndReason, cost session.Cost) {
	if f.next != nil {
		f.next.Ended(reason, cost)
	}
	f.publish(0, message{Type: "ended", Reason: string(reason)})
	f.mu.Lock()
	f.ended = true
	f.mu.Unlock()
	if f.onEnded != nil {
		f.onEnded()
	}
}

// publish encodes m once and queues it for every page.
func (f *liveFeed) publish(seq int64, m message) {
	b, err := json.Marshal(m)
	if err != nil {
		return
	}
	ev := feedEvent{seq: seq, data: b}
	f.mu.Lock()
	defer f.mu.Unlock()
	if m.Type == "ended" {
		f.last = ev
	}
	for s := range f.subs {
		select {
		case s.ch <- ev:
		default:
			s.dropped.Add(1)
		}
	}
}

// subscribe attaches a page. It gets the current state first (and the end, if the
// conversation is already over). cancel detaches it.
func (f *liveFeed) subscribe() (sub *feedSub, cancel func()) {
	s := &feedSub{ch: make(chan feedEvent, feedQueue)}
	f.mu.Lock()
	if f.state != "" {
		b, _ := json.Marshal(message{Type: "state", State: string(f.state)})
		s.ch <- feedEvent{data: b}
	}
	if f.ended {
		s.ch <- f.last
	} else {
		f.subs[s] = struct{}{}
	}
	f.mu.Unlock()
	return s, func() {
		f.mu.Lock()
		delete(f.subs, s)
		f.mu.Unlock()
	}
}

// Subscribers returns how many pages are attached.
func (f *liveFeed) Subscribers() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.subs)
}
