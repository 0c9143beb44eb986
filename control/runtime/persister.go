package runtime

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/parley-voice/parley/control/agentdef"
	"github.com/parley-voice/parley/control/app/events"
	"github.com/parley-voice/parley/control/store"
	"github.com/parley-voice/parley/session"
)

// gapWait is how long the persister holds a line while the one before it has not arrived (two
// lines added at once by different goroutines of the engine can reach it out of order).
const gapWait = 2 * time.Second

// persister is the session.Sink of one conversation: it stores the transcript lines in seq
// order, keeps the turn metrics, and records the end (status, reason, cost, the charge and the
// conversation.ended event, in one transaction). The engine calls it from its own goroutines;
// every method only queues and signals, and one goroutine of the persister does the writing,
// retrying while the store cannot be reached. That goroutine runs only while there is something
// to store (or a retry, or a line held for a missing one): an idle call keeps no goroutine, nor
// the deep stack the database code grows on it.
type persister struct {
	rt   *Runtime
	conv store.Conversation

	mu        sync.Mutex
	queue     []session.Line
	next      int64 // the seq of the next line to store
	gapSince  time.Time
	turns     []session.TurnMetrics
	endReason session.EndReason
	cost      session.Cost
	recording string
	callOut   store.CallOutcome // how the call leg ended (SIP status, Q.850 cause, detail)
	ending    bool
	statuses  []statusChange       // status moves not stored yet, in order
	def       *agentdef.Definition // the definition the conversation runs with, when known (for the end)

	// kept are the lines stored, while they are few and the whole transcript (keptAll), for
	// the final conversation.transcript; used by the worker only.
	kept    []store.ConversationLine
	keptAll bool

	// recWaiting: a recording is being made, to be named with the end (recordingDone);
	// recSince is when the end began to wait for it; endTaken says the end was taken to be
	// stored (a recording closed later is named on its own).
	recWaiting bool
	recSince   time.Time
	endTaken   bool

	// cmdHeld counts the commands being carried out (holdEnd): the end waits for them to be
	// recorded (not for ever: commandWait from cmdSince), so that a command that ended the
	// conversation (end, transfer) reads done once the end can be seen.
	cmdHeld  int
	cmdSince time.Time

	ctx      context.Context // set by start; nil before
	onDone   func()
	stopCtx  func() bool // unhooks start's AfterFunc from the node's context
	busy     bool        // a worker runs
	again    bool        // something arrived while the worker was flushing (or before start)
	finished bool        // the end is stored

	wake chan struct{}
	done chan struct{} // closed once the end is stored

	transcript transcriptBatcher // issue 14
}

func newPersister(rt *Runtime, conv store.Conversation) *persister {
	return &persister{rt: rt, conv: conv, next: conv.LastSeq + 1, keptAll: conv.LastSeq == 0, wake: make(chan struct{}, 1), done: make(chan struct{})}
}

// maxKeptLines bounds the lines a persister keeps for the final transcript; a longer
// conversation's are read back at its end.
const maxKeptLines = 32

// keep records rows as stored, in the form the store gives them back.
func (p *persister) keep(rows []store.ConversationLine) {
	if !p.keptAll {
		return
	}
	if len(p.kept)+len(rows) > maxKeptLines {
		p.kept, p.keptAll = nil, false
		return
	}
	for _, r := range rows {
		r.Start, r.End = r.Start.UTC().Truncate(time.Microsecond), r.End.UTC().Truncate(time.Microsecond)
		p.kept = append(p.kept, r)
	}
}

// signal says there is something to store: it starts a worker unless one runs (then it
// wakes it, should it be waiting).
func (p *persister) signal() {
	p.mu.Lock()
	switch {
	case p.finished:
		p.mu.Unlock()
		return
	case p.busy || p.ctx == nil:
		p.again = true
		p.mu.Unlock()
		select {
		case p.wake <- struct{}{}:
		default:
		}
		return
	}
	p.busy = true
	p.mu.Unlock()
	go p.work()
}

// start begins storing until the end is stored, then calls onDone. When ctx ends first (the
// node stops), the conversation ends as shutdown and what is queued is written with a short
// deadline of its own.
func (p *persister) start(ctx context.Context, onDone func()) {
	stop := context.AfterFunc(ctx, func() { p.end(session.EndShutdown, session.Cost{}) })
	p.mu.Lock()
	p.ctx, p.onDone, p.stopCtx = ctx, onDone, stop
	p.mu.Unlock()
	p.signal() // the first flush: statuses and lines queued before the start
}

// LineAdded implements session.Sink.
func (p *persister) LineAdded(l session.Line) {
	p.mu.Lock()
	p.queue = append(p.queue, l)
	p.mu.Unlock()
	p.signal()
}

