package runtime

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/parley-voice/parley/control/bus"
	"github.com/parley-voice/parley/control/store"
	"github.com/parley-voice/parley/session"
)

// Issue 20 (call rate): the control plane's share of one inbound call, through the real store
// and without media: the route (TakeInbound), the conversation built, ringing and in progress
// (with the credit hold's first reservation), the greeting line, the caller's hang-up and the
// end's bookkeeping (end, charge, events, recording, commands, call slot).

// stmtCounter counts the store's statements and transactions (store.OnStatement), and lets a
// caller wait for a statement of one kind.
type stmtCounter struct {
	mu      sync.Mutex
	ops     map[string]int
	waiters map[string][]chan struct{}
}

func newStmtCounter() *stmtCounter {
	return &stmtCounter{ops: map[string]int{}, waiters: map[string][]chan struct{}{}}
}

func (c *stmtCounter) note(op string) {
	c.mu.Lock()
	c.ops[op]++
	ws := c.waiters[op]
	delete(c.waiters, op)
	c.mu.Unlock()
	for _, w := range ws {
		close(w)
	}
}

// next returns a channel closed when the next statement of op runs.
func (c *stmtCounter) next(op string) <-chan struct{} {
	w := make(chan struct{})
	c.mu.Lock()
	c.waiters[op] = append(c.waiters[op], w)
	c.mu.Unlock()
	return w
}

// take returns the counts since the last take (transactions, statements, and by op) and resets them.
func (c *stmtCounter) take() (txs, stmts int, ops map[string]int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	ops = c.ops
	c.ops = map[string]int{}
	for op, n := range ops {
		if op == store.TxOp {
			txs += n
		} else {
			stmts += n
		}
	}
	return txs, stmts, ops
}

// inboundRig is a runtime taking the calls of one number of a published inbound agent, whose
// organization has credit, with the store's statements counted.
type inboundRig struct {
	*rig
	rt     *Runtime
	number string
	count  *stmtCounter
}

func newInboundRig(tb testing.TB, o store.Options) *inboundRig {
	tb.Helper()
	st := openStore(tb, o)
	count := newStmtCounter()
	st.OnStatement(count.note) // before anything runs on st
	b := bus.NewMemory()
	tb.Cleanup(func() { b.Close() })
	r := newRigOn(tb, st, b)
	ctx := context.Background()
	def := `{"agent": {"name": "Desk", "kind": "custom", "direction": "inbound", "channels": ["phone"],
		"system_prompt": "You answer the phone.", "first_message": "Thank you for calling."}, "references": {}}`
	parsed, err := ParseStored(json.RawMessage(def))
	if err != nil {
		tb.Fatal(err)
	}
	raw, _ := json.Marshal(parsed)
	ag, err := st.Agents().Create(ctx, store.OrgScope(r.org.ID), store.NewAgent{ProjectID: r.proj.ID, Name: "Desk", Kind: "custom",
		Direction: "inbound", Channels: []string{"phone"}, Definition: raw})
	if err != nil {
		tb.Fatal(err)
	}
	if _, _, err := st.Agents().Publish(ctx, store.OrgScope(r.org.ID), ag.ID, "", "test"); err != nil {
		tb.Fatal(err)
	}
	ir := &inboundRig{rig: r, rt: r.node("media", true), number: "+14155550050", count: count}
	if _, err := st.CreatePhoneNumber(ctx, store.NewPhoneNumber{OrgID: r.org.ID, ProjectID: r.proj.ID, Number: ir.number, AgentID: ag.ID}); err != nil {
		tb.Fatal(err)
	}
	if _, err := st.AddCredit(ctx, r.org.ID, 1_000_000_000, "test"); err != nil {
		tb.Fatal(err)
	}
	return ir
}

// call runs one inbound call's control-plane work, as the phone channel drives it, and
// returns once all of its bookkeeping is stored.
func (ir *inboundRig) call(tb testing.TB) store.ConversationID {
	id, _ := ir.timedCall(tb)
	return id
}

