package runtime

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/parley-voice/parley/control/app/events"

	"github.com/parley-voice/parley/control/agentdef"
	"github.com/parley-voice/parley/control/store"
	"github.com/parley-voice/parley/session"
	"github.com/parley-voice/parley/session/llm"
)

// issue 14: what the post-call analysis (control/app/analysis) needs of the runtime.

// AnalyzeJobKind is the job kind of a conversation's post-call analysis; its payload is
// {"conversation_id": …}.
const AnalyzeJobKind = "conversations.analyze"

// NeedsAnalysis reports whether a conversation of def is worked on once it ends: its analysis
// is enabled, or it collects fields (checked against collected_schema, and form.abandoned
// when a required one is missing).
func NeedsAnalysis(def *agentdef.Definition) bool {
	return def.Agent.Analysis.Enabled || len(def.Agent.Collected) > 0
}

// enqueueAnalysis queues the post-call analysis of an ended conversation on tx, the
// transaction that stores its end, when its agent asks for one.
// def is the definition the conversation ran with, when the caller has it; nil: it is read.
func (rt *Runtime) enqueueAnalysis(ctx context.Context, tx *store.Tx, c store.Conversation, def *agentdef.Definition) error {
	if def == nil {
		ag, err := tx.GetAgent(ctx, c.AgentID)
		if err != nil {
			return nil // a deleted agent: nothing to analyze with
		}
		if def, err = LoadDefinition(ctx, tx.Queries, ag, c.AgentVersion); err != nil {
			return nil
		}
	}
	if !NeedsAnalysis(def) {
		return nil
	}
	_, _, err := tx.EnqueueJob(ctx, store.NewJob{Kind: AnalyzeJobKind, Payload: []byte(fmt.Sprintf(`{"conversation_id":%q}`, c.ID)), MaxAttempts: 5})
	return err
}

// AnalysisLLM returns the LLM client and model a conversation's agent speaks with: the test
// providers' for a test-mode conversation.
func (rt *Runtime) AnalysisLLM(c store.Conversation, def *agentdef.Definition) (llm.Client, string, error) {
	provs := rt.o.Providers
	if c.Mode == store.ModeTest {
		provs = rt.o.TestProviders
	}
	if provs == nil {
		return nil, "", fmt.Errorf("%w: no providers for %s conversations on this node", ErrProvider, c.Mode)
	}
	name := provider(def.Agent.LLM.Provider, rt.o.DefaultLLM)
	client, err := provs.LLM(name)
	if err != nil {
		return nil, "", fmt.Errorf("%w: %v", ErrProvider, err)
	}
	m := model(def.Agent.LLM.Model)
	if m == "" {
		m = rt.o.LLMModels[strings.ToLower(name)]
	}
	return client, m, nil
}

// ChargeLLM charges a live conversation's post-call LLM tokens on tx, as one llm_tokens
// transaction naming the conversation. Test conversations cost nothing.
func (rt *Runtime) ChargeLLM(ctx context.Context, tx *store.Tx, c store.Conversation, what string, in, out int) error {
	if c.Mode != store.ModeLive {
		return nil
	}
	m := rt.pricing.Micros(store.ChannelChat, session.Cost{LLMInputTokens: in, LLMOutputTokens: out})
	if m <= 0 {
		return nil
	}
	_, _, err := tx.Credit().Record(ctx, store.CreditEntry{OrgID: c.OrgID, Kind: store.CreditLLMTokens, AmountMicros: -m,
		Reason: fmt.Sprintf("%s, %d input and %d output tokens", what, in, out), ConversationID: c.ID})
	return err
}

// statusTx stores a move of a conversation's status on tx, and with the move to in_progress
// the conversation.started event.
func statusTx(ctx context.Context, tx *store.Tx, c store.Conversation, status string, at time.Time) error {
	if status != store.ConvInProgress {
		_, err := tx.SetConversationStatus(ctx, c.ID, status, at)
		return err
	}
	now, moved, err := tx.SetConversationStatusGet(ctx, c.ID, status, at)
	if err != nil || !moved {
		return err
	}
	_, err = events.Emit(ctx, tx, events.Of(events.ConversationStarted, now), events.ConversationOf(now))
	return err
}

// transcriptBatchEvery is how often conversation.transcript carries the lines stored since
// the last one.
const transcriptBatchEvery = time.Second

// transcriptBatcher gathers a conversation's stored lines into conversation.transcript events
// of about a second each. It is used by the persister's one writing goroutine, except timer,
// which is guarded by the persister's mu.
type transcriptBatcher struct {
	held  []store.ConversationLine
	last  time.Time
	timer *time.Timer
}

// due reports whether the held lines, with more new ones, go out as one event now: a second
// has passed since the last, or the conversation ends. When they wait, it makes sure the
// persister looks again in time. The caller stores the event and then calls sent or held.
func (b *transcriptBatcher) due(p *persister, more int, ending bool) bool {
	if len(b.held)+more == 0 {
		return false
	}
	if wait := transcriptBatchEvery - time.Since(b.last); wait > 0 && !ending {
		p.mu.Lock()
		if b.timer == nil {
			b.timer = time.AfterFunc(wait, func() {
				p.mu.Lock()
				p.transcript.timer = nil
				p.mu.Unlock()
				p.signal()
			})
		}
		p.mu.Unlock()
		return false
	}
	return true
}

// batch is the held lines followed by rows, the lines of the event due.
func (b *transcriptBatcher) batch(rows []store.ConversationLine) []store.ConversationLine {
	if len(b.held) == 0 {
		return rows
	}
	return append(slices.Clip(b.held), rows...)
}

// stored records that rows were stored, and sent in an event (with the held lines) or held.
func (b *transcriptBatcher) stored(rows []store.ConversationLine, sent bool) {
	if sent {
		b.held, b.last = nil, time.Now()
		return
	}
	b.held = append(b.held, rows...)
}

// transcriptBatch records conversation.transcript carrying lines (final false): a voice
// conversation's lines of about the last second, or a chat turn's lines, stored at once.
func transcriptBatch(ctx context.Context, tx *store.Tx, c store.Conversation, lines []store.ConversationLine) error {
	_, err := events.Emit(ctx, tx, events.Of(events.ConversationTranscript, c),
		events.TranscriptData{Object: "conversation_transcript", ConversationID: string(c.ID), Lines: events.LinesOf(lines)})
	return err
}

// wholeTranscript reports whether lines are seq 1 to last, each once, in order.
func wholeTranscript(lines []store.ConversationLine, last int64) bool {
	if int64(len(lines)) != last || lines == nil && last > 0 {
		return false
	}
	for i, l := range lines {
		if l.Seq != int64(i+1) {
			return false
		}
	}
	return true
}

// finalTranscript records, with a conversation's end, conversation.transcript carrying the
// whole transcript (final true).
// known are the lines the caller stored, used when they are the whole transcript (seq 1 to
// the conversation's last, issue 20); otherwise the lines are read.
func (rt *Runtime) finalTranscript(ctx context.Context, tx *store.Tx, c store.Conversation, known []store.ConversationLine) error {
	lines := known
	if !wholeTranscript(known, c.LastSeq) {
		all, err := tx.AllLines(ctx, c.ID)
		if err != nil {
			return err
		}
		lines = all
	}
	_, err := events.Emit(ctx, tx, events.Of(events.ConversationTranscript, c),
		events.TranscriptData{Object: "conversation_transcript", ConversationID: string(c.ID), Final: true, Lines: events.LinesOf(lines)})
	return err
}
