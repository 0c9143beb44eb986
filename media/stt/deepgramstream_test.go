package stt

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"
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

// dgSink is a minimal local server speaking Deepgram's live protocol: it upgrades /v1/listen,
// records every binary (audio) message and the type of every text message, and answers
// CloseStream with Metadata and a normal close, as the vendor does.
type dgSink struct {
	srv  *httptest.Server
	up   websocket.Upgrader
	wg   sync.WaitGroup
	mu   sync.Mutex
	live map[*websocket.Conn]struct{}
	msgs []dgSinkMsg
	text []string
}

// dgSinkMsg is one audio message as received.
type dgSinkMsg struct {
	bytes int
	first int16 // the first sample (linear16 only): the test frames carry their index
}

func newDGSink(t testing.TB) *dgSink {
	k := &dgSink{live: map[*websocket.Conn]struct{}{}}
	k.srv = httptest.NewServer(http.HandlerFunc(k.serve))
	t.Cleanup(func() {
		k.mu.Lock()
		for c := range k.live {
			c.Close()
		}
		k.mu.Unlock()
		k.wg.Wait()
		k.srv.Close()
	})
	return k
}

func (k *dgSink) serve(w http.ResponseWriter, r *http.Request) {
	k.wg.Add(1)
	defer k.wg.Done()
	c, err := k.up.Upgrade(w, r, nil)
	if err != nil {
		return
	}
	k.mu.Lock()
	k.live[c] = struct{}{}
	k.mu.Unlock()
	defer func() {
		k.mu.Lock()
		delete(k.live, c)
		k.mu.Unlock()
		c.Close()
	}()
	for {
		mt, data, err := c.ReadMessage()
		if err != nil {
			return
		}
		if mt == websocket.BinaryMessage {
			m := dgSinkMsg{bytes: len(data)}
			if len(data) >= 2 {
				m.first = int16(uint16(data[0]) | uint16(data[1])<<8)
			}
			k.mu.Lock()
			k.msgs = append(k.msgs, m)
			k.mu.Unlock()
			continue
		}
		var v struct{ Type string }
		json.Unmarshal(data, &v)
		k.mu.Lock()
		k.text = append(k.text, v.Type)
		k.mu.Unlock()
		if v.Type == "CloseStream" {
			c.WriteMessage(websocket.TextMessage, []byte(`{"type":"Metadata","request_id":"sink"}`))
			c.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, ""), time.Now().Add(time.Second))
			return
		}
	}
}

func (k *dgSink) audio() []dgSinkMsg {
	k.mu.Lock()
	defer k.mu.Unlock()
	return append([]dgSinkMsg(nil), k.msgs...)
}

func (k *dgSink) texts() []string {
	k.mu.Lock()
	defer k.mu.Unlock()
	return append([]string(nil), k.text...)
}

// waitAudio polls until the sink holds at least n audio messages.
func (k *dgSink) waitAudio(t testing.TB, n int, timeout time.Duration) []dgSinkMsg {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		m := k.audio()
		if len(m) >= n {
			return m
		}
		if time.Now().After(deadline) {
			t.Fatalf("sink has %d audio messages %s after %v, want %d", len(m), sizes(m), timeout, n)
		}
		time.Sleep(2 * time.Millisecond) // polling interval, bounded by the deadline above
	}
}

// sizes renders message sizes compactly: "3200×10 640×75 ...".
func sizes(m []dgSinkMsg) string {
	var b strings.Builder
	for i := 0; i < len(m); {
		j := i
		for j < len(m) && m[j].bytes == m[i].bytes {
			j++
		}
		fmt.Fprintf(&b, " %d×%d", m[i].bytes, j-i)
		i = j
	}
	return b.String()
}