// Interim implements session.Sink; interim words are not stored.
func (p *persister) Interim(string) {}

// StateChanged implements session.Sink.
func (p *persister) StateChanged(session.State) {}

// TurnCompleted implements session.Sink.
func (p *persister) TurnCompleted(m session.TurnMetrics) {
	p.mu.Lock()
	p.turns = append(p.turns, m)
	p.mu.Unlock()
}

// Ended implements session.Sink.
func (p *persister) Ended(reason session.EndReason, cost session.Cost) { p.end(reason, cost) }

// end records the end once; the first reason wins.
func (p *persister) end(reason session.EndReason, cost session.Cost) {
	p.mu.Lock()
	if !p.ending {
		p.ending, p.endReason, p.cost = true, reason, cost
	}
	p.mu.Unlock()
	p.signal()
}

// holdEnd keeps the end from being stored until releaseEnd: a command is being carried out,
// and how it went is to be recorded first.
func (p *persister) holdEnd() {
	p.mu.Lock()
	p.cmdHeld++
	p.mu.Unlock()
}

// releaseEnd undoes a holdEnd once the command's outcome is recorded (or could not be).
func (p *persister) releaseEnd() {
	p.mu.Lock()
	if p.cmdHeld > 0 {
		p.cmdHeld--
	}
	p.mu.Unlock()
	p.signal()
}

// commandWait bounds how long a conversation's end waits for the commands being carried out
// to be recorded (a command's own record has a 5 s timeout; it is usually milliseconds).
const commandWait = 2 * time.Second

// outcome records how the call leg ended, for the end stored next; the first one wins.
func (p *persister) outcome(o store.CallOutcome) {
	p.mu.Lock()
	if !p.ending && p.callOut.IsZero() {
		p.callOut = o
	}
	p.mu.Unlock()
}

// statusChange is a move of the conversation's status and when it happened.
type statusChange struct {
	status string
	at     time.Time
}

// status queues a move of the conversation's status (ringing, in_progress); it never blocks,
// so the SIP and WebRTC services may report from their own goroutines.
func (p *persister) status(s string) {
	p.mu.Lock()
	p.statuses = append(p.statuses, statusChange{s, time.Now()})
	p.mu.Unlock()
	p.signal()
	if s == store.ConvInProgress {
		p.rt.holdCredit(p.conv)
	}
}

// statusSoon queues a move of the conversation's status like status, but lets it wait up to
// d for what comes next, so that a move followed at once by another (an inbound call rings
// for an instant before it is answered) is stored with it, in one transaction (issue 20). The
// move keeps its time.
func (p *persister) statusSoon(s string, d time.Duration) {
	p.mu.Lock()
	p.statuses = append(p.statuses, statusChange{s, time.Now()})
	p.mu.Unlock()
	time.AfterFunc(d, p.signal)
}

// recordingWait bounds how long a conversation's end waits for its recording to be closed.
const recordingWait = time.Second

// recordingStarted says a recording is being made: the end waits for recordingDone.
func (p *persister) recordingStarted() {
	p.mu.Lock()
	p.recWaiting = true
	p.mu.Unlock()
}

// recordingDone names the closed recording path with the end, and reports whether it will be
// (false: the end was stored or taken already; the caller names it).
func (p *persister) recordingDone(path string) bool {
	p.mu.Lock()
	if p.endTaken || p.finished {
		p.mu.Unlock()
		return false
	}
	p.recording, p.recWaiting = path, false
	p.mu.Unlock()
	p.signal()
	return true
}

// setDefinition records the definition the conversation runs with, so that its end need not
// read it again.
func (p *persister) setDefinition(def *agentdef.Definition) {
	p.mu.Lock()
	p.def = def
	p.mu.Unlock()
}

// work is the worker: it flushes until nothing is left to do (then it exits) or the end is
// stored.
func (p *persister) work() {
	backoff := 100 * time.Millisecond
	for {
		finished, err := p.flush(p.ctx)
		if finished {
			p.finish()
			return
		}
		if p.ctx.Err() != nil {
			fctx, cancel := context.WithTimeout(context.WithoutCancel(p.ctx), 2*time.Second)
			p.end(session.EndShutdown, session.Cost{})
			p.mu.Lock()
			p.recWaiting = false // the end is stored now; the recording is named on its own
			p.cmdHeld = 0        // and the commands are settled after it
			p.mu.Unlock()
			p.flush(fctx)
			cancel()
			p.finish()
			return
		}
		wait := gapWait
		if err != nil {
			p.rt.log.Warn("conversation: cannot store; retrying", "conversation", p.conv.ID, "err", err, "in", backoff)
			wait, backoff = backoff, min(backoff*2, 5*time.Second)
		} else {
			backoff = 100 * time.Millisecond
			p.mu.Lock()
			held, again := len(p.queue) > 0, p.again
			p.again = false
			if !held && !again {
				p.busy = false // idle: the next signal starts a worker
				p.mu.Unlock()
				return
			}
			p.mu.Unlock()
			if again {
				continue
			}
		}
		t := time.NewTimer(wait)
		select {
		case <-p.wake:
		case <-t.C:
		case <-p.ctx.Done():
		}
		t.Stop()
	}
}

