package stt_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/parley-voice/parley/media/stt"
	"github.com/parley-voice/parley/session/fakes"
)

const dgKey = "dg-test-key"

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// newDeepgramPair starts a DeepgramFake on an OS port and an adapter pointed at it.
func newDeepgramPair(t *testing.T, fo fakes.DeepgramFakeOptions, cfg stt.DeepgramConfig) (*fakes.DeepgramFake, *stt.Deepgram) {
	t.Helper()
	if fo.APIKey == "" {
		fo.APIKey = dgKey
	}
	fake := fakes.NewDeepgramFake(fo)
	srv := httptest.NewServer(fake)
	t.Cleanup(func() { fake.Close(); srv.Close() })
	cfg.BaseURL = srv.URL
	if cfg.APIKey == "" {
		cfg.APIKey = dgKey
	}
	cfg.Logger = quiet
	dg, err := stt.NewDeepgram(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return fake, dg
}

func TestDeepgramEndpointingLatency(t *testing.T) {
	t.Parallel()
	const finalDelay = 100 * time.Millisecond
	const endpointing = 200 * time.Millisecond
	fake, dg := newDeepgramPair(t, fakes.DeepgramFakeOptions{FinalDelay: finalDelay, Script: []string{"book a table for two"}, InterimEvery: 200 * time.Millisecond}, stt.DeepgramConfig{})
	s, err := dg.Open(context.Background(), stt.StreamOptions{Endpointing: endpointing, Interim: true})
	if err != nil {
		t.Fatal(err)
	}
	c := collect(s)
	f := feed(t, s, 16000, true, segment{200 * time.Millisecond, false}, segment{700 * time.Millisecond, true}, segment{500 * time.Millisecond, false})

	eos := c.waitKind(t, stt.EndOfSpeech, 1, 2*time.Second)
	checkEndpointing(t, f, eos, endpointing, finalDelay)
	if eos.Text != "book a table for two" {
		t.Errorf("EndOfSpeech text %q", eos.Text)
	}
	within(t, "utterance start offset", eos.Start, 200*time.Millisecond, 20*time.Millisecond, 20*time.Millisecond)
	within(t, "utterance end offset", eos.End, 900*time.Millisecond, 20*time.Millisecond, 20*time.Millisecond)

	started := c.waitKind(t, stt.SpeechStarted, 1, time.Second)
	within(t, "SpeechStarted offset", started.Start, 200*time.Millisecond, 20*time.Millisecond, 20*time.Millisecond)
	fin := c.waitKind(t, stt.Final, 1, time.Second)
	if !fin.SpeechFinal || fin.Text != "book a table for two" || fin.Confidence <= 0 {
		t.Errorf("final = %+v", fin)
	}
	// Interims grow word by word and come before the final.
	var interims []string
	for _, e := range c.events() {
		if e.Kind == stt.Interim {
			interims = append(interims, e.Text)
		}
		if e.Kind == stt.Final {
			break
		}
	}
	if len(interims) < 2 || !strings.HasPrefix(interims[1], interims[0]) || len(interims[1]) <= len(interims[0]) {
		t.Errorf("interims do not grow: %q", interims)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	c.waitClosed(t, time.Second)
	if st := s.Stats(); st.AudioSent < 1300*time.Millisecond || st.FramesDropped != 0 {
		t.Errorf("stats %+v", st)
	}
	conns := fake.Connections()
	if len(conns) != 1 || conns[0].AudioBytes != 70*640 {
		t.Errorf("fake saw %+v", conns)
	}
}

func TestDeepgramReconnectMidUtterance(t *testing.T) {
	t.Parallel()
	fake, dg := newDeepgramPair(t, fakes.DeepgramFakeOptions{Script: []string{"first line", "second line"}}, stt.DeepgramConfig{RetryBackoff: 20 * time.Millisecond})
	fake.ArmDrop()
	s, err := dg.Open(context.Background(), stt.StreamOptions{Endpointing: 150 * time.Millisecond, Interim: true})
	if err != nil {
		t.Fatal(err)
	}
	c := collect(s)
	feed(t, s, 16000, true, segment{100 * time.Millisecond, false}, segment{800 * time.Millisecond, true}, segment{400 * time.Millisecond, false})

	rc := c.waitKind(t, stt.Reconnected, 1, 2*time.Second)
	if rc.Err == nil {
		t.Error("Reconnected without its cause")
	}
	eos := c.waitKind(t, stt.EndOfSpeech, 1, 2*time.Second)
	// The new connection heard the rest of the utterance: its offsets are on the engine's
	// timeline (after the drop at ~300 ms), not the new socket's.
	if eos.Text != "first line" {
		t.Errorf("after reconnect got %q", eos.Text)
	}
	if eos.Start < 250*time.Millisecond || eos.End < 850*time.Millisecond || eos.End > 950*time.Millisecond {
		t.Errorf("offsets not carried across the reconnect: start %v end %v", eos.Start, eos.End)
	}
	var last time.Duration
	for _, e := range c.events() {
		if e.Kind == stt.Reconnected || e.Kind == stt.Error {
			continue
		}
		if e.Start < last {
			t.Errorf("offsets went backwards: %v after %v%s", e.Start, last, dump(c.events()))
		}
		last = e.Start
	}
	s.Close()
	if got := s.Stats().Reconnects; got != 1 {
		t.Errorf("Reconnects = %d", got)
	}
	conns := fake.Connections()
	if len(conns) != 2 || !conns[0].Dropped || conns[1].Status != http.StatusSwitchingProtocols {
		t.Fatalf("connections: %+v", conns)
	}
}

func TestDeepgramKeepAliveAndCloseStream(t *testing.T) {
	t.Parallel()
	fake, dg := newDeepgramPair(t, fakes.DeepgramFakeOptions{IdleTimeout: 300 * time.Millisecond}, stt.DeepgramConfig{KeepAliveInterval: 60 * time.Millisecond})
	s, err := dg.Open(context.Background(), stt.StreamOptions{})
	if err != nil {
		t.Fatal(err)
	}
	c := collect(s)
	// No audio at all: only KeepAlives keep the socket past the fake's 300 ms idle timeout.
	pollUntil(t, 2*time.Second, "6 KeepAlives", func() bool {
		n := 0
		for _, m := range fake.Connections()[0].Messages {
			if m == "KeepAlive" {
				n++
			}
		}
		return n >= 6
	})
	if cs := fake.Connections(); len(cs) != 1 || !cs[0].Closed.IsZero() {
		t.Fatalf("connection did not survive on KeepAlive: %+v", cs)
	}
	// Audio flowing: no KeepAlive is needed, then Close sends CloseStream.
	feed(t, s, 16000, false, segment{200 * time.Millisecond, false})
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s.Close() // idempotent
	c.waitClosed(t, time.Second)
	pollUntil(t, time.Second, "the fake to close", func() bool { return !fake.Connections()[0].Closed.IsZero() })
	cs := fake.Connections()[0]
	if got := cs.Messages[len(cs.Messages)-1]; got != "CloseStream" {
		t.Errorf("last client message %q, want CloseStream (all: %v)", got, cs.Messages)
	}
	if got := cs.Sent[len(cs.Sent)-1]; got != "Metadata" {
		t.Errorf("fake's last message %q, want Metadata", got)
	}
	if cs.CloseCode != 1000 || c.count(stt.Reconnected) != 0 || c.count(stt.Error) != 0 {
		t.Errorf("close code %d, events %s", cs.CloseCode, dump(c.events()))
	}
	if err := s.Write(make([]int16, 320), false); !errors.Is(err, stt.ErrClosed) {
		t.Errorf("Write after Close = %v", err)
	}
}

func TestDeepgramCloseFlushesUtterance(t *testing.T) {
	t.Parallel()
	_, dg := newDeepgramPair(t, fakes.DeepgramFakeOptions{Script: []string{"cut short"}}, stt.DeepgramConfig{})
	s, err := dg.Open(context.Background(), stt.StreamOptions{Endpointing: 500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	c := collect(s)
	feed(t, s, 16000, false, segment{100 * time.Millisecond, false}, segment{300 * time.Millisecond, true})
	s.Close() // mid-utterance: CloseStream makes the fake finalise
	c.waitClosed(t, time.Second)
	fin := c.waitKind(t, stt.Final, 1, 0)
	eos := c.waitKind(t, stt.EndOfSpeech, 1, 0)
	if fin.Text != "cut short" || fin.SpeechFinal || eos.Text != "cut short" {
		t.Errorf("events %s", dump(c.events()))
	}
}

func TestDeepgramAuthIsNotRetried(t *testing.T) {
	t.Parallel()
	fake, dg := newDeepgramPair(t, fakes.DeepgramFakeOptions{}, stt.DeepgramConfig{APIKey: "wrong", MaxRetries: 3})
	_, err := dg.Open(context.Background(), stt.StreamOptions{})
	if !errors.Is(err, stt.ErrAuth) {
		t.Fatalf("err = %v, want ErrAuth", err)
	}
	var pe *stt.ProviderError
	if !errors.As(err, &pe) || pe.Status != 401 || pe.Code != "INVALID_AUTH" || pe.Temporary() {
		t.Errorf("error %#v", err)
	}
	if n := len(fake.Connections()); n != 1 {
		t.Errorf("%d attempts, want 1", n)
	}
}

func TestDeepgramRetriesServerErrors(t *testing.T) {
	t.Parallel()
	fake, dg := newDeepgramPair(t, fakes.DeepgramFakeOptions{}, stt.DeepgramConfig{MaxRetries: 2, RetryBackoff: 5 * time.Millisecond})
	fake.FailHandshakes(2, 503)
	s, err := dg.Open(context.Background(), stt.StreamOptions{})
	if err != nil {
		t.Fatalf("Open after two 503s: %v", err)
	}
	s.Close()
	cs := fake.Connections()
	if len(cs) != 3 || cs[0].Status != 503 || cs[2].Status != 101 {
		t.Errorf("attempts %+v", cs)
	}

	fake.FailHandshakes(5, 500)
	_, err = dg.Open(context.Background(), stt.StreamOptions{})
	if !errors.Is(err, stt.ErrUnavailable) {
		t.Errorf("err = %v, want ErrUnavailable", err)
	}
}

func TestDeepgramMulaw(t *testing.T) {
	t.Parallel()
	fake, dg := newDeepgramPair(t, fakes.DeepgramFakeOptions{Script: []string{"telephone audio"}}, stt.DeepgramConfig{})
	s, err := dg.Open(context.Background(), stt.StreamOptions{SampleRate: 8000, Encoding: stt.EncodingMulaw, Endpointing: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	c := collect(s)
	feed(t, s, 8000, false, segment{100 * time.Millisecond, false}, segment{400 * time.Millisecond, true}, segment{300 * time.Millisecond, false})
	eos := c.waitKind(t, stt.EndOfSpeech, 1, 2*time.Second)
	if eos.Text != "telephone audio" {
		t.Errorf("got %q", eos.Text)
	}
	within(t, "mulaw utterance end", eos.End, 500*time.Millisecond, 20*time.Millisecond, 20*time.Millisecond)
	s.Close()
	cs := fake.Connections()[0]
	if cs.AudioBytes != 40*160 { // one byte per sample
		t.Errorf("audio bytes %d, want %d", cs.AudioBytes, 40*160)
	}
}

// TestDeepgramConformance checks the request against Deepgram's documented live API: query
// parameters, the Token authorization header, binary audio and the control messages.
func TestDeepgramConformance(t *testing.T) {
	t.Parallel()
	fake, dg := newDeepgramPair(t, fakes.DeepgramFakeOptions{}, stt.DeepgramConfig{Model: "nova-3", SmartFormat: true, Punctuate: true, KeepAliveInterval: 40 * time.Millisecond})
	s, err := dg.Open(context.Background(), stt.StreamOptions{
		Language: "en-US", Endpointing: 300 * time.Millisecond, UtteranceEnd: time.Second, Keywords: []string{"Parley", "booking"},
	})
	if err != nil {
		t.Fatal(err)
	}
	collect(s)
	pollUntil(t, time.Second, "a KeepAlive", func() bool { return len(fake.Connections()[0].Messages) > 0 })
	feed(t, s, 16000, false, segment{100 * time.Millisecond, false})
	s.Close()
	c := fake.Connections()[0]
	want := map[string]string{
		"encoding": "linear16", "sample_rate": "16000", "channels": "1", "model": "nova-3", "language": "en-US",
		"interim_results": "true", "endpointing": "300", "utterance_end_ms": "1000", "vad_events": "true",
		"smart_format": "true", "punctuate": "true",
	}
	for k, v := range want {
		if got := c.Query.Get(k); got != v {
			t.Errorf("query %s = %q, want %q", k, got, v)
		}
	}
	if kt := c.Query["keyterm"]; len(kt) != 2 || kt[0] != "Parley" || kt[1] != "booking" {
		t.Errorf("keyterm = %q", kt)
	}
	if got := c.Header.Get("Authorization"); got != "Token "+dgKey {
		t.Errorf("Authorization = %q", got)
	}
	if c.Messages[0] != "KeepAlive" || c.Messages[len(c.Messages)-1] != "CloseStream" {
		t.Errorf("control messages %v", c.Messages)
	}
	// 100 ms of silence before any speech: one binary message of five 20 ms frames.
	if c.AudioMessages != 1 || c.AudioBytes != 5*640 {
		t.Errorf("audio: %d messages, %d bytes", c.AudioMessages, c.AudioBytes)
	}
}

func TestDeepgramCancelContext(t *testing.T) {
	t.Parallel()
	_, dg := newDeepgramPair(t, fakes.DeepgramFakeOptions{}, stt.DeepgramConfig{})
	ctx, cancel := context.WithCancel(context.Background())
	s, err := dg.Open(ctx, stt.StreamOptions{})
	if err != nil {
		t.Fatal(err)
	}
	c := collect(s)
	cancel()
	c.waitClosed(t, time.Second)
	pollUntil(t, time.Second, "Write to fail", func() bool { return errors.Is(s.Write(make([]int16, 320), true), stt.ErrClosed) })
	s.Close()
}

func TestDeepgramBadOptions(t *testing.T) {
	t.Parallel()
	_, dg := newDeepgramPair(t, fakes.DeepgramFakeOptions{}, stt.DeepgramConfig{})
	for _, o := range []stt.StreamOptions{{Encoding: "opus"}, {SampleRate: 100}, {UtteranceEnd: -1}} {
		if _, err := dg.Open(context.Background(), o); !errors.Is(err, stt.ErrInvalidOptions) {
			t.Errorf("Open(%+v) = %v, want ErrInvalidOptions", o, err)
		}
	}
	if _, err := stt.NewDeepgram(stt.DeepgramConfig{BaseURL: "ftp://x"}); !errors.Is(err, stt.ErrInvalidOptions) {
		t.Errorf("ftp base URL accepted: %v", err)
	}
}

// TestDeepgramWriteAllocs proves the frame path allocates nothing.
func TestDeepgramWriteAllocs(t *testing.T) {
	_, dg := newDeepgramPair(t, fakes.DeepgramFakeOptions{}, stt.DeepgramConfig{})
	s, err := dg.Open(context.Background(), stt.StreamOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	collect(s)
	frame := newBurst(16000).frame(true)
	if n := testing.AllocsPerRun(500, func() { s.Write(frame, true) }); n != 0 {
		t.Errorf("Write allocates %v per frame", n)
	}
}

func BenchmarkDeepgramWrite(b *testing.B) {
	fake := fakes.NewDeepgramFake(fakes.DeepgramFakeOptions{APIKey: dgKey})
	srv := httptest.NewServer(fake)
	defer srv.Close()
	defer fake.Close()
	dg, err := stt.NewDeepgram(stt.DeepgramConfig{BaseURL: srv.URL, APIKey: dgKey, Logger: quiet})
	if err != nil {
		b.Fatal(err)
	}
	s, err := dg.Open(context.Background(), stt.StreamOptions{})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	collect(s)
	frame := newBurst(16000).frame(true)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		s.Write(frame, true)
	}
}

func TestDeepgramReconnectGivesUpOnAuth(t *testing.T) {
	t.Parallel()
	fake, dg := newDeepgramPair(t, fakes.DeepgramFakeOptions{DropAfterSpeech: 60 * time.Millisecond}, stt.DeepgramConfig{})
	s, err := dg.Open(context.Background(), stt.StreamOptions{})
	if err != nil {
		t.Fatal(err)
	}
	c := collect(s)
	o := fake.Options()
	o.APIKey = "rotated" // the key was revoked mid-call
	fake.SetOptions(o)
	fake.ArmDrop()
	b := newBurst(16000)
	for range 10 {
		if err := s.Write(b.frame(true), true); err != nil && !errors.Is(err, stt.ErrClosed) {
			t.Fatal(err) // ErrClosed is fine: the stream may already have given up
		}
	}
	e := c.waitKind(t, stt.Error, 1, 2*time.Second)
	if !errors.Is(e.Err, stt.ErrAuth) {
		t.Errorf("error %v", e.Err)
	}
	c.waitClosed(t, time.Second)
	s.Close()
	if n := len(fake.Connections()); n != 2 {
		t.Errorf("%d connection attempts, want 2 (no retry after 401)", n)
	}
}

func TestDeepgramCloseDuringReconnect(t *testing.T) {
	t.Parallel()
	fake, dg := newDeepgramPair(t, fakes.DeepgramFakeOptions{DropAfterSpeech: 60 * time.Millisecond}, stt.DeepgramConfig{RetryBackoff: 50 * time.Millisecond, ReconnectWindow: time.Minute})
	s, err := dg.Open(context.Background(), stt.StreamOptions{})
	if err != nil {
		t.Fatal(err)
	}
	c := collect(s)
	fake.FailHandshakes(1000, 503)
	fake.ArmDrop()
	feed(t, s, 16000, false, segment{200 * time.Millisecond, true})
	pollUntil(t, 2*time.Second, "reconnect attempts", func() bool { return len(fake.Connections()) >= 3 })
	start := time.Now()
	s.Close()
	if d := time.Since(start); d > 300*time.Millisecond {
		t.Errorf("Close took %v while reconnecting", d)
	}
	c.waitClosed(t, time.Second)
}
