package stt

import (
	"bytes"
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// openaiSTTStream cuts utterances out of the written frames using the engine's VAD flags and
// uploads each one from its own goroutine (run), in order.
//
// Write does the cutting under mu: it copies the frame into the current utterance buffer (or
// the pre-roll ring while idle) and, when an utterance ends, hands the buffer to run through a
// bounded channel and takes a recycled one. Buffers grow to the longest utterance seen and are
// reused, so Write does not allocate in steady state.
type openaiSTTStream struct {
	a    *OpenAISTT
	opts StreamOptions

	ctx    context.Context
	cancel context.CancelFunc

	mu sync.Mutex
	// cutting state, under mu
	dead       bool  // Events closed: Write must not send on it
	closed     bool  // Close called or stream over
	pos        int64 // engine offset: samples written so far
	pre        []int16
	preN       int // valid samples in pre
	preHead    int // index of the oldest sample in pre
	cur        []int16
	inSpeech   bool
	started    bool  // SpeechStarted emitted for this utterance
	voiced     int64 // voiced samples in this utterance
	silence    int64 // unvoiced samples since the last voiced frame
	speechAt   int64 // engine offset of the first voiced sample
	lastVoiced int64 // engine offset just after the last voiced frame
	curStart   int64 // engine offset of cur[0]
	endpoint   int64 // samples of silence that end an utterance
	minSpeech  int64
	maxSamples int
	trailing   int64

	jobs chan sttJob
	free chan []int16

	events    chan Event
	closeOnce sync.Once
	hardStop  chan struct{}
	hardOnce  sync.Once
	done      chan struct{}

	samplesSent   atomic.Int64
	dropped       atomic.Uint64
	requests      atomic.Int64
	droppedEvents atomic.Uint64

	// owned by run
	body     bytes.Buffer
	wav      []byte
	utt      strings.Builder
	uttOpen  bool          // a piece of the current utterance was uploaded
	uttStart time.Duration // start of the current utterance's first piece
}

// sttJob is one cut utterance.
type sttJob struct {
	pcm        []int16
	start, end int64 // engine offsets of the speech (pre-roll excluded)
	eos        bool  // the utterance ended (not a MaxUtterance cut)
}

var _ Stream = (*openaiSTTStream)(nil)

func newOpenAISTTStream(ctx context.Context, a *OpenAISTT, o StreamOptions) *openaiSTTStream {
	ctx, cancel := context.WithCancel(ctx)
	rate := o.SampleRate
	ep := a.cfg.Endpointing
	if o.Endpointing > 0 {
		ep = o.Endpointing
	}
	s := &openaiSTTStream{
		a: a, opts: o, ctx: ctx, cancel: cancel,
		pre:        make([]int16, int(durationToSamples(a.cfg.PreRoll, rate))),
		endpoint:   durationToSamples(ep, rate),
		minSpeech:  durationToSamples(a.cfg.MinSpeech, rate),
		maxSamples: int(durationToSamples(a.cfg.MaxUtterance, rate)),
		trailing:   durationToSamples(a.cfg.TrailingSilence, rate),
		jobs:       make(chan sttJob, a.cfg.QueueUtterances),
		free:       make(chan []int16, a.cfg.QueueUtterances+2),
		events:     make(chan Event, a.cfg.EventBuffer),
		hardStop:   make(chan struct{}),
		done:       make(chan struct{}),
	}
	if s.maxSamples < rate/10 {
		s.maxSamples = rate / 10
	}
	s.cur = make([]int16, 0, min(s.maxSamples, 5*rate))
	return s
}

// Write feeds one frame with the engine's VAD decision. It never blocks.
func (s *openaiSTTStream) Write(pcm []int16, voiced bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrClosed
	}
	n := int64(len(pcm))
	if n == 0 {
		return nil
	}
	at := s.pos
	s.pos += n
	if !s.inSpeech {
		if !voiced {
			s.pushPreRoll(pcm)
			return nil
		}
		s.inSpeech, s.started = true, false
		s.voiced, s.silence = 0, 0
		s.speechAt = at
		s.cur = s.cur[:0]
		s.cur = s.appendPreRoll(s.cur)
		s.curStart = at - int64(len(s.cur))
	}
	if len(s.cur)+len(pcm) > s.maxSamples {
		// Too long: send what we have, keep listening in a fresh buffer.
		s.cut(false)
		s.cur = s.cur[:0]
		s.curStart, s.speechAt = at, at
	}
	s.cur = append(s.cur, pcm...)
	if voiced {
		s.voiced += n
		s.silence = 0
		s.lastVoiced = at + n
		if !s.started && s.voiced >= s.minSpeech {
			s.started = true
			t := samplesToDuration(s.speechAt, s.opts.SampleRate)
			s.tryEmit(Event{Kind: SpeechStarted, Start: t, End: t, At: s.a.cfg.Now()})
		}
		return nil
	}
	s.silence += n
	if s.silence >= s.endpoint {
		s.endUtterance()
	}
	return nil
}

// endUtterance closes the current utterance (under mu).
func (s *openaiSTTStream) endUtterance() {
	s.inSpeech = false
	if !s.started {
		s.voiced = 0 // too short: noise
		s.preN, s.preHead = 0, 0
		return
	}
	keep := s.lastVoiced + s.trailing - s.curStart
	if keep < int64(len(s.cur)) && keep > 0 {
		s.cur = s.cur[:keep]
	}
	s.cut(true)
	s.cur = s.cur[:0]
	s.preN, s.preHead = 0, 0
}

