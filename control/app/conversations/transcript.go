package conversations

import (
	"context"
	"encoding/json"
	"time"

	"github.com/parley-voice/parley/control/app"
	"github.com/parley-voice/parley/control/app/billing"
	"github.com/parley-voice/parley/control/fault"
	"github.com/parley-voice/parley/control/store"
	"github.com/parley-voice/parley/session"
)

// Line is the interface's form of a stored transcript line.
func Line(l store.ConversationLine) TranscriptLine {
	return TranscriptLine{Object: "transcript_line", Seq: l.Seq, Role: l.Role, Text: l.Text, Start: app.T(l.Start), End: app.T(l.End), Interrupted: l.Interrupted, Meta: OrEmpty(l.Meta)}
}

// Lines is the interface's form of stored transcript lines.
func Lines(ls []store.ConversationLine) []TranscriptLine {
	out := make([]TranscriptLine, len(ls))
	for i, l := range ls {
		out[i] = Line(l)
	}
	return out
}

// SessionLine is the interface's form of a line the engine has just made.
func SessionLine(l session.Line) TranscriptLine {
	meta := json.RawMessage("{}")
	if len(l.Meta) > 0 {
		if b, err := json.Marshal(l.Meta); err == nil {
			meta = b
		}
	}
	end := l.End
	if end.Before(l.Start) {
		end = l.Start
	}
	return TranscriptLine{Object: "transcript_line", Seq: l.Seq, Role: string(l.Role), Text: l.Text, Start: app.T(l.Start.UTC().Truncate(time.Microsecond)), End: app.T(end.UTC().Truncate(time.Microsecond)), Interrupted: l.Interrupted, Meta: meta}
}

// SchemaDoc describes the object in the document.
func (ConversationCost) SchemaDoc() string { return "What a conversation used and cost." }

// Cost is the cost of a stored conversation.
func Cost(c store.Conversation) ConversationCost {
	var k session.Cost
	_ = json.Unmarshal(c.Cost, &k)
	return ConversationCost{Object: "conversation_cost", Currency: "USD", TotalMicros: c.CostMicros, Total: billing.FormatUSD(c.CostMicros),
		Charged: c.Mode == store.ModeLive && c.CostMicros > 0, Final: c.Ended(),
		STTSeconds: k.STTSeconds, LLMInputTokens: k.LLMInputTokens, LLMOutputTokens: k.LLMOutputTokens, TTSCharacters: k.TTSCharacters, CallSeconds: k.CallSeconds}
}

// Transcript is the Transcript object.
type Transcript struct {
	Object         string           `json:"object" jsonschema:"enum=transcript"`
	ConversationID string           `json:"conversation_id" jsonschema:"format=uuid"`
	Status         string           `json:"status" jsonschema:"enum=pending,enum=ringing,enum=in_progress,enum=ended"`
	Ended          bool             `json:"ended"`
	Lines          []TranscriptLine `json:"lines"`
}

// SchemaDoc describes the object in the document.
func (Transcript) SchemaDoc() string {
	return "Every line of a conversation's transcript, in seq order."
}

// LiveTranscript is the LiveTranscript object.
type LiveTranscript struct {
	Object         string           `json:"object" jsonschema:"enum=live_transcript"`
	ConversationID string           `json:"conversation_id" jsonschema:"format=uuid"`
	Status         string           `json:"status" jsonschema:"enum=pending,enum=ringing,enum=in_progress,enum=ended"`
	Lines          []TranscriptLine `json:"lines" jsonschema:"maxItems=100"`
	NextAfter      int64            `json:"next_after" doc:"Send it back as after." jsonschema:"minimum=0"`
	Ended          bool             `json:"ended" doc:"The conversation has ended and every line has been read: stop asking."`
}

// SchemaDoc describes the object in the document.
func (LiveTranscript) SchemaDoc() string {
	return "The lines after the last one read, or none when wait ran out."
}

// Transcript returns every line of the actor's conversation with id.
func (s *Service) Transcript(ctx context.Context, act app.Actor, id string) (Transcript, error) {
	conv, err := load(ctx, s.Store.Queries, act, id)
	if err != nil {
		return Transcript{}, err
	}
	ls, err := s.Store.Conversations().AllLines(ctx, act.Scope, conv.ID)
	if err != nil {
		return Transcript{}, err
	}
	return Transcript{Object: "transcript", ConversationID: string(conv.ID), Status: conv.Status, Ended: conv.Ended(), Lines: Lines(ls)}, nil
}

// Live transcript limits.
const (
	// LiveMaxWait is the longest a reader may wait for a line.
	LiveMaxWait = 30 * time.Second
	// LiveMaxLines is the most lines one answer carries.
	LiveMaxLines = 100
	// LiveRetention is how long after a call ends its lines are served here.
	LiveRetention = 24 * time.Hour
)

// Live returns the lines of the actor's voice conversation with id whose seq is greater than
// after (at most LiveMaxLines), waiting up to wait for one when there is none yet. No line is
// skipped or repeated, whichever node runs the call: lines are read from the store in seq
// order. A chat has no live transcript (409 no_live_transcript).
func (s *Service) Live(ctx context.Context, act app.Actor, id string, after int64, wait time.Duration) (LiveTranscript, error) {
	conv, err := load(ctx, s.Store.Queries, act, id)
	if err != nil {
		return LiveTranscript{}, err
	}
	if textual(conv) {
		return LiveTranscript{}, fault.E(fault.CodeNoLiveTranscript, "A %s conversation has no live transcript; read GET /v1/conversations/%s/transcript.", conv.Channel, conv.ID)
	}
	answer := func(cv store.Conversation, lines []store.ConversationLine, more bool) LiveTranscript {
		v := LiveTranscript{Object: "live_transcript", ConversationID: string(cv.ID), Status: cv.Status, Lines: Lines(lines), NextAfter: after,
			Ended: cv.Ended() && !more}
		if len(lines) > 0 {
			v.NextAfter = lines[len(lines)-1].Seq
		}
		return v
	}
	if conv.Ended() && conv.EndedAt != nil && s.now().Sub(*conv.EndedAt) > LiveRetention {
		return answer(conv, nil, false), nil // lines are kept one day here; the transcript has them all
	}
	deadline := time.NewTimer(wait)
	defer deadline.Stop()
	repo := s.Store.Conversations()
	for {
		var woke <-chan struct{}
		release := func() {}
		if s.Runtime != nil {
			woke, release = s.Runtime.Watch(conv.ID)
		}
		// The status first: once it says ended, every line is stored.
		cur, err := repo.Get(ctx, act.Scope, conv.ID)
		if err != nil {
			release()
			return LiveTranscript{}, app.NotFound(err, fault.CodeConversationNotFound, "conversation", id)
		}
		lines, err := repo.Lines(ctx, act.Scope, conv.ID, after, LiveMaxLines+1)
		if err != nil {
			release()
			return LiveTranscript{}, err
		}
		more := len(lines) > LiveMaxLines
		if more {
			lines = lines[:LiveMaxLines]
		}
		if len(lines) > 0 || cur.Ended() {
			release()
			return answer(cur, lines, more), nil
		}
		select {
		case <-woke:
			release()
		case <-deadline.C:
			release()
			return answer(cur, nil, false), nil
		case <-ctx.Done():
			release()
			return LiveTranscript{}, ctx.Err()
		}
	}
}