// openSinkStream opens a stream on k the way Open does, but with the partial-batch wait set to
// maxWait before the stream's goroutine starts.
func openSinkStream(t testing.TB, k *dgSink, o StreamOptions, cfg DeepgramConfig, maxWait time.Duration) *deepgramStream {
	t.Helper()
	cfg.BaseURL = k.srv.URL
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	d, err := NewDeepgram(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if o, err = o.normalize(); err != nil {
		t.Fatal(err)
	}
	u := d.listenURL(o)
	conn, err := d.dial(context.Background(), u)
	if err != nil {
		t.Fatal(err)
	}
	s := newDeepgramStream(context.Background(), d, o, u)
	s.maxWait = maxWait
	go s.run(conn)
	t.Cleanup(func() { s.Close() })
	go func() { // keep Events drained
		for range s.Events() {
		}
	}()
	return s
}

// writeFrames writes frames from..to-1 (each 20 ms, samples equal to the frame index).
func writeFrames(t testing.TB, s *deepgramStream, from, to int, voiced bool) {
	t.Helper()
	n := s.opts.SampleRate / 50
	for i := from; i < to; i++ {
		if err := s.Write(ringFrame(i, n), voiced); err != nil {
			t.Fatal(err)
		}
	}
}

// TestDeepgramBatchingOnTheWire drives a whole turn through a real WebSocket and checks every
// message the server receives: 100 ms messages before speech, during speech and in long
// silence; one 20 ms message per frame in the tail after speech; nothing lost or reordered.
func TestDeepgramBatchingOnTheWire(t *testing.T) {
	for _, tc := range []struct {
		name     string
		o        StreamOptions
		frameLen int // bytes per 20 ms frame on the wire
	}{
		{"linear16 16kHz", StreamOptions{}, 640},
		{"mulaw 8kHz", StreamOptions{SampleRate: 8000, Encoding: EncodingMulaw}, 160},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			k := newDGSink(t)
			// A wait longer than the test: only due messages and Close send audio.
			s := openSinkStream(t, k, tc.o, DeepgramConfig{QueueFrames: 1000}, time.Hour)
			// 1 s before speech, 2.04 s of speech, 3 s of silence (1.5 s of it the tail), 60 ms more.
			writeFrames(t, s, 0, 50, false)
			writeFrames(t, s, 50, 152, true)
			writeFrames(t, s, 152, 305, false)
			s.Close()

			type want struct{ bytes, first, count int }
			b := 5 * tc.frameLen
			plan := []want{
				{b, 0, 10},                // silence before speech: 10 × 100 ms
				{b, 50, 20},               // speech: 20 × 100 ms
				{2 * tc.frameLen, 150, 1}, // the last 40 ms of speech, sent when the tail starts
				{tc.frameLen, 152, 75},    // the 1.5 s tail: every frame alone
				{b, 227, 15},              // long silence: 100 ms again
				{3 * tc.frameLen, 302, 1}, // a partial batch, flushed by Close
			}
			got := k.audio()
			i, total := 0, 0
			for _, w := range plan {
				for j := range w.count {
					if i >= len(got) {
						t.Fatalf("only %d messages:%s", len(got), sizes(got))
					}
					m := got[i]
					first := w.first + j*w.bytes/tc.frameLen
					if m.bytes != w.bytes || (tc.o.Encoding == "" && int(m.first) != first) {
						t.Fatalf("message %d: %d bytes from frame %d, want %d bytes from frame %d; all:%s", i, m.bytes, m.first, w.bytes, first, sizes(got))
					}
					total += m.bytes
					i++
				}
			}
			if i != len(got) {
				t.Fatalf("%d messages, want %d:%s", len(got), i, sizes(got))
			}
			if total != 305*tc.frameLen {
				t.Errorf("received %d audio bytes, wrote %d", total, 305*tc.frameLen)
			}
			if st := s.Stats(); st.AudioSent != 305*20*time.Millisecond || st.FramesDropped != 0 {
				t.Errorf("stats %+v", st)
			}
			if txt := k.texts(); len(txt) != 1 || txt[0] != "CloseStream" {
				t.Errorf("text messages %v", txt)
			}
		})
	}
}

