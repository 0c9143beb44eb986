package bench

import (
	"sort"
	"strings"
	"time"
)

// TurnRecord is one caller turn joined with the conversation's own metrics of it. All
// durations are in milliseconds; the API-side ones are NaN-free and only meaningful when
// Matched is set.
type TurnRecord struct {
	From  string `json:"from"`
	Turn  int    `json:"turn"`
	Kind  string `json:"kind"`
	Match bool   `json:"matched"`
	// Latency is the caller's measure (end of its speech to the first agent audio heard);
	// ShareEar is Latency minus the configured outside latencies.
	Latency  float64 `json:"latency_ms"`
	ShareEar float64 `json:"share_ear_ms"`
	// From the conversation's turn metrics: Parley's share as the engine computes it, the whole
	// engine span (its speech end to its first audio out), and each outside component.
	ShareEngine   float64 `json:"share_engine_ms"`
	EngineTotal   float64 `json:"engine_total_ms"`
	Endpointing   float64 `json:"endpointing_ms"`
	LLMFirstToken float64 `json:"llm_first_token_ms"`
	LLMFirstChunk float64 `json:"llm_first_chunk_ms"`
	TTSFirstByte  float64 `json:"tts_first_byte_ms"`
	// Ingress is the engine's speech end minus the caller's (wall clocks of the same machine):
	// network, jitter buffer and VAD. Egress is the caller's first heard audio minus the
	// engine's first audio out: pacing, encoding and network.
	Ingress float64 `json:"ingress_ms"`
	Egress  float64 `json:"egress_ms"`
}

// matchWindow is how far apart the caller's and the engine's speech ends may be for a turn
// to match.
const matchWindow = 1500 * time.Millisecond

// JoinTurns pairs every turn the callers measured with the conversation's metrics of it
// (conversations by call: From for SIP, the conversation id for WebRTC). A caller turn matches
// the API turn whose speech end is nearest its own, within 1.5 s.
func JoinTurns(calls []CallResult, convs map[string]Conversation, lat Latencies) []TurnRecord {
	var out []TurnRecord
	outside := Ms(lat.Outside())
	for _, c := range calls {
		cv, ok := convs[convKey(c)]
		for _, tu := range c.Script.Turns {
			r := TurnRecord{From: c.From, Turn: tu.Index, Kind: c.Kind, Latency: Ms(tu.Latency), ShareEar: Ms(tu.Latency) - outside}
			if ok {
				if at := nearestTurn(cv.Turns, tu.SpeechEnd); at != nil {
					fillFromAPI(&r, *at, tu)
				}
			}
			out = append(out, r)
		}
	}
	return out
}

func convKey(c CallResult) string {
	if c.Kind == KindWebRTC {
		return c.ConversationID
	}
	return c.From
}

func nearestTurn(turns []APITurn, speechEnd time.Time) *APITurn {
	var best *APITurn
	bestD := matchWindow + 1
	for i := range turns {
		t := &turns[i]
		if t.SpeechEnd == nil || t.FirstAudioOut == nil {
			continue
		}
		d := t.SpeechEnd.Sub(speechEnd)
		if d < 0 {
			d = -d
		}
		if d <= matchWindow && d < bestD {
			best, bestD = t, d
		}
	}
	return best
}

func fillFromAPI(r *TurnRecord, at APITurn, tu TurnTiming) {
	r.Match = true
	if at.LatencyMS.ParleyShare != nil {
		r.ShareEngine = *at.LatencyMS.ParleyShare
	}
	ms := func(a, b *time.Time) float64 {
		d, _ := Span(a, b)
		return Ms(d)
	}
	r.EngineTotal = ms(at.SpeechEnd, at.FirstAudioOut)
	r.Endpointing = ms(at.SpeechEnd, at.EndOfTurn)
	r.LLMFirstToken = ms(at.LLMRequestSent, at.LLMFirstToken)
	chunk := at.LLMFirstChunk
	if chunk == nil {
		chunk = at.LLMFirstToken
	}
	r.LLMFirstChunk = ms(at.LLMRequestSent, chunk)
	r.TTSFirstByte = ms(at.TTSFirstRequest, at.TTSFirstByte)
	r.Ingress = Ms(at.SpeechEnd.Sub(tu.SpeechEnd))
	r.Egress = Ms(tu.Heard.Sub(*at.FirstAudioOut))
}

