package session

import (
	"context"
	"errors"
	"io"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/parley-voice/parley/media"
	"github.com/parley-voice/parley/media/tts"
)

type uttKind string

const (
	uttResponse uttKind = "response"
	uttGreeting uttKind = "greeting"
	uttReprompt uttKind = "reprompt"
	uttApology  uttKind = "apology"
	uttSay      uttKind = "say"
	uttFiller   uttKind = "filler"
)

// utterance is one stretch of agent speech: a reply, a greeting, a said line.
type utterance struct {
	id      int
	kind    uttKind
	gen     int
	turn    int
	cmd     *pendingCommand
	text    strings.Builder
	chunker *chunker
	chunks  int

	complete  bool // (loop) no more chunks will be queued
	allQueued bool // (loop) the speaker has queued all its audio
	endFrame  int64
	firstOut  time.Time

	mu     sync.Mutex // pieces are written by the speaker, read by the loop
	pieces []piece
}

// piece is one chunk's audio in the output.
type piece struct {
	text    string
	start   int64 // sample index of its first sample
	samples int64 // samples queued so far
	done    bool  // all its audio is queued
	failed  bool  // the provider failed before any audio: nothing of it is heard
	marks   []tts.Mark
}

// playedText estimates what the caller heard of the utterance once sent samples have gone out:
// whole pieces, and of a piece cut short, the characters its alignment marks put before the cut
// (or a share by duration), cut back to a word boundary.
func (u *utterance) playedText(sent int64) string {
	u.mu.Lock()
	defer u.mu.Unlock()
	var b strings.Builder
	for _, p := range u.pieces {
		if p.failed {
			continue
		}
		if sent <= p.start {
			break
		}
		heard := sent - p.start
		if p.done && heard >= p.samples {
			b.WriteString(p.text)
			b.WriteByte(' ')
			continue
		}
		b.WriteString(partialText(p, heard))
		break
	}
	return strings.TrimSpace(b.String())
}

// charsPerSecond estimates speech rate when a piece's length is not known yet.
const charsPerSecond = 14

func partialText(p piece, heard int64) string {
	heardDur := time.Duration(heard) * time.Second / media.PipelineRate
	n := 0
	switch {
	case len(p.marks) > 0:
		for _, m := range p.marks {
			if m.End <= heardDur {
				n = m.CharOffset + utf8.RuneCountInString(m.Text)
			}
		}
	case p.done && p.samples > 0:
		n = int(int64(utf8.RuneCountInString(p.text)) * heard / p.samples)
	default:
		n = int(heardDur.Seconds() * charsPerSecond)
	}
	runes := []rune(p.text)
	if n >= len(runes) {
		return p.text
	}
	if n <= 0 {
		return ""
	}
	cut := string(runes[:n])
	if i := strings.LastIndexByte(cut, ' '); i > 0 && n < len(runes) && runes[n] != ' ' {
		cut = cut[:i]
	}
	return strings.TrimSpace(cut)
}

type spkKind int

const (
	spkTTSRequest spkKind = iota + 1
	spkTTSFirstByte
	spkFirstFrameOut
	spkTTSError
	spkTTSOK
	spkUttQueued
	spkPlayed
)

type spkEvent struct {
	kind spkKind
	utt  int
	at   time.Time
	end  int64
	err  error
}

// speaker turns utterance chunks into audio, one chunk at a time, and queues it on the output.
// It runs on its own goroutine; the loop talks to it through say, endUtterance and cancelAll.
type speaker struct {
	c       *Conversation
	mu      sync.Mutex
	items   []speakItem
	cutoff  int // utterances up to this id are cancelled
	cur     context.CancelFunc
	closed  bool
	wake    chan struct{}
	buf     [media.MaxFrameSamples]int16
	lastErr error
}

type speakItem struct {
	u    *utterance
	text string
	end  bool
}

func newSpeaker(c *Conversation) *speaker { return &speaker{c: c, wake: make(chan struct{}, 1)} }

