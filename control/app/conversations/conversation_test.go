package conversations

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/parley-voice/parley/control/store"
	"github.com/parley-voice/parley/session"
)

// TestViewTurns: the turn metrics are read from the engine's stored form, and Parley's share
// is counted as the engine counts it.
func TestViewTurns(t *testing.T) {
	t0 := time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)
	ms := func(n int) time.Time { return t0.Add(time.Duration(n) * time.Millisecond) }
	m := session.TurnMetrics{Turn: 1, SpeechEnd: ms(0), STTFinal: ms(120), EndOfTurn: ms(400), LLMRequestSent: ms(401),
		LLMFirstToken: ms(650), LLMFirstChunk: ms(700), TTSFirstRequest: ms(702), TTSFirstByte: ms(800), FirstAudioOut: ms(803),
		Endpointing: "vad"}
	raw, err := json.Marshal([]session.TurnMetrics{m, {Turn: 2, Endpointing: "text"}})
	if err != nil {
		t.Fatal(err)
	}
	v := View(store.Conversation{ID: "c", Turns: raw, Mode: store.ModeLive})
	if len(v.Turns) != 2 {
		t.Fatalf("turns = %+v", v.Turns)
	}
	got := v.Turns[0]
	want := float64(m.ParleyShare().Microseconds()) / 1000
	if got.LatencyMS.ParleyShare == nil || *got.LatencyMS.ParleyShare != want {
		t.Fatalf("parley_share = %v, want %v", got.LatencyMS.ParleyShare, want)
	}
	if *got.LatencyMS.Endpointing != 400 || *got.LatencyMS.Total != 803 || !got.EndOfTurn.Equal(ms(400)) || got.Endpointing != "vad" {
		t.Fatalf("turn 1 = %+v", got)
	}
	if second := v.Turns[1]; second.SpeechEnd != nil || second.LatencyMS.Total != nil || second.LatencyMS.ParleyShare != nil {
		t.Fatalf("an empty turn = %+v", second)
	}
	if string(v.Metadata) != "{}" || v.Object != "conversation" || v.AgentVersion != nil {
		t.Fatalf("view = %+v", v)
	}
}