// finish marks the end stored, once.
func (p *persister) finish() {
	p.mu.Lock()
	p.finished, p.busy = true, false
	onDone, stop := p.onDone, p.stopCtx
	p.mu.Unlock()
	if stop != nil {
		stop() // the node's context must not keep the ended conversation alive
	}
	close(p.done)
	if onDone != nil {
		onDone()
	}
}

// flush stores, in one transaction, the status moves queued, the lines that are ready (with
// their conversation.transcript batch when one is due) and, once every line and move is
// stored, the end. It reports whether the end is stored.
func (p *persister) flush(ctx context.Context) (bool, error) {
	p.mu.Lock()
	statuses := slices.Clone(p.statuses)
	slices.SortFunc(p.queue, func(a, b session.Line) int { return int(a.Seq - b.Seq) })
	var ready []session.Line
	i := 0
	for i < len(p.queue) && p.queue[i].Seq < p.next {
		i++ // a repeat of a stored line
	}
	p.queue = p.queue[i:]
	expect := p.next
	for _, l := range p.queue {
		if l.Seq != expect {
			break
		}
		ready = append(ready, l)
		expect++
	}
	if len(ready) == 0 && len(p.queue) > 0 {
		// A gap: wait for the missing line, but not for ever (and not past the end).
		if p.gapSince.IsZero() {
			p.gapSince = time.Now()
		}
		if p.ending || time.Since(p.gapSince) > gapWait {
			p.rt.log.Warn("conversation: transcript lines missing; storing what came", "conversation", p.conv.ID, "missing", p.next, "next", p.queue[0].Seq)
			ready = slices.Clone(p.queue)
		}
	}
	// The end goes last: after every line, and after every status move (a call answered an
	// instant before it ended has started).
	ending := p.ending && len(p.queue) == len(ready)
	if ending && p.recWaiting {
		// The recording is closed once the engine stops, an instant after its end: the end
		// waits for it (not for ever), to be stored with its name (issue 20).
		if p.recSince.IsZero() {
			p.recSince = time.Now()
			time.AfterFunc(recordingWait, p.signal)
		}
		ending = time.Since(p.recSince) >= recordingWait
	}
	if ending && p.cmdHeld > 0 {
		// A command being carried out (an end or a transfer that caused this end, a say cut
		// short by it) records how it went first: a client that sees the end finds it settled.
		if p.cmdSince.IsZero() {
			p.cmdSince = time.Now()
			time.AfterFunc(commandWait, p.signal)
		}
		ending = time.Since(p.cmdSince) >= commandWait
	}
	p.endTaken = p.endTaken || ending
	reason, cost, turns, recording, out := p.endReason, p.cost, slices.Clone(p.turns), p.recording, p.callOut
	known := endKnown{def: p.def}
	p.mu.Unlock()

	rows := make([]store.ConversationLine, len(ready))
	for i, l := range ready {
		rows[i] = lineRow(l)
	}
	batch := p.transcript.due(p, len(rows), ending)
	if ending && p.keptAll {
		known.lines = append(slices.Clip(p.kept), rows...)
	}
	if len(statuses) == 0 && len(rows) == 0 && !batch && !ending {
		return false, nil
	}
	linesStored := false
	write := func(tx *store.Tx) error {
		tx.BatchEvents() // issue 20: the flush's events in one statement
		for _, sc := range statuses {
			if err := statusTx(ctx, tx, p.conv, sc.status, sc.at); err != nil { // issue 14: with conversation.started
				return err
			}
		}
		if len(rows) > 0 && !linesStored {
			if err := tx.AppendLines(ctx, p.conv.ID, rows); err != nil {
				return err
			}
		}
		if batch { // issue 14: conversation.transcript batches
			if err := transcriptBatch(ctx, tx, p.conv, p.transcript.batch(rows)); err != nil {
				return err
			}
		}
		if ending {
			return p.rt.endTx(ctx, tx, p.conv, reason, cost, turns, recording, out, &known)
		}
		return nil
	}
	err := p.rt.store.Tx(ctx, write)
	if errors.Is(err, store.ErrConflict) && len(rows) > 0 {
		// Lines stored by an earlier try whose answer was lost: store the others, then the rest.
		if err = p.appendOneByOne(ctx, rows); err == nil {
			linesStored = true
			err = p.rt.store.Tx(ctx, write)
		}
	}
	if err != nil {
		return false, err
	}
	p.mu.Lock()
	p.statuses = p.statuses[len(statuses):]
	if len(ready) > 0 {
		p.next, p.gapSince = ready[len(ready)-1].Seq+1, time.Time{}
		p.queue = p.queue[len(ready):]
	}
	p.mu.Unlock()
	if len(rows) > 0 {
		p.keep(rows)
		p.transcript.stored(rows, batch)
		p.rt.hub.notify(ctx, linesNote{ID: p.conv.ID, Seq: ready[len(ready)-1].Seq})
	} else if batch {
		p.transcript.stored(nil, true)
	}
	if !ending {
		return false, nil
	}
	p.rt.hub.notify(ctx, linesNote{ID: p.conv.ID, Seq: p.next - 1, Ended: true})
	return true, nil
}

