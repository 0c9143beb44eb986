package stt

import (
	"context"
	"encoding/json"
	"errors"
	"github.com/parley-voice/parley/media/internal/retry"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"
)

// deepgramStream is one live Deepgram session. Goroutines:
//   - run (owner of everything below): writes audio and control messages, reconnects;
//   - one reader per connection, started and waited for by run.
//
// Write only touches the frame ring and a notification channel.
type deepgramStream struct {
	d    *Deepgram
	opts StreamOptions
	url  string

	ctx    context.Context
	cancel context.CancelFunc
	// dialCtx is cancelled by Close so that a reconnect in progress gives up at once.
	dialCtx    context.Context
	dialCancel context.CancelFunc

	ring   *frameRing
	ready  chan struct{} // poked by Write after a push (capacity 1)
	events chan Event

	closeReq  chan struct{} // closed by Close
	closeOnce sync.Once
	hardStop  chan struct{} // closed when delivering events must stop waiting
	hardOnce  sync.Once
	done      chan struct{} // closed when run has finished and Events is closed
	ended     atomic.Bool   // no more writes accepted

	samplesSent atomic.Int64
	sendDropped atomic.Uint64
	reconnects  atomic.Int64

	// owned by run
	omap     *offsetMap
	connSent int64 // samples sent on the current connection
	expect   int64 // engine offset expected for the next frame on this connection
	scratch  []int16
	wbuf     []byte

	// owned by the current reader (readers never overlap)
	pending   bool // speech seen since the last EndOfSpeech
	utt       strings.Builder
	uttStart  time.Duration
	haveStart bool
	lastEnd   time.Duration
	requestID string
}

var _ Stream = (*deepgramStream)(nil)

func newDeepgramStream(ctx context.Context, d *Deepgram, o StreamOptions, u string) *deepgramStream {
	ctx, cancel := context.WithCancel(ctx)
	dialCtx, dialCancel := context.WithCancel(ctx)
	frame := o.SampleRate / 50
	return &deepgramStream{
		d: d, opts: o, url: u,
		ctx: ctx, cancel: cancel,
		dialCtx: dialCtx, dialCancel: dialCancel,
		ring:     newFrameRing(d.cfg.QueueFrames, frame),
		ready:    make(chan struct{}, 1),
		events:   make(chan Event, d.cfg.EventBuffer),
		closeReq: make(chan struct{}),
		hardStop: make(chan struct{}),
		done:     make(chan struct{}),
		omap:     newOffsetMap(),
		scratch:  make([]int16, 0, frame),
		wbuf:     make([]byte, 0, 2*frame),
	}
}

// Write queues one frame. It never blocks and does not allocate once the ring's slots have
// grown to the frame size (they are created at 20 ms).
func (s *deepgramStream) Write(pcm []int16, voiced bool) error {
	if s.ended.Load() {
		return ErrClosed
	}
	if len(pcm) == 0 {
		return nil
	}
	s.ring.push(pcm, voiced)
	select {
	case s.ready <- struct{}{}:
	default:
	}
	return nil
}

func (s *deepgramStream) Events() <-chan Event { return s.events }

// Close sends CloseStream, waits (at most CloseTimeout) for the final results and Metadata,
// then closes the connection and Events.
func (s *deepgramStream) Close() error {
	s.closeOnce.Do(func() {
		s.ended.Store(true)
		close(s.closeReq)
		s.dialCancel()
	})
	<-s.done
	return nil
}

func (s *deepgramStream) Stats() Stats {
	return Stats{
		AudioSent:     samplesToDuration(s.samplesSent.Load(), s.opts.SampleRate),
		FramesDropped: s.ring.droppedCount() + s.sendDropped.Load(),
		Reconnects:    int(s.reconnects.Load()),
	}
}

func (s *deepgramStream) stopHard() { s.hardOnce.Do(func() { close(s.hardStop) }) }

// emit delivers e, waiting for the consumer unless the stream is being torn down.
func (s *deepgramStream) emit(e Event) {
	if e.At.IsZero() {
		e.At = s.d.cfg.Now()
	}
	select {
	case s.events <- e:
	case <-s.hardStop:
	case <-s.ctx.Done():
	}
}

func (s *deepgramStream) closing() bool {
	select {
	case <-s.closeReq:
		return true
	default:
		return false
	}
}

