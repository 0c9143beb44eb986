package bench

import (
	"math"
	"strings"
	"testing"
	"time"
)

func tp(t time.Time) *time.Time { return &t }

// syntheticCall builds a call whose turn k ended its speech at base+k*10s and heard the reply
// after latency, and the conversation that reports it, with known component times.
func syntheticCall(from string, base time.Time, latencies []time.Duration) (CallResult, Conversation) {
	c := CallResult{Kind: KindSIP, From: from}
	cv := Conversation{ID: "conv-" + from, FromNumber: &from}
	for k, lat := range latencies {
		se := base.Add(time.Duration(k) * 10 * time.Second)
		c.Script.Turns = append(c.Script.Turns, TurnTiming{Index: k + 1, SpeechEnd: se, Heard: se.Add(lat), Latency: lat})
		eng := se.Add(12 * time.Millisecond) // the engine hears the end 12 ms later
		eot := eng.Add(600 * time.Millisecond)
		share := 3.5
		cv.Turns = append(cv.Turns, APITurn{Turn: k + 1, SpeechEnd: tp(eng), EndOfTurn: tp(eot), LLMRequestSent: tp(eot.Add(time.Millisecond)),
			LLMFirstToken: tp(eot.Add(401 * time.Millisecond)), TTSFirstRequest: tp(eot.Add(402 * time.Millisecond)),
			TTSFirstByte: tp(eot.Add(552 * time.Millisecond)), FirstAudioOut: tp(eot.Add(553 * time.Millisecond))})
		cv.Turns[k].LatencyMS.ParleyShare = &share
	}
	return c, cv
}

func TestJoinTurnsAndCheck(t *testing.T) {
	base := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	lat := JambonzLatencies()
	c1, cv1 := syntheticCall("+1555000001", base, []time.Duration{1180 * time.Millisecond, 1200 * time.Millisecond})
	c2, _ := syntheticCall("+1555000002", base, []time.Duration{1190 * time.Millisecond})
	turns := JoinTurns([]CallResult{c1, c2}, map[string]Conversation{c1.From: cv1}, lat)
	if len(turns) != 3 {
		t.Fatalf("%d turns", len(turns))
	}
	r := turns[0]
	if !r.Match || r.Latency != 1180 || r.ShareEar != 30 {
		t.Fatalf("first turn %+v", r)
	}
	near := func(name string, got, want float64) {
		if math.Abs(got-want) > 1e-6 {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}
	near("ingress", r.Ingress, 12)
	near("engine total", r.EngineTotal, 1153)
	near("egress", r.Egress, 1180-12-1153) // 15 ms
	near("endpointing", r.Endpointing, 600)
	near("llm first token", r.LLMFirstToken, 400)
	near("llm first chunk", r.LLMFirstChunk, 400) // no chunk time reported: the first token stands in
	near("tts first byte", r.TTSFirstByte, 150)
	near("share engine", r.ShareEngine, 3.5)
	if turns[2].Match {
		t.Error("a call without a conversation matched")
	}
	cc := Check(turns, lat)
	if cc.Turns != 3 || cc.Matched != 2 || cc.Endpointing.ConfiguredMS != 600 || cc.Endpointing.Measured.P50 != 600 {
		t.Errorf("cross-check %+v", cc)
	}
	if len(cc.Notes) != 1 || !strings.Contains(cc.Notes[0], "1 of 3 turns") {
		t.Errorf("notes %v", cc.Notes)
	}
	// A provider far off its configuration is named.
	lat.TTSFirstByte = 100 * time.Millisecond
	cc = Check(turns, lat)
	found := false
	for _, n := range cc.Notes {
		found = found || strings.Contains(n, "TTS first byte")
	}
	if !found {
		t.Errorf("a 50 ms TTS disagreement was not noted: %v", cc.Notes)
	}
}

func TestJoinTurnsMatchesByTimeNotIndex(t *testing.T) {
	base := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	c, cv := syntheticCall("+1", base, []time.Duration{time.Second, time.Second})
	// The engine counted an extra turn first (a stray noise); times still pair them.
	extra := APITurn{Turn: 1, SpeechEnd: tp(base.Add(-20 * time.Second)), FirstAudioOut: tp(base.Add(-19 * time.Second))}
	cv.Turns = append([]APITurn{extra}, cv.Turns...)
	turns := JoinTurns([]CallResult{c}, map[string]Conversation{"+1": cv}, JambonzLatencies())
	for _, r := range turns {
		if !r.Match || r.Ingress != 12 {
			t.Errorf("turn %d: %+v", r.Turn, r)
		}
	}
}

func TestReasons(t *testing.T) {
	calls := []CallResult{{From: "a"}, {From: "b", Reason: "sip 503", Failure: "answered 503"}, {From: "c", Reason: "sip 503", Failure: "answered 503"},
		{From: "d", Reason: "sip 503", Failure: "answered 503"}, {From: "e", Reason: "no greeting", Failure: "no greeting within 15s"}}
	counts, samples := Reasons(calls)
	if counts["sip 503"] != 3 || counts["no greeting"] != 1 || len(counts) != 2 {
		t.Errorf("counts %v", counts)
	}
	if len(samples) != 3 {
		t.Errorf("samples %v", samples)
	}
	if got := fmtReasons(counts); got != "no greeting ×1, sip 503 ×3" {
		t.Errorf("fmtReasons %q", got)
	}
	if reasonOf("no reply to turn 2 within 15s") != "no reply" || reasonOf("weird") != "other" {
		t.Error("reasonOf")
	}
}
