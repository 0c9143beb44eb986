package runtime

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"sync"

	"github.com/parley-voice/parley/control/bus"
	"github.com/parley-voice/parley/control/store"
)

// linesChannel carries a note each time a conversation's lines are stored or it ends; every
// node listens, and wakes its readers of that conversation's live transcript, who then read
// the lines from the store. The note is only a wake-up: the store is the record, so a lost
// note delays a reader until its wait runs out but never loses a line.
const linesChannel = "conv.lines"

type linesNote struct {
	ID    store.ConversationID `json:"id"`
	Seq   int64                `json:"seq"`
	Ended bool                 `json:"ended,omitempty"`
}

// hub wakes the live-transcript readers of this node.
type hub struct {
	bus bus.Bus
	log *slog.Logger

	mu      sync.Mutex
	waiters map[store.ConversationID]map[chan struct{}]struct{}
	sub     bus.Subscription
	wg      sync.WaitGroup
}

func newHub(b bus.Bus, log *slog.Logger) *hub {
	return &hub{bus: b, log: log, waiters: map[store.ConversationID]map[chan struct{}]struct{}{}}
}

func (h *hub) start(ctx context.Context) error {
	sub, err := h.bus.Subscribe(ctx, linesChannel)
	if err != nil {
		return fmt.Errorf("runtime: subscribe to %s: %w", linesChannel, err)
	}
	h.sub = sub
	h.wg.Add(1)
	go func() {
		defer h.wg.Done()
		for m := range sub.Messages() {
			var n linesNote
			if json.Unmarshal(m.Payload, &n) == nil && n.ID != "" {
				h.wake(n.ID)
			}
		}
	}()
	return nil
}

func (h *hub) close() {
	if h.sub != nil {
		h.sub.Close()
	}
	h.wg.Wait()
}

// watch returns a channel closed at the next note about id, and its release. Take it before
// reading the store, so that a note sent between the read and the wait is not missed.
func (h *hub) watch(id store.ConversationID) (<-chan struct{}, func()) {
	ch := make(chan struct{})
	h.mu.Lock()
	ws := h.waiters[id]
	if ws == nil {
		ws = map[chan struct{}]struct{}{}
		h.waiters[id] = ws
	}
	ws[ch] = struct{}{}
	h.mu.Unlock()
	return ch, func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		if ws, ok := h.waiters[id]; ok {
			if _, ok := ws[ch]; ok {
				delete(ws, ch)
				close(ch)
			}
			if len(ws) == 0 {
				delete(h.waiters, id)
			}
		}
	}
}

func (h *hub) wake(id store.ConversationID) {
	h.mu.Lock()
	ws := h.waiters[id]
	delete(h.waiters, id)
	h.mu.Unlock()
	for ch := range ws {
		close(ch)
	}
}

// notify tells every node that id has new lines (or ended).
func (h *hub) notify(ctx context.Context, n linesNote) {
	b, _ := json.Marshal(n)
	if err := h.bus.Publish(ctx, linesChannel, b); err != nil {
		h.log.Warn("live transcript: cannot announce new lines; readers wait for their timeout", "conversation", n.ID, "err", err)
	}
}
