package runtime

import (
	"context"
	"fmt"
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
func (rt *Runtime) enqueueAnalysis(ctx context.Context, tx *store.Tx, c store.Conversation) error {
	ag, err := tx.GetAgent(ctx, c.AgentID)
	if err != nil {
		return nil // a deleted agent: nothing to analyze with
	}
	def, err := LoadDefinition(ctx, tx.Queries, ag, c.AgentVersion)
	if err != nil || !NeedsAnalysis(def) {
		return nil
	}
	_, _, err = tx.EnqueueJob(ctx, store.NewJob{Kind: AnalyzeJobKind, Payload: []byte(fmt.Sprintf(`{"conversation_id":%q}`, c.ID)), MaxAttempts: 5})
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

// setStatus stores a move of a conversation's status, and with the move to in_progress the
// conversation.started event, in one transaction.
func (rt *Runtime) setStatus(ctx context.Context, c store.Conversation, status string, at time.Time) error {
	return rt.store.Tx(ctx, func(tx *store.Tx) error {
		moved, err := tx.SetConversationStatus(ctx, c.ID, status, at)
		if err != nil || !moved || status != store.ConvInProgress {
			return err
		}
		now, err := tx.GetConversation(ctx, c.ID)
		if err != nil {
			return err
		}
		_, err = events.Emit(ctx, tx, events.Of(events.ConversationStarted, now), events.ConversationOf(now))
		return err
	})
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

func (b *transcriptBatcher) add(rows []store.ConversationLine) { b.held = append(b.held, rows...) }

// flush records the held lines as one event when a second has passed since the last, or when
// the conversation ends; otherwise it makes sure the persister looks again in time.
func (b *transcriptBatcher) flush(ctx context.Context, p *persister, ending bool) error {
	if len(b.held) == 0 {
		return nil
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
		return nil
	}
	err := p.rt.store.Tx(ctx, func(tx *store.Tx) error { return transcriptBatch(ctx, tx, p.conv, b.held) })
	if err != nil {
		return err
	}
	b.held, b.last = nil, time.Now()
	return nil
}

// transcriptBatch records conversation.transcript carrying lines (final false): a voice
// conversation's lines of about the last second, or a chat turn's lines, stored at once.
func transcriptBatch(ctx context.Context, tx *store.Tx, c store.Conversation, lines []store.ConversationLine) error {
	_, err := events.Emit(ctx, tx, events.Of(events.ConversationTranscript, c),
		events.TranscriptData{Object: "conversation_transcript", ConversationID: string(c.ID), Lines: events.LinesOf(lines)})
	return err
}

// finalTranscript records, with a conversation's end, conversation.transcript carrying the
// whole transcript (final true).
func (rt *Runtime) finalTranscript(ctx context.Context, tx *store.Tx, c store.Conversation) error {
	lines, err := tx.AllLines(ctx, c.ID)
	if err != nil {
		return err
	}
	_, err = events.Emit(ctx, tx, events.Of(events.ConversationTranscript, c),
		events.TranscriptData{Object: "conversation_transcript", ConversationID: string(c.ID), Final: true, Lines: events.LinesOf(lines)})
	return err
}