// TestDeepgramTailFramesLeaveAtOnce: a silent frame right after speech is sent without waiting
// for more frames (the batch wait is an hour here), together with the partial batch of speech
// queued before it, which goes first as one message.
func TestDeepgramTailFramesLeaveAtOnce(t *testing.T) {
	t.Parallel()
	k := newDGSink(t)
	s := openSinkStream(t, k, StreamOptions{}, DeepgramConfig{}, time.Hour)
	writeFrames(t, s, 0, 5, true)
	writeFrames(t, s, 5, 6, false)
	got := k.waitAudio(t, 2, 2*time.Second)
	writeFrames(t, s, 6, 8, true)
	writeFrames(t, s, 8, 9, false)
	got = k.waitAudio(t, 4, 2*time.Second)
	want := []dgSinkMsg{{3200, 0}, {640, 5}, {1280, 6}, {640, 8}}
	if len(got) != len(want) {
		t.Fatalf("messages:%s", sizes(got))
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("message %d = %+v, want %+v (all %+v)", i, got[i], want[i], got)
		}
	}
}

// TestDeepgramCloseFlushesPartialBatch: audio that never made a full batch still reaches the
// provider before CloseStream.
func TestDeepgramCloseFlushesPartialBatch(t *testing.T) {
	t.Parallel()
	k := newDGSink(t)
	s := openSinkStream(t, k, StreamOptions{}, DeepgramConfig{}, time.Hour)
	writeFrames(t, s, 0, 3, false)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if got := k.audio(); len(got) != 1 || got[0] != (dgSinkMsg{3 * 640, 0}) {
		t.Errorf("audio messages %+v, want one of 3 frames", got)
	}
	if txt := k.texts(); len(txt) != 1 || txt[0] != "CloseStream" {
		t.Errorf("text messages %v", txt)
	}
	if st := s.Stats(); st.AudioSent != 60*time.Millisecond {
		t.Errorf("stats %+v", st)
	}
}

// TestDeepgramStalledPartialBatchIsSent: when Write stops mid-batch, the queued frames still go
// out (after dgBatchMaxWait), both while the sender was busy and after it went idle.
func TestDeepgramStalledPartialBatchIsSent(t *testing.T) {
	t.Parallel()
	k := newDGSink(t)
	s := openSinkStream(t, k, StreamOptions{}, DeepgramConfig{}, dgBatchMaxWait)
	writeFrames(t, s, 0, 7, true) // a batch, then 2 frames and Write stops
	got := k.waitAudio(t, 2, 5*time.Second)
	writeFrames(t, s, 7, 9, true) // the sender went idle after flushing: wake it again
	got = k.waitAudio(t, 3, 5*time.Second)
	want := []dgSinkMsg{{3200, 0}, {1280, 5}, {1280, 7}}
	if len(got) != len(want) {
		t.Fatalf("messages:%s", sizes(got))
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("message %d = %+v, want %+v (all %+v)", i, got[i], want[i], got)
		}
	}
	if len(k.texts()) != 0 {
		t.Errorf("text messages %v before Close", k.texts())
	}
}

