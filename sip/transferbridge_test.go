package sip

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync"
	"testing"

	"github.com/parley-voice/parley/codec"
	"github.com/parley-voice/parley/media"
	"github.com/parley-voice/parley/media/mediatest"
	"github.com/parley-voice/parley/media/stt"
	"github.com/parley-voice/parley/media/tts"
	"github.com/parley-voice/parley/session"
	"github.com/parley-voice/parley/session/llm"
)

// nullRecognizer opens streams that drop audio; their Events close when the Open context ends
// (as a real recognizer's do).
type nullRecognizer struct{}

type nullSTTStream struct {
	ev   chan stt.Event
	once sync.Once
}

func (nullRecognizer) Open(ctx context.Context, o stt.StreamOptions) (stt.Stream, error) {
	s := &nullSTTStream{ev: make(chan stt.Event)}
	context.AfterFunc(ctx, s.end)
	return s, nil
}

func (s *nullSTTStream) end()                                 { s.once.Do(func() { close(s.ev) }) }
func (s *nullSTTStream) Write(pcm []int16, voiced bool) error { return nil }
func (s *nullSTTStream) Events() <-chan stt.Event             { return s.ev }
func (s *nullSTTStream) Close() error                         { s.end(); return nil }
func (s *nullSTTStream) Stats() stt.Stats                     { return stt.Stats{} }

type nullLLM struct{}

func (nullLLM) Stream(context.Context, llm.Request) (llm.Stream, error) {
	return nil, errors.New("no LLM in this benchmark")
}

type nullTTS struct{}

func (nullTTS) Synthesize(context.Context, tts.Request) (tts.Stream, error) { return nil, io.EOF }

// BenchmarkWarmBridge is the per-frame cost of a warm transfer bridged through the takeover,
// each direction: a caller frame to the conversation (VAD, recognizer) and to the human's leg
// (encode, RTP write); a human frame to the takeover (VAD, recognizer, the engine's pacer, which
// plays it to the caller's leg through SendFrame). Neither may allocate.
func BenchmarkWarmBridge(b *testing.B) {
	ml, lpeer := testLeg(b, neg(codec.PCMU, 20))
	mh, hpeer := testLeg(b, neg(codec.PCMU, 20))
	go io.Copy(io.Discard, lpeer)
	go io.Copy(io.Discard, hpeer)
	c := &Call{}
	c.primary.Store(&leg{med: ml})
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	conv, err := session.New(session.Options{ID: "bench", Agent: session.Agent{SystemPrompt: "x"},
		LLM: nullLLM{}, STT: nullRecognizer{}, TTS: nullTTS{}, Log: log})
	if err != nil {
		b.Fatal(err)
	}
	if err := conv.StartVoice(context.Background(), c); err != nil {
		b.Fatal(err)
	}
	defer conv.End(session.EndCompleted)
	tk, err := conv.StartTakeover()
	if err != nil {
		b.Fatal(err)
	}
	fromCaller, fromHuman := c.bridgeSinks(conv, tk, &leg{med: mh})
	var f media.Frame
	f.SetPCM(media.PipelineRate, mediatest.Sine(320, media.PipelineRate, 700, -12))
	fromCaller(&f)
	fromHuman(&f)
	b.Run("caller", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			fromCaller(&f)
		}
	})
	b.Run("human", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			fromHuman(&f)
		}
	})
}