// cut hands s.cur to the uploader and replaces it with a recycled buffer (under mu).
func (s *openaiSTTStream) cut(eos bool) {
	job := sttJob{pcm: s.cur, start: s.speechAt, end: s.lastVoiced, eos: eos}
	if job.end < job.start {
		job.end = job.start
	}
	select {
	case s.jobs <- job:
		select {
		case b := <-s.free:
			s.cur = b[:0]
		default:
			s.cur = make([]int16, 0, cap(job.pcm))
		}
	default:
		frames := uint64(len(job.pcm) / max(1, s.opts.SampleRate/50))
		s.dropped.Add(max(frames, 1)) // counted, not logged: this runs on the frame path
	}
}

func (s *openaiSTTStream) pushPreRoll(pcm []int16) {
	size := len(s.pre)
	if size == 0 {
		return
	}
	if len(pcm) >= size {
		copy(s.pre, pcm[len(pcm)-size:])
		s.preHead, s.preN = 0, size
		return
	}
	// Write position after the newest sample, in at most two copies.
	w := (s.preHead + s.preN) % size
	n := copy(s.pre[w:], pcm)
	copy(s.pre, pcm[n:])
	s.preN += len(pcm)
	if s.preN > size {
		s.preHead = (s.preHead + s.preN - size) % size
		s.preN = size
	}
}

func (s *openaiSTTStream) appendPreRoll(dst []int16) []int16 {
	first := min(s.preN, len(s.pre)-s.preHead)
	dst = append(dst, s.pre[s.preHead:s.preHead+first]...)
	dst = append(dst, s.pre[:s.preN-first]...)
	s.preN, s.preHead = 0, 0
	return dst
}

// tryEmit sends an event from Write without blocking (under mu); a full channel drops it.
func (s *openaiSTTStream) tryEmit(e Event) {
	if s.dead {
		return
	}
	select {
	case s.events <- e:
	default:
		s.droppedEvents.Add(1)
	}
}

// emit delivers an event from run, waiting for the consumer unless torn down.
func (s *openaiSTTStream) emit(e Event) {
	if e.At.IsZero() {
		e.At = s.a.cfg.Now()
	}
	select {
	case s.events <- e:
	case <-s.hardStop:
	case <-s.ctx.Done():
	}
}

func (s *openaiSTTStream) Events() <-chan Event { return s.events }

// Close flushes an utterance in progress, waits (at most CloseTimeout) for pending uploads and
// their events, then closes Events.
func (s *openaiSTTStream) Close() error {
	s.closeOnce.Do(func() {
		s.mu.Lock()
		if !s.closed {
			if s.inSpeech {
				s.endUtterance()
			}
			s.closed = true
			close(s.jobs)
		}
		s.mu.Unlock()
		t := time.NewTimer(s.a.cfg.CloseTimeout)
		defer t.Stop()
		select {
		case <-s.done:
		case <-t.C:
			s.a.log.Warn("openai-stt: uploads still pending at close, abandoning them", "timeout", s.a.cfg.CloseTimeout)
			s.hardOnce.Do(func() { close(s.hardStop) })
			s.cancel()
		}
	})
	<-s.done
	return nil
}

func (s *openaiSTTStream) Stats() Stats {
	return Stats{
		AudioSent:     samplesToDuration(s.samplesSent.Load(), s.opts.SampleRate),
		FramesDropped: s.dropped.Load(),
		Requests:      int(s.requests.Load()),
	}
}

// run uploads utterances in order until the job channel closes or the context ends.
func (s *openaiSTTStream) run() {
	defer close(s.done)
	defer func() {
		s.mu.Lock()
		s.dead = true
		if !s.closed {
			s.closed = true
			close(s.jobs)
		}
		close(s.events)
		s.mu.Unlock()
		s.cancel()
	}()
	for {
		select {
		case <-s.ctx.Done():
			return
		case job, ok := <-s.jobs:
			if !ok {
				return
			}
			s.upload(job)
			select {
			case s.free <- job.pcm:
			default:
			}
		}
	}
}

func (s *openaiSTTStream) upload(job sttJob) {
	rate := s.opts.SampleRate
	start, end := samplesToDuration(job.start, rate), samplesToDuration(job.end, rate)
	if !s.uttOpen {
		s.uttOpen, s.uttStart = true, start
	}
	var err error
	s.wav, err = appendWAV(s.wav[:0], job.pcm, rate)
	var text string
	var conf float64
	if err == nil {
		var ct string
		ct, err = s.a.multipartBody(&s.body, s.wav, s.opts)
		if err == nil {
			s.samplesSent.Add(int64(len(job.pcm)))
			text, conf, err = s.a.transcribe(s.ctx, s.hardStop, s.body.Bytes(), ct, func() { s.requests.Add(1) })
		}
	}
	if err != nil {
		if s.ctx.Err() == nil {
			s.a.log.Warn("openai-stt: utterance lost", "err", err)
			s.emit(Event{Kind: Error, Err: err, Start: start, End: end})
		}
	} else if text != "" {
		if s.utt.Len() > 0 {
			s.utt.WriteByte(' ')
		}
		s.utt.WriteString(text)
		s.emit(Event{Kind: Final, Text: text, Confidence: conf, Start: start, End: end, SpeechFinal: job.eos})
	}
	if job.eos {
		s.emit(Event{Kind: EndOfSpeech, Text: s.utt.String(), Start: s.uttStart, End: end})
		s.utt.Reset()
		s.uttOpen = false
	}
}