// TestDeepgramBatchAfterGapKeepsOffsets: frames dropped by the full queue out of a partial
// batch leave a gap on the engine timeline. The next message starts after the gap, the offset
// map gets a point at that message's first connection sample, and result timestamps land on
// the engine's timeline.
func TestDeepgramBatchAfterGapKeepsOffsets(t *testing.T) {
	k := newDGSink(t)
	d, err := NewDeepgram(DeepgramConfig{BaseURL: k.srv.URL, QueueFrames: 8, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	o, _ := StreamOptions{}.normalize()
	conn, err := d.dial(context.Background(), d.listenURL(o))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	s := newDeepgramStream(context.Background(), d, o, "") // no goroutine: this test is the sender
	defer s.cancel()

	writeFrames(t, s, 0, 5, true)
	if err := s.flush(conn, false); err != nil { // frames 0..4: conn samples 0..1600
		t.Fatal(err)
	}
	writeFrames(t, s, 5, 8, true)                // a partial batch...
	writeFrames(t, s, 8, 18, true)               // ...lost with frames 8 and 9 to the full queue (8 slots)
	if err := s.flush(conn, false); err != nil { // frames 10..14
		t.Fatal(err)
	}
	if err := s.flush(conn, true); err != nil { // frames 15..17
		t.Fatal(err)
	}
	got := k.waitAudio(t, 3, 2*time.Second)
	want := []dgSinkMsg{{3200, 0}, {3200, 10}, {3 * 640, 15}}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] || got[2] != want[2] {
		t.Fatalf("messages %+v, want %+v", got, want)
	}
	if st := s.Stats(); st.FramesDropped != 5 || st.AudioSent != 13*20*time.Millisecond {
		t.Errorf("stats %+v", st)
	}
	for _, tt := range []struct{ conn, engine int64 }{{0, 0}, {1599, 1599}, {1600, 3200}, {3200, 4800}, {4159, 5759}} {
		if e := s.omap.engineAt(tt.conn); e != tt.engine {
			t.Errorf("connection sample %d maps to engine sample %d, want %d", tt.conn, e, tt.engine)
		}
	}
	// Words heard at 0.05-0.25 s on the connection straddle the gap: they started in frame 2
	// and ended in frame 17 (engine 5600 = 350 ms).
	s.handle([]byte(results("straddle", 0.05, 0.2, true, false)))
	s.handle([]byte(results("after", 0.1, 0.15, true, true)))
	evs := drain(s)
	if len(evs) != 3 || evs[0].Start != 50*time.Millisecond || evs[0].End != 350*time.Millisecond ||
		evs[1].Start != 200*time.Millisecond || evs[1].End != 350*time.Millisecond {
		t.Errorf("events %s", dumpEvents(evs))
	}
}

func dumpEvents(evs []Event) string {
	var b strings.Builder
	for _, e := range evs {
		fmt.Fprintf(&b, "\n  %v %q [%v,%v]", e.Kind, e.Text, e.Start, e.End)
	}
	return b.String()
}

// rawSink accepts WebSocket upgrades and discards everything the client sends without parsing
// it (no allocation per message on the server side), so a benchmark measures the client.
func rawSink(tb testing.TB) (url string, received func() int64) {
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []*websocket.Conn
	var n int64
	up := websocket.Upgrader{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		wg.Add(1)
		defer wg.Done()
		c, err := up.Upgrade(w, r, nil)
		if err != nil {
			return
		}
		mu.Lock()
		conns = append(conns, c)
		mu.Unlock()
		buf := make([]byte, 64<<10)
		for {
			k, err := c.NetConn().Read(buf)
			mu.Lock()
			n += int64(k)
			mu.Unlock()
			if err != nil {
				return
			}
		}
	}))
	tb.Cleanup(func() {
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
		srv.Close()
	})
	return srv.URL, func() int64 { mu.Lock(); defer mu.Unlock(); return n }
}

// turnVoiced is the benchmarks' caller: 2 s of speech then 3 s of silence, over and over.
func turnVoiced(frame int) bool { return frame%250 < 100 }