// CrossCheck compares what the callers heard with what the conversations reported, component
// by component, against the configured latencies.
type CrossCheck struct {
	Turns   int `json:"turns"`
	Matched int `json:"matched"`
	// Measured components (from the API) next to their configured value, in ms.
	Endpointing   Component `json:"endpointing"`
	LLMFirstToken Component `json:"llm_first_token"`
	LLMFirstChunk Component `json:"llm_first_chunk"`
	TTSFirstByte  Component `json:"tts_first_byte"`
	// Transport legs and Parley's share by both measures.
	Ingress     Summary `json:"ingress"`
	Egress      Summary `json:"egress"`
	EngineTotal Summary `json:"engine_total"`
	ShareEar    Summary `json:"share_ear"`
	ShareEngine Summary `json:"share_engine"`
	// Notes name components whose median strays from the configuration by more than 20 ms
	// (the subtraction of configured latencies is then off by that much).
	Notes []string `json:"notes,omitempty"`
}

// Component is one configured latency and what was measured of it.
type Component struct {
	ConfiguredMS float64 `json:"configured_ms"`
	Measured     Summary `json:"measured"`
}

// Check builds the cross-check of turns.
func Check(turns []TurnRecord, lat Latencies) CrossCheck {
	cc := CrossCheck{Turns: len(turns)}
	var ep, ft, fc, tb, in, eg, et, se, sn []float64
	for _, t := range turns {
		se = append(se, t.ShareEar)
		if !t.Match {
			continue
		}
		cc.Matched++
		ep, ft, fc, tb = append(ep, t.Endpointing), append(ft, t.LLMFirstToken), append(fc, t.LLMFirstChunk), append(tb, t.TTSFirstByte)
		in, eg, et, sn = append(in, t.Ingress), append(eg, t.Egress), append(et, t.EngineTotal), append(sn, t.ShareEngine)
	}
	cc.Endpointing = Component{Ms(lat.Endpointing + lat.STTFinalDelay), Summarize(ep)}
	cc.LLMFirstToken = Component{Ms(lat.LLMFirstToken), Summarize(ft)}
	cc.LLMFirstChunk = Component{Ms(lat.LLMFirstChunk()), Summarize(fc)}
	cc.TTSFirstByte = Component{Ms(lat.TTSFirstByte), Summarize(tb)}
	cc.Ingress, cc.Egress, cc.EngineTotal = Summarize(in), Summarize(eg), Summarize(et)
	cc.ShareEar, cc.ShareEngine = Summarize(se), Summarize(sn)
	for _, c := range []struct {
		name string
		c    Component
	}{{"endpointing (+STT final delay)", cc.Endpointing}, {"LLM first token", cc.LLMFirstToken},
		{"LLM first chunk", cc.LLMFirstChunk}, {"TTS first byte", cc.TTSFirstByte}} {
		if c.c.Measured.N > 0 && (c.c.Measured.P50-c.c.ConfiguredMS > 20 || c.c.Measured.P50-c.c.ConfiguredMS < -20) {
			cc.Notes = append(cc.Notes, c.name+": measured p50 "+fmtMs(c.c.Measured.P50)+" against "+fmtMs(c.c.ConfiguredMS)+" configured")
		}
	}
	if cc.Turns > 0 && cc.Matched < cc.Turns {
		cc.Notes = append(cc.Notes, fmtInt(cc.Turns-cc.Matched)+" of "+fmtInt(cc.Turns)+" turns had no matching metrics in the API")
	}
	return cc
}

// Reasons counts failed calls by reason, and keeps a few full stories.
func Reasons(calls []CallResult) (map[string]int, []string) {
	counts := map[string]int{}
	var samples []string
	seen := map[string]int{}
	for _, c := range calls {
		if !c.Failed() {
			continue
		}
		counts[c.Reason]++
		if seen[c.Reason] < 2 && len(samples) < 8 {
			seen[c.Reason]++
			samples = append(samples, c.From+": "+c.Failure)
		}
	}
	return counts, samples
}

// sortedKeys returns m's keys in order.
func sortedKeys(m map[string]int) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

func fmtReasons(m map[string]int) string {
	var parts []string
	for _, k := range sortedKeys(m) {
		parts = append(parts, k+" ×"+fmtInt(m[k]))
	}
	return strings.Join(parts, ", ")
}