func (s *speaker) push(it speakItem) {
	s.mu.Lock()
	s.items = append(s.items, it)
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

func (s *speaker) say(u *utterance, text string) { s.push(speakItem{u: u, text: text}) }
func (s *speaker) endUtterance(u *utterance)     { s.push(speakItem{u: u, end: true}) }

// cancelAll drops every queued chunk and stops the one being synthesized.
func (s *speaker) cancelAll() {
	s.mu.Lock()
	s.items = s.items[:0]
	s.cutoff = s.c.uttSeq
	if s.cur != nil {
		s.cur()
	}
	s.mu.Unlock()
}

func (s *speaker) close() {
	s.mu.Lock()
	s.closed = true
	if s.cur != nil {
		s.cur()
	}
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

func (s *speaker) next() (speakItem, bool) {
	for {
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			return speakItem{}, false
		}
		if len(s.items) > 0 {
			it := s.items[0]
			s.items = s.items[1:]
			cancelled := it.u.id <= s.cutoff
			s.mu.Unlock()
			if cancelled {
				continue
			}
			return it, true
		}
		s.mu.Unlock()
		<-s.wake
	}
}

func (s *speaker) run() {
	defer s.c.wg.Done()
	started := 0 // the last utterance whose first audio was queued
	for {
		it, ok := s.next()
		if !ok {
			return
		}
		if it.end {
			s.c.out.finish(it.u.id)
			s.report(spkEvent{kind: spkUttQueued, utt: it.u.id, end: s.c.out.queued()})
			continue
		}
		first := started != it.u.id
		queued, failed := s.synth(it, first)
		if failed && !queued {
			// One retry for a chunk that failed before any audio (a dropped connection, a
			// timeout): most provider hiccups pass.
			queued, failed = s.synth(it, first)
		}
		if queued {
			started = it.u.id
		}
		switch {
		case failed:
			s.report(spkEvent{kind: spkTTSError, utt: it.u.id, err: s.lastErr})
		case queued:
			s.report(spkEvent{kind: spkTTSOK, utt: it.u.id})
		}
	}
}

// report hands an event to the loop; it waits rather than drop, since the loop always drains.
func (s *speaker) report(ev spkEvent) {
	select {
	case s.c.spkCh <- ev:
	case <-s.c.ctx.Done():
	}
}

// synth speaks one chunk; it reports whether any audio was queued and whether the provider
// failed (the error is kept in lastErr).
func (s *speaker) synth(it speakItem, first bool) (queuedAny, failed bool) {
	ctx, cancel := context.WithCancel(s.c.ctx)
	defer cancel()
	s.mu.Lock()
	if s.closed || it.u.id <= s.cutoff {
		s.mu.Unlock()
		return false, false
	}
	s.cur = cancel
	s.mu.Unlock()

	s.report(spkEvent{kind: spkTTSRequest, utt: it.u.id, at: s.c.now()})
	a := s.c.agent
	stream, err := s.c.tts.Synthesize(ctx, tts.Request{Text: it.text, Voice: s.c.voice(), Model: a.TTS.Model, Language: a.Language, SampleRate: media.PipelineRate})
	if err != nil {
		s.lastErr = err
		return false, ctx.Err() == nil
	}
	defer stream.Close()
	p := &piece{text: it.text, start: -1}
	it.u.mu.Lock()
	it.u.pieces = append(it.u.pieces, piece{})
	idx := len(it.u.pieces) - 1
	it.u.mu.Unlock()
	update := func(done bool) {
		it.u.mu.Lock()
		p.done = done
		if done {
			p.marks = stream.Alignment()
		}
		it.u.pieces[idx] = *p
		it.u.mu.Unlock()
	}
	gotByte := false
	for {
		n, rerr := stream.Read(s.buf[:media.SamplesPerFrame(media.PipelineRate)])
		if n > 0 && !gotByte {
			gotByte = true
			s.report(spkEvent{kind: spkTTSFirstByte, utt: it.u.id, at: s.c.now()})
		}
		for off := 0; off < n; {
			if p.start < 0 {
				p.start = s.c.out.queued()
			}
			k, ok := s.c.out.write(it.u.id, s.buf[off:n], first && !queuedAny)
			if !ok {
				return queuedAny, false // cancelled by a flush
			}
			if k > 0 {
				if p.samples == 0 {
					s.c.agentSaying(it.u.id, it.text) // its audio starts to play
				}
				queuedAny = true
				off += k
				p.samples += int64(k)
				update(false)
				continue
			}
			// The pacer's queue is full: the caller is still hearing earlier audio. Wait until
			// half of it has gone out.
			if !s.c.out.waitRoom(ctx) {
				return queuedAny, false
			}
		}
		if errors.Is(rerr, io.EOF) {
			break
		}
		if rerr != nil {
			if ctx.Err() != nil {
				update(true)
				return queuedAny, false
			}
			s.lastErr = rerr
			p.failed = p.samples == 0
			update(true)
			return queuedAny, true
		}
	}
	if p.start < 0 {
		p.start = s.c.out.queued()
	}
	update(true)
	return queuedAny, false
}
