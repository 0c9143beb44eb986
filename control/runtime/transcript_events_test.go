package runtime

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/parley-voice/parley/control/bus"
	"github.com/parley-voice/parley/control/store"
	"github.com/parley-voice/parley/session"
)

// transcriptEvent is one conversation.transcript event as a test reads it.
type transcriptEvent struct {
	at    time.Time
	final bool
	seqs  []int64
}

// transcriptEvents returns the conversation.transcript events of c, oldest first, after
// checking what every conversation's must hold: the last one, and only it, is final and
// carries every stored line; the others carry each stored line once, in order.
func transcriptEvents(t *testing.T, r *rig, c store.Conversation) (parts []transcriptEvent, final transcriptEvent) {
	t.Helper()
	stored := r.lines(c.ID)
	evs, err := r.st.ListEvents(context.Background(), r.org.ID, c.Mode, "", 100)
	if err != nil {
		t.Fatal(err)
	}
	var all []transcriptEvent
	for _, e := range evs {
		if e.Type != "conversation.transcript" || e.ConversationID != c.ID {
			continue
		}
		var d struct {
			Final bool `json:"final"`
			Lines []struct {
				Seq int64 `json:"seq"`
			} `json:"lines"`
		}
		if err := json.Unmarshal(e.Data, &d); err != nil {
			t.Fatal(err)
		}
		bt := transcriptEvent{at: e.CreatedAt, final: d.Final}
		for _, l := range d.Lines {
			bt.seqs = append(bt.seqs, l.Seq)
		}
		all = append(all, bt)
	}
	if len(all) < 2 {
		t.Fatalf("%d transcript events, want batches and the final one: %+v", len(all), all)
	}
	final, parts = all[len(all)-1], all[:len(all)-1]
	if !final.final || len(final.seqs) != len(stored) {
		t.Fatalf("the last transcript event %+v, want final with all %d lines", final, len(stored))
	}
	var seqs []int64
	for i, bt := range parts {
		if bt.final {
			t.Fatalf("batch %d is final before the end: %+v", i, parts)
		}
		seqs = append(seqs, bt.seqs...)
	}
	if len(seqs) != len(stored) {
		t.Fatalf("the batches carry lines %v, %d stored", seqs, len(stored))
	}
	for i, seq := range seqs {
		if seq != stored[i].Seq || seq != final.seqs[i] {
			t.Fatalf("the batches carry lines %v, want each stored line once in order", seqs)
		}
	}
	return parts, final
}

// TestTranscriptEventsBatched (issue 14): conversation.transcript carries the final lines as
// they are stored, in batches, and with the end the whole transcript once (final true). A
// voice conversation's batches are about a second apart (several lines to a batch when they
// come faster); a chat's turn, stored at once, is one batch. On both stores.
func TestTranscriptEventsBatched(t *testing.T) {
	for _, k := range storeKinds(t) {
		t.Run(k.name, func(t *testing.T) {
			b := bus.NewMemory()
			t.Cleanup(func() { b.Close() })
			r := newRigOn(t, openStore(t, k.opts(t)), b)
			rt := r.node("a", true)
			ctx := context.Background()

			// A voice test call whose agent takes 400 ms to start each answer: about 3 s of lines.
			r.tp.Fakes.Chat.SetLatency(400*time.Millisecond, 0)
			call := r.conversation(store.ChannelPhone, store.ModeTest, store.ConvPending)
			said := []string{"Hello?", "Tell me more.", "And then?", "Really?", "Go on.", "Bye."}
			if err := rt.Place(ctx, store.ModeTest, PlaceRequest{ConversationID: call.ID, Lines: said}); err != nil {
				t.Fatal(err)
			}
			waitFor(t, 30*time.Second, "the call to end", func() bool { return r.get(call.ID).Status == store.ConvEnded })
			parts, _ := transcriptEvents(t, r, call)
			got := r.get(call.ID)
			took := got.EndedAt.Sub(*got.StartedAt)
			for i := 1; i < len(parts)-1; i++ { // only the end's flush may come sooner
				if gap := parts[i].at.Sub(parts[i-1].at); gap < 900*time.Millisecond || gap > 3*time.Second {
					t.Errorf("voice batch %d came %s after the one before, want about a second", i, gap)
				}
			}
			if max := int(took/time.Second) + 2; len(parts) > max || len(parts) < 3 {
				t.Errorf("%d voice batches over %s, want 3 to %d", len(parts), took, max)
			}
			t.Logf("voice: %d lines in %d batches over %s", len(r.lines(call.ID)), len(parts), took)

			// A chat: the opening line, then two lines a turn.
			r.tp.Fakes.Chat.SetLatency(0, 0)
			chat := r.conversation(store.ChannelChat, store.ModeLive, store.ConvInProgress)
			if _, err := rt.StartChat(ctx, chat.ID); err != nil {
				t.Fatal(err)
			}
			for i := range 3 {
				if _, err := rt.Send(ctx, chat.ID, fmt.Sprintf("message %d", i), nil, nil); err != nil {
					t.Fatal(err)
				}
			}
			if err := rt.End(ctx, chat.ID, session.EndAPI, true); err != nil {
				t.Fatal(err)
			}
			parts, _ = transcriptEvents(t, r, chat)
			var sizes []int
			for _, p := range parts {
				sizes = append(sizes, len(p.seqs))
			}
			if fmt.Sprint(sizes) != "[1 2 2 2]" {
				t.Fatalf("chat batches of %v lines, want [1 2 2 2] (the opening line, then one batch a turn)", sizes)
			}
		})
	}
}

