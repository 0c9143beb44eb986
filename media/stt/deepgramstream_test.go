package stt

import (
	"context"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"testing"
	"time"
)

// newMappingStream builds a stream with no connection, to drive handle() directly.
func newMappingStream(t testing.TB) *deepgramStream {
	t.Helper()
	d, err := NewDeepgram(DeepgramConfig{BaseURL: "ws://127.0.0.1:1", Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	o, _ := StreamOptions{}.normalize()
	s := newDeepgramStream(context.Background(), d, o, "")
	t.Cleanup(s.cancel)
	return s
}

func drain(s *deepgramStream) []Event {
	var out []Event
	for {
		select {
		case e := <-s.events:
			out = append(out, e)
		default:
			return out
		}
	}
}

func results(text string, start, dur float64, isFinal, speechFinal bool) string {
	b := func(v bool) string {
		if v {
			return "true"
		}
		return "false"
	}
	return `{"type":"Results","channel_index":[0,1],"start":` + ftoa(start) + `,"duration":` + ftoa(dur) +
		`,"is_final":` + b(isFinal) + `,"speech_final":` + b(speechFinal) +
		`,"channel":{"alternatives":[{"transcript":"` + text + `","confidence":0.9,"words":[]}]},"metadata":{"request_id":"x"}}`
}

func ftoa(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) }

// TestDeepgramMessageMapping is the table of Deepgram server messages → engine events.
func TestDeepgramMessageMapping(t *testing.T) {
	type ev struct {
		kind        EventKind
		text        string
		start, end  time.Duration
		speechFinal bool
	}
	ms := func(n int) time.Duration { return time.Duration(n) * time.Millisecond }
	tests := []struct {
		name string
		msgs []string
		want []ev
	}{
		{"interim then speech_final", []string{
			`{"type":"SpeechStarted","channel":[0],"timestamp":0.5}`,
			results("hello", 0.5, 0.25, false, false),
			results("hello world", 0.5, 0.5, true, true),
		}, []ev{
			{SpeechStarted, "", ms(500), ms(500), false},
			{Interim, "hello", ms(500), ms(750), false},
			{Final, "hello world", ms(500), ms(1000), true},
			{EndOfSpeech, "hello world", ms(500), ms(1000), false},
		}},
		{"finals accumulate until UtteranceEnd", []string{
			results("one", 0, 1, true, false),
			results("two", 1, 1, true, false),
			`{"type":"UtteranceEnd","channel":[0,1],"last_word_end":1.9}`,
		}, []ev{
			{Final, "one", 0, ms(1000), false},
			{Final, "two", ms(1000), ms(2000), false},
			{EndOfSpeech, "one two", 0, ms(2000), false},
		}},
		{"UtteranceEnd after speech_final is not doubled", []string{
			results("yes", 0, 0.4, true, true),
			`{"type":"UtteranceEnd","channel":[0,1],"last_word_end":0.4}`,
		}, []ev{
			{Final, "yes", 0, ms(400), true},
			{EndOfSpeech, "yes", 0, ms(400), false},
		}},
		{"empty results are silence", []string{
			results("", 0, 1, false, false),
			results("", 0, 1, true, true),
			`{"type":"UtteranceEnd","channel":[0,1],"last_word_end":0}`,
		}, nil},
		{"speech_final with empty text closes an utterance heard in interims", []string{
			results("uh", 0, 0.2, false, false),
			results("", 0, 0.3, true, true),
		}, []ev{
			{Interim, "uh", 0, ms(200), false},
			{EndOfSpeech, "", 0, ms(300), false},
		}},
		{"metadata and unknown types are silent", []string{
			`{"type":"Metadata","request_id":"abc","duration":1.0,"channels":1}`,
			`{"type":"SomethingNew"}`,
			`not json`,
			`{"type":"Results","channel":[1,2]}`,
		}, nil},
		{"error message", []string{`{"type":"Error","description":"bad audio","variant":"DATA-0000"}`}, []ev{{Error, "", 0, 0, false}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newMappingStream(t)
			for _, m := range tt.msgs {
				s.handle([]byte(m))
			}
			got := drain(s)
			if len(got) != len(tt.want) {
				t.Fatalf("got %d events %+v, want %d", len(got), got, len(tt.want))
			}
			for i, w := range tt.want {
				g := got[i]
				if g.Kind != w.kind || g.Text != w.text || g.SpeechFinal != w.speechFinal {
					t.Errorf("event %d = %v %q sf=%v, want %v %q sf=%v", i, g.Kind, g.Text, g.SpeechFinal, w.kind, w.text, w.speechFinal)
				}
				if w.kind != Error && (g.Start != w.start || g.End != w.end) {
					t.Errorf("event %d offsets [%v,%v], want [%v,%v]", i, g.Start, g.End, w.start, w.end)
				}
				if g.At.IsZero() {
					t.Errorf("event %d has no timestamp", i)
				}
			}
		})
	}
}

// TestDeepgramOffsetsAfterReconnect: results on a new connection are mapped onto the engine's
// timeline through the offset map the sender fills.
func TestDeepgramOffsetsAfterReconnect(t *testing.T) {
	s := newMappingStream(t)
	// Second connection: its first frame was engine sample 48000 (3 s); 0.5 s was dropped
	// from the queue after conn sample 16000.
	s.omap.add(0, 48000)
	s.omap.add(16000, 72000)
	s.handle([]byte(results("later", 0.5, 1.0, true, true)))
	evs := drain(s)
	if len(evs) != 2 || evs[0].Start != 3500*time.Millisecond || evs[0].End != 5000*time.Millisecond {
		t.Fatalf("events %+v", evs)
	}
}

func FuzzDeepgramMessage(f *testing.F) {
	f.Add([]byte(results("hi", 0, 1, true, true)))
	f.Add([]byte(`{"type":"UtteranceEnd","channel":[0,1],"last_word_end":1e308}`))
	f.Add([]byte(`{"type":"SpeechStarted","timestamp":-1}`))
	f.Add([]byte(`{"type":"Results","start":"x"}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		s := newMappingStream(t)
		s.handle(data)
		for _, e := range drain(s) {
			if e.Start < 0 || e.End < 0 {
				t.Fatalf("negative offset in %+v", e)
			}
		}
	})
}

func TestListenURLEndpointingOff(t *testing.T) {
	d, err := NewDeepgram(DeepgramConfig{BaseURL: "https://dg.example/base/", Model: "nova-2", ExtraParams: map[string][]string{"filler_words": {"true"}}})
	if err != nil {
		t.Fatal(err)
	}
	u, err := d.ListenURL(StreamOptions{Endpointing: -1, Keywords: []string{"alpha"}, SampleRate: 8000, Encoding: EncodingMulaw})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"wss://dg.example/base/v1/listen?", "endpointing=false", "keywords=alpha", "encoding=mulaw", "sample_rate=8000", "filler_words=true", "interim_results=false"} {
		if !strings.Contains(u, want) {
			t.Errorf("%s lacks %q", u, want)
		}
	}
	if strings.Contains(u, "utterance_end_ms") || strings.Contains(u, "keyterm") {
		t.Errorf("unexpected params in %s", u)
	}
}