// timedCall is call that also returns how long the setup took: from the route to the
// conversation built (the control plane's part of INVITE → 200 OK).
func (ir *inboundRig) timedCall(tb testing.TB) (store.ConversationID, time.Duration) {
	ctx := context.Background()
	start := time.Now()
	reserved, settled := ir.count.next("reserve credit"), ir.count.next("fail pending commands")
	p, err := ir.rt.TakeInbound(ctx, InboundCall{To: ir.number, From: "+15550001111"}, 0)
	if err != nil {
		tb.Fatal(err)
	}
	id := store.ConversationID(p.ID)
	l := ir.rt.lookup(id)
	p.OnEvent(CallEvent{Kind: CallRinging})
	sess, err := p.Conversation(ctx)
	if err != nil {
		tb.Fatal(err)
	}
	setup := time.Since(start)
	p.OnEvent(CallEvent{Kind: CallInProgress})
	now := time.Now()
	l.p.LineAdded(session.Line{Seq: 1, Role: session.RoleAgent, Text: "Thank you for calling.", Start: now, End: now.Add(time.Second)})
	<-reserved // the hold's first block, taken in the call's first instants
	out := store.CallOutcome{SIPStatus: 200, Detail: "BYE from the caller"}
	p.OnEvent(CallEvent{Kind: CallHangup, EndReason: session.EndCallerHungUp, Outcome: out})
	// What the engine reports as it ends: the call's cost (call time, speech-to-text, the
	// language model, text-to-speech: four charges).
	l.p.Ended(session.EndCallerHungUp, session.Cost{CallSeconds: 1.2, STTSeconds: 1.2, LLMInputTokens: 400, LLMOutputTokens: 20, TTSCharacters: 22})
	sess.End(session.EndCallerHungUp)
	p.OnEvent(CallEvent{Kind: CallEnded, EndReason: session.EndCallerHungUp, Outcome: out})
	<-l.p.done
	<-settled // unregistered: the commands left settled
	return id, setup
}

// cpuTime is the process's user and system CPU time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func benchStoreOptions(b *testing.B) map[string]store.Options {
	out := map[string]store.Options{"sqlite": {DataDir: b.TempDir()}}
	out["postgres"] = pgOptions(b)
	return out
}

// BenchmarkInboundCall is one inbound call's control-plane work end to end (see above), on a
// SQLite file and on PostgreSQL. It reports the process's CPU per call (cpu-ms/op; the
// database server's own CPU is not in it for PostgreSQL), the store's transactions and
// statements per call, -benchmem's allocations, and the 95th percentile of the setup's wall
// time (setup-p95-ms: the route to the conversation built, i.e. the control plane's part of
// INVITE → 200 OK; meaningful on an idle machine only).
func BenchmarkInboundCall(b *testing.B) {
	for _, name := range []string{"sqlite", "postgres"} {
		b.Run(name, func(b *testing.B) {
			o := benchStoreOptions(b)[name]
			ir := newInboundRig(b, o)
			ir.call(b) // warm: statements prepared, caches filled
			ir.count.take()
			b.ReportAllocs()
			var setups []time.Duration
			cpu0 := cpuTime()
			for b.Loop() {
				_, d := ir.timedCall(b)
				setups = append(setups, d)
			}
			cpu := cpuTime() - cpu0
			slices.Sort(setups)
			b.ReportMetric(float64(setups[len(setups)*95/100].Microseconds())/1000, "setup-p95-ms") // wall time: mind the load
			txs, stmts, ops := ir.count.take()
			n := float64(b.N)
			b.ReportMetric(float64(cpu.Microseconds())/1000/n, "cpu-ms/op")
			b.ReportMetric(float64(txs)/n, "tx/op")
			b.ReportMetric(float64(stmts)/n, "stmts/op")
			if testing.Verbose() {
				var sb strings.Builder
				for _, op := range slices.Sorted(maps.Keys(ops)) {
					fmt.Fprintf(&sb, "  %5.2f %s\n", float64(ops[op])/n, op)
				}
				b.Logf("per call:\n%s", sb.String())
			}
		})
	}
}