// BenchmarkLineAddedWithEvents (issue 14): what recording events costs the voice path. The
// engine hands each final line to its conversation's persister (LineAdded) on its own
// goroutine; the persister's goroutine stores the lines and records the conversation.transcript
// batches (SQLite file). The figures are the caller's side only: mean, p50, p99 and max of one
// LineAdded, with a line every 200 µs (far more than speech makes) while the writes run (ns/op
// counts the loop's sleep too; on a busy machine max is the scheduler's).
//
//	go test -run '^$' -bench LineAddedWithEvents -benchtime 5000x ./control/runtime/
func BenchmarkLineAddedWithEvents(b *testing.B) {
	r := newRig(b)
	rt := r.node("a", false)
	c := r.conversation(store.ChannelPhone, store.ModeLive, store.ConvInProgress)
	p := newPersister(rt, c)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	p.start(ctx, func() {})
	took := make([]time.Duration, 0, b.N)
	now := time.Now()
	b.ResetTimer()
	for i := range b.N {
		l := session.Line{Seq: c.LastSeq + int64(i) + 1, Role: session.RoleUser, Text: "A final line of speech.", Start: now, End: now}
		t0 := time.Now()
		p.LineAdded(l)
		took = append(took, time.Since(t0))
		time.Sleep(200 * time.Microsecond)
	}
	b.StopTimer()
	deadline := time.Now().Add(time.Minute)
	for len(r.lines(c.ID)) < b.N {
		if time.Now().After(deadline) {
			b.Fatalf("%d of %d lines stored after a minute", len(r.lines(c.ID)), b.N)
		}
		time.Sleep(10 * time.Millisecond)
	}
	evs, err := r.st.ListEvents(context.Background(), r.org.ID, store.ModeLive, "", 100)
	if err != nil {
		b.Fatal(err)
	}
	batches := 0
	for _, e := range evs {
		if e.Type == "conversation.transcript" && e.ConversationID == c.ID {
			batches++
		}
	}
	if b.N >= 1000 && batches == 0 {
		b.Fatal("no conversation.transcript recorded while the lines were added")
	}
	var sum time.Duration
	for _, d := range took {
		sum += d
	}
	slices.Sort(took)
	b.ReportMetric(float64(sum.Nanoseconds())/float64(len(took))/1000, "mean_µs")
	b.ReportMetric(float64(took[len(took)/2].Nanoseconds())/1000, "p50_µs")
	b.ReportMetric(float64(took[len(took)*99/100].Nanoseconds())/1000, "p99_µs")
	b.ReportMetric(float64(took[len(took)-1].Nanoseconds())/1000, "max_µs")
	b.ReportMetric(float64(batches), "transcript_events")
}