// run owns the connection(s) until the stream ends.
func (s *deepgramStream) run(conn *websocket.Conn) {
	defer close(s.done)
	defer close(s.events)
	defer s.cancel()
	defer s.ended.Store(true)
	for {
		lost := s.serve(conn)
		if lost == nil {
			return
		}
		if conn = s.reconnect(lost); conn == nil {
			return
		}
	}
}

// serve pumps one connection. It returns nil when the stream is over (closed, cancelled, or a
// permanent failure already reported) and the cause when the connection was lost.
func (s *deepgramStream) serve(conn *websocket.Conn) error {
	s.omap.reset()
	s.connSent = 0
	readerDone := make(chan error, 1)
	go func() { readerDone <- s.readLoop(conn) }()
	finish := func() { conn.Close(); <-readerDone }

	ka := time.NewTicker(s.d.cfg.KeepAliveInterval / 2)
	defer ka.Stop()
	lastSend := time.Now()
	for {
		select {
		case <-s.ctx.Done():
			finish()
			return nil

		case err := <-readerDone:
			conn.Close()
			if s.closing() {
				return nil
			}
			if permanentClose(err) {
				s.emit(Event{Kind: Error, Err: &ProviderError{Provider: "deepgram", Op: "stream", Err: errors.Join(errClosingPermanently, err)}})
				return nil
			}
			return err

		case <-s.ready:
			if err := s.flush(conn); err != nil {
				finish()
				return err
			}
			lastSend = time.Now()

		case <-ka.C:
			if time.Since(lastSend) >= s.d.cfg.KeepAliveInterval {
				if err := s.writeText(conn, `{"type":"KeepAlive"}`); err != nil {
					finish()
					return err
				}
				lastSend = time.Now()
			}

		case <-s.closeReq:
			// Graceful finish: send what is queued, then CloseStream; Deepgram answers with the
			// final results and Metadata, then closes the socket.
			if err := s.flush(conn); err == nil {
				err = s.writeText(conn, `{"type":"CloseStream"}`)
				if err == nil {
					t := time.NewTimer(s.d.cfg.CloseTimeout)
					select {
					case <-readerDone:
						t.Stop()
						conn.Close()
						s.flushUtterance()
						return nil
					case <-t.C:
						s.d.log.Warn("deepgram: no close from server after CloseStream", "timeout", s.d.cfg.CloseTimeout)
					case <-s.ctx.Done():
					}
					t.Stop()
				}
			}
			s.stopHard()
			finish()
			return nil
		}
	}
}

// flush sends every queued frame as one binary message each.
func (s *deepgramStream) flush(conn *websocket.Conn) error {
	for {
		pcm, _, off, ok := s.ring.pop(s.scratch)
		if !ok {
			return nil
		}
		s.scratch = pcm[:0]
		if s.connSent == 0 || off != s.expect {
			s.omap.add(s.connSent, off)
		}
		if s.opts.Encoding == EncodingMulaw {
			s.wbuf = appendMulaw(s.wbuf[:0], pcm)
		} else {
			s.wbuf = appendLinear16(s.wbuf[:0], pcm)
		}
		conn.SetWriteDeadline(time.Now().Add(s.d.cfg.WriteTimeout))
		if err := conn.WriteMessage(websocket.BinaryMessage, s.wbuf); err != nil {
			s.sendDropped.Add(1)
			return &ProviderError{Provider: "deepgram", Op: "stream", Err: err}
		}
		s.connSent += int64(len(pcm))
		s.expect = off + int64(len(pcm))
		s.samplesSent.Add(int64(len(pcm)))
	}
}

func (s *deepgramStream) writeText(conn *websocket.Conn, msg string) error {
	conn.SetWriteDeadline(time.Now().Add(s.d.cfg.WriteTimeout))
	if err := conn.WriteMessage(websocket.TextMessage, []byte(msg)); err != nil {
		return &ProviderError{Provider: "deepgram", Op: "stream", Err: err}
	}
	return nil
}