func (p *persister) appendOneByOne(ctx context.Context, rows []store.ConversationLine) error {
	for _, r := range rows {
		if err := p.rt.store.AppendLines(ctx, p.conv.ID, []store.ConversationLine{r}); err != nil && !errors.Is(err, store.ErrConflict) {
			return err
		}
	}
	return nil
}

// lineRow is the stored form of an engine line.
func lineRow(l session.Line) store.ConversationLine {
	row := store.ConversationLine{Seq: l.Seq, Role: string(l.Role), Text: l.Text, Start: l.Start, End: l.End, Interrupted: l.Interrupted}
	if len(l.Meta) > 0 {
		if b, err := json.Marshal(l.Meta); err == nil {
			row.Meta = b
		}
	}
	if row.End.Before(row.Start) {
		row.End = row.Start
	}
	return row
}

// storeEnd records a conversation's end in one transaction: the end itself, the charge for a
// live conversation, and the conversation.ended event. An end stored already is left alone.
func (rt *Runtime) storeEnd(ctx context.Context, c store.Conversation, reason session.EndReason, cost session.Cost, turns []session.TurnMetrics, recording string, out store.CallOutcome) error {
	return rt.store.Tx(ctx, func(tx *store.Tx) error {
		tx.BatchEvents() // conversation.ended and the final transcript in one statement
		return rt.endTx(ctx, tx, c, reason, cost, turns, recording, out, nil)
	})
}

// endKnown is what the caller of endTx knows of the conversation already, so that it is not
// read again (issue 20): the definition it ran with, and its stored lines (when they are the
// whole transcript, seq 1 on without a gap).
type endKnown struct {
	def   *agentdef.Definition
	lines []store.ConversationLine
}

// endTx is storeEnd inside tx (a chat's last message stores its end with its lines). known
// may be nil.
func (rt *Runtime) endTx(ctx context.Context, tx *store.Tx, c store.Conversation, reason session.EndReason, cost session.Cost, turns []session.TurnMetrics, recording string, out store.CallOutcome, known *endKnown) error {
	if turns == nil {
		turns = []session.TurnMetrics{}
	}
	tb, err := json.Marshal(turns)
	if err != nil {
		return err
	}
	cb, err := json.Marshal(cost)
	if err != nil {
		return err
	}
	micros := int64(0)
	if c.Mode == store.ModeLive {
		micros = rt.pricing.Micros(c.Channel, cost)
	}
	ended, ok, err := tx.EndConversationGet(ctx, c.ID, store.ConversationEnd{Reason: string(reason), At: rt.now(), Turns: tb, Cost: cb, CostMicros: micros, Recording: recording, Outcome: out})
	if err != nil || !ok {
		return err
	}
	if c.Mode == store.ModeLive {
		if err := rt.chargeParts(ctx, tx, c, cost); err != nil {
			return err
		}
	}
	data, _ := json.Marshal(EventData(ended))
	_, err = tx.InsertEvent(ctx, store.Event{OrgID: c.OrgID, ProjectID: c.ProjectID, Mode: c.Mode, Type: "conversation.ended",
		ConversationID: c.ID, AgentID: c.AgentID, Data: data})
	if err != nil {
		return err
	}
	// issue 14: the whole transcript, and the post-call analysis, with the end.
	if known == nil {
		known = &endKnown{}
	}
	if err := rt.finalTranscript(ctx, tx, ended, known.lines); err != nil {
		return err
	}
	return rt.enqueueAnalysis(ctx, tx, ended, known.def)
}

// EventData is the data of a conversation event: the conversation as it is (issue 14: one
// shape, events.ConversationData, for every conversation event). The start values, metadata
// and phone numbers are included; receivers that must not see them get them stripped.
func EventData(c store.Conversation) events.ConversationData { return events.ConversationOf(c) }