// BenchmarkDeepgramWriteFlush pushes 20 ms frames (2 s speech, 3 s silence, repeated) through
// Write and the sender's flush to a real WebSocket on loopback, on one goroutine: one op is one
// frame. "per-frame" is the policy before batching (every frame due at once, alone).
func BenchmarkDeepgramWriteFlush(b *testing.B) {
	for _, bc := range []struct {
		name    string
		batched bool
	}{{"batched", true}, {"per-frame", false}} {
		b.Run(bc.name, func(b *testing.B) {
			u, _ := rawSink(b)
			d, err := NewDeepgram(DeepgramConfig{BaseURL: u, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
			if err != nil {
				b.Fatal(err)
			}
			o, _ := StreamOptions{}.normalize()
			conn, err := d.dial(context.Background(), d.listenURL(o))
			if err != nil {
				b.Fatal(err)
			}
			defer conn.Close()
			s := newDeepgramStream(context.Background(), d, o, "")
			defer s.cancel()
			if !bc.batched {
				s.ring = newFrameRing(d.cfg.QueueFrames, 320, 320, 0)
			}
			frames := [2][]int16{newTestTone(320, false), newTestTone(320, true)}
			before := s.samplesSent.Load()
			msgs := 0
			i := 0
			b.ReportAllocs()
			for b.Loop() {
				v := turnVoiced(i)
				i++
				s.Write(frames[b2i(v)], v)
				select {
				case <-s.ready:
					for s.ring.take(&s.batch, false) {
						if err := s.send(conn, &s.batch); err != nil {
							b.Fatal(err)
						}
						msgs++
					}
				default:
				}
			}
			b.StopTimer()
			if err := s.flush(conn, true); err != nil {
				b.Fatal(err)
			}
			if got := s.samplesSent.Load() - before; got != int64(i)*320 {
				b.Fatalf("sent %d samples, wrote %d", got, i*320)
			}
			b.ReportMetric(float64(msgs)/float64(i), "msgs/frame")
		})
	}
}

// BenchmarkDeepgramWriteEncode is the adapter's own share of BenchmarkDeepgramWriteFlush:
// Write, the ring and the encoding into the write buffer, without the socket. 0 allocs/op.
func BenchmarkDeepgramWriteEncode(b *testing.B) {
	s := newMappingStream(b)
	frames := [2][]int16{newTestTone(320, false), newTestTone(320, true)}
	i, n := 0, 0
	b.ReportAllocs()
	for b.Loop() {
		v := turnVoiced(i)
		i++
		s.Write(frames[b2i(v)], v)
		select {
		case <-s.ready:
			for s.ring.take(&s.batch, false) {
				n += len(s.encode(&s.batch))
			}
		default:
		}
	}
}

// TestDeepgramWriteSendAllocs: a whole turn (speech, the tail's frames one by one, long
// silence) through Write, the ring, the encoding and the WebSocket write on a live loopback
// connection allocates nothing, batched and per frame.
func TestDeepgramWriteSendAllocs(t *testing.T) {
	for _, batched := range []bool{true, false} {
		u, _ := rawSink(t)
		d, err := NewDeepgram(DeepgramConfig{BaseURL: u, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
		if err != nil {
			t.Fatal(err)
		}
		o, _ := StreamOptions{}.normalize()
		conn, err := d.dial(context.Background(), d.listenURL(o))
		if err != nil {
			t.Fatal(err)
		}
		s := newDeepgramStream(context.Background(), d, o, "")
		if !batched {
			s.ring = newFrameRing(d.cfg.QueueFrames, 320, 320, 0)
		}
		frames := [2][]int16{newTestTone(320, false), newTestTone(320, true)}
		i, msgs := 0, 0
		step := func() {
			v := turnVoiced(i)
			i++
			s.Write(frames[b2i(v)], v)
			for s.ring.take(&s.batch, false) {
				if err := s.send(conn, &s.batch); err != nil {
					t.Fatal(err)
				}
				msgs++
			}
		}
		for range 250 { // a whole turn first: the ring's slots grow to what a turn needs
			step()
		}
		// One run of 500 frames, so that an allocation per message (less than one a frame when
		// batched) is not rounded away.
		if n := testing.AllocsPerRun(1, func() {
			for range 500 {
				step()
			}
		}); n != 0 {
			t.Errorf("batched=%v: %v allocs in 500 frames", batched, n)
		}
		if msgs == 0 {
			t.Errorf("batched=%v: no message sent", batched)
		}
		s.cancel()
		conn.Close()
	}
}

// TestDeepgramWriteEncodeAllocs: a whole turn (speech, tail, long silence) through Write, the
// ring and the encoding allocates nothing.
func TestDeepgramWriteEncodeAllocs(t *testing.T) {
	s := newMappingStream(t)
	frames := [2][]int16{newTestTone(320, false), newTestTone(320, true)}
	i := 0
	if n := testing.AllocsPerRun(500, func() {
		v := turnVoiced(i)
		i++
		s.Write(frames[b2i(v)], v)
		for s.ring.take(&s.batch, false) {
			s.encode(&s.batch)
		}
	}); n != 0 {
		t.Errorf("%v allocs per frame", n)
	}
}

func b2i(v bool) int {
	if v {
		return 1
	}
	return 0
}

// newTestTone returns a frame of n samples: a loud square wave when voiced, else near silence.
func newTestTone(n int, voiced bool) []int16 {
	f := make([]int16, n)
	for i := range f {
		switch {
		case voiced && i%32 < 16:
			f[i] = 8000
		case voiced:
			f[i] = -8000
		default:
			f[i] = int16(i%3 - 1)
		}
	}
	return f
}