// reconnect re-dials with backoff until it succeeds, the window passes, or the stream ends.
// Frames written meanwhile wait in the ring (the oldest are dropped once it is full).
func (s *deepgramStream) reconnect(cause error) *websocket.Conn {
	start := time.Now()
	s.d.log.Warn("deepgram: connection lost mid-stream, reconnecting", "err", cause)
	for attempt := 0; ; attempt++ {
		if !retry.Wait(s.ctx, s.closeReq, s.d.bo.Delay(attempt)) {
			return nil
		}
		conn, err := s.d.dial(s.dialCtx, s.url)
		if err == nil {
			s.reconnects.Add(1)
			gap := time.Since(start)
			s.d.log.Info("deepgram: reconnected", "attempts", attempt+1, "gap", gap)
			s.emit(Event{Kind: Reconnected, Err: cause})
			return conn
		}
		if s.ctx.Err() != nil || s.closing() {
			return nil
		}
		if !retryable(err) || time.Since(start) > s.d.cfg.ReconnectWindow {
			s.d.log.Error("deepgram: giving up reconnecting", "err", err, "after", time.Since(start))
			s.emit(Event{Kind: Error, Err: err})
			return nil
		}
	}
}

// readLoop reads server messages until the connection fails or closes.
func (s *deepgramStream) readLoop(conn *websocket.Conn) error {
	for {
		mt, data, err := conn.ReadMessage()
		if err != nil {
			return err
		}
		if mt == websocket.TextMessage {
			s.handle(data)
		}
	}
}

// handle maps one server message to events (the protocol mapping is table-tested).
func (s *deepgramStream) handle(data []byte) {
	var m dgMessage
	if err := json.Unmarshal(data, &m); err != nil {
		s.d.log.Warn("deepgram: unparsable message", "err", err, "len", len(data))
		return
	}
	switch m.Type {
	case "Results":
		var ch dgChannel
		if len(m.Channel) > 0 {
			if err := json.Unmarshal(m.Channel, &ch); err != nil {
				s.d.log.Warn("deepgram: bad Results channel", "err", err)
				return
			}
		}
		var text string
		var conf float64
		if len(ch.Alternatives) > 0 {
			text, conf = strings.TrimSpace(ch.Alternatives[0].Transcript), ch.Alternatives[0].Confidence
		}
		start, end := s.at(m.Start), s.at(m.Start+m.Duration)
		if !m.IsFinal {
			if text != "" {
				s.noteSpeech(start, end)
				s.emit(Event{Kind: Interim, Text: text, Confidence: conf, Start: start, End: end})
			}
			return
		}
		if text != "" {
			s.noteSpeech(start, end)
			if s.utt.Len() > 0 {
				s.utt.WriteByte(' ')
			}
			s.utt.WriteString(text)
			s.emit(Event{Kind: Final, Text: text, Confidence: conf, Start: start, End: end, SpeechFinal: m.SpeechFinal})
		}
		if m.SpeechFinal && s.pending {
			s.endOfSpeech(end)
		}
	case "UtteranceEnd":
		if s.pending {
			s.endOfSpeech(s.at(m.LastWordEnd))
		}
	case "SpeechStarted":
		t := s.at(m.Timestamp)
		s.emit(Event{Kind: SpeechStarted, Start: t, End: t})
	case "Metadata":
		s.requestID = m.RequestID
		s.d.log.Debug("deepgram: metadata", "request_id", m.RequestID)
	case "Error":
		msg := m.Description
		if msg == "" {
			msg = m.Message
		}
		s.emit(Event{Kind: Error, Err: &ProviderError{Provider: "deepgram", Op: "stream", Code: m.Variant, Message: msg}})
	}
}

// noteSpeech records that the current utterance has words between start and end.
func (s *deepgramStream) noteSpeech(start, end time.Duration) {
	s.pending = true
	if !s.haveStart {
		s.uttStart, s.haveStart = start, true
	}
	if end > s.lastEnd {
		s.lastEnd = end
	}
}

func (s *deepgramStream) endOfSpeech(end time.Duration) {
	if end < s.lastEnd {
		end = s.lastEnd
	}
	s.emit(Event{Kind: EndOfSpeech, Text: s.utt.String(), Start: s.uttStart, End: end})
	s.utt.Reset()
	s.pending, s.haveStart = false, false
}

// flushUtterance ends an utterance still open when the stream closes gracefully.
func (s *deepgramStream) flushUtterance() {
	if s.pending && s.utt.Len() > 0 {
		s.endOfSpeech(s.lastEnd)
	}
}

// at maps a connection-relative time in seconds to the engine's timeline.
func (s *deepgramStream) at(sec float64) time.Duration {
	if math.IsNaN(sec) || math.IsInf(sec, 0) || sec < 0 {
		sec = 0
	}
	if sec > 1e6 {
		sec = 1e6
	}
	conn := int64(math.Round(sec * float64(s.opts.SampleRate)))
	return samplesToDuration(s.omap.engineAt(conn), s.opts.SampleRate)
}
