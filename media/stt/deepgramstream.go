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

// Batching of caller audio into binary messages. Each WebSocket message costs a write syscall
// and a wake-up of the sending goroutine, so frames are coalesced where latency does not matter
// and sent one by one where it does:
//
//   - while the caller speaks (voiced frames) and during long silence (more than the tail after
//     the last voiced frame, e.g. while the agent talks), frames are coalesced into messages of
//     dgBatchSpan. Interim results come every ~250 ms anyway, and nothing waits on silence;
//   - in the tail after speech (silent frames less than dgTailWindow after the last voiced one),
//     every frame is sent at once, alone: the provider's endpointing decides the end of the turn
//     from this audio, and batching it would delay the turn. A voiced partial batch still queued
//     when the tail starts goes out first, as one message.
//
// The sender is woken only when a message is due (see frameRing). A partial batch left behind
// when Write stops being called goes out after dgBatchMaxWait; Close sends everything queued.
const (
	// dgBatchSpan is the most audio coalesced into one binary message: 5 frames of 20 ms, i.e.
	// 3200 bytes of linear16 or 800 bytes of µ-law at 8 kHz.
	dgBatchSpan = 100 * time.Millisecond
	// dgTailWindow is how long after the last voiced frame silent frames are sent one by one.
	// It is stretched to cover the stream's Endpointing or UtteranceEnd plus dgTailMargin when
	// those are longer.
	dgTailWindow = 1500 * time.Millisecond
	// dgTailMargin is added to the stream's Endpointing/UtteranceEnd when they stretch the tail:
	// the provider's last word may end a little after the engine's last voiced frame.
	dgTailMargin = 500 * time.Millisecond
	// dgBatchMaxWait bounds how long a partial batch waits for more frames: when no message was
	// due for this long (Write stopped mid-batch), whatever is queued is sent. It is twice the
	// batch span so that frames arriving with ordinary jitter still make full batches.
	dgBatchMaxWait = 2 * dgBatchSpan
)

// deepgramTail returns the tail window for o (see dgTailWindow).
func deepgramTail(o StreamOptions) time.Duration {
	return max(dgTailWindow, max(o.Endpointing, o.UtteranceEnd)+dgTailMargin)
}

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
	ready  chan struct{} // poked by Write when a message is due (capacity 1)
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
	batch    frameBatch
	wbuf     wsFrame       // the message being sent, framed in place (wsframe.go)
	lastSend time.Time     // when the last message went out
	maxWait  time.Duration // dgBatchMaxWait (tests may raise it before run starts)

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
	batch := int(durationToSamples(dgBatchSpan, o.SampleRate))
	tail := durationToSamples(deepgramTail(o), o.SampleRate)
	return &deepgramStream{
		d: d, opts: o, url: u,
		ctx: ctx, cancel: cancel,
		dialCtx: dialCtx, dialCancel: dialCancel,
		ring:     newFrameRing(d.cfg.QueueFrames, frame, batch, tail),
		ready:    make(chan struct{}, 1),
		events:   make(chan Event, d.cfg.EventBuffer),
		closeReq: make(chan struct{}),
		hardStop: make(chan struct{}),
		done:     make(chan struct{}),
		omap:     newOffsetMap(),
		batch:    frameBatch{pcm: make([]int16, 0, batch+frame)},
		wbuf:     newWSFrame(2 * (batch + frame)),
		maxWait:  dgBatchMaxWait,
	}
}

// Write queues one frame. It never blocks and does not allocate once the ring's slots have
// grown to the frame size (they are created at 20 ms). It wakes the sender only when a message
// is due (see the batching policy above), not on every frame.
func (s *deepgramStream) Write(pcm []int16, voiced bool) error {
	if s.ended.Load() {
		return ErrClosed
	}
	if len(pcm) == 0 {
		return nil
	}
	if s.ring.push(pcm, voiced) {
		select {
		case s.ready <- struct{}{}:
		default:
		}
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
	s.lastSend = time.Now()
	// Messages due from frames queued while (re)connecting go out at once; this also re-arms
	// the ring's wake-ups, which a failed send on the previous connection may have left
	// outstanding.
	if err := s.flush(conn, false); err != nil {
		finish()
		return err
	}
	// stale fires when the sender was not woken for maxWait: Write stopped and a partial batch
	// may be stuck, so everything queued is sent. It is re-armed on every wake-up; once it has
	// fired the ring is idle, and the next Write wakes the sender, which arms it again.
	stale := time.NewTimer(s.maxWait)
	defer stale.Stop()
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
			if err := s.flush(conn, false); err != nil {
				finish()
				return err
			}
			stale.Reset(s.maxWait)

		case <-stale.C:
			if err := s.flush(conn, true); err != nil {
				finish()
				return err
			}

		case <-ka.C:
			if time.Since(s.lastSend) >= s.d.cfg.KeepAliveInterval {
				if err := s.writeText(conn, `{"type":"KeepAlive"}`); err != nil {
					finish()
					return err
				}
				s.lastSend = time.Now()
			}

		case <-s.closeReq:
			// Graceful finish: send what is queued, then CloseStream; Deepgram answers with the
			// final results and Metadata, then closes the socket.
			if err := s.flush(conn, true); err == nil {
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

// flush sends the messages that are due (with all, everything queued), one binary message
// each, until none is left. It must run until the ring says nothing is due (or the connection
// fails): that is what re-arms the ring's wake-ups.
func (s *deepgramStream) flush(conn *websocket.Conn, all bool) error {
	for s.ring.take(&s.batch, all) {
		if err := s.send(conn, &s.batch); err != nil {
			return err
		}
	}
	return nil
}

// send encodes b into one binary message and writes it. Frames in b are contiguous; frames the
// ring dropped before b.off (or a new connection) make a point in the offset map at the
// message's first sample. It allocates nothing: the message is framed in the stream's own
// buffer (wsframe.go), not through gorilla's per-message writer.
func (s *deepgramStream) send(conn *websocket.Conn, b *frameBatch) error {
	if s.connSent == 0 || b.off != s.expect {
		s.omap.add(s.connSent, b.off)
	}
	s.encode(b)
	now := time.Now()
	if err := s.wbuf.writeTo(conn.NetConn(), wsOpBinary, now.Add(s.d.cfg.WriteTimeout)); err != nil {
		s.sendDropped.Add(uint64(b.frames))
		return &ProviderError{Provider: "deepgram", Op: "stream", Err: err}
	}
	n := int64(len(b.pcm))
	s.connSent += n
	s.expect = b.off + n
	s.samplesSent.Add(n)
	s.lastSend = now
	return nil
}

// encode puts b's samples, in the stream's wire encoding, in the reused message buffer and
// returns them.
func (s *deepgramStream) encode(b *frameBatch) []byte {
	if s.opts.Encoding == EncodingMulaw {
		s.wbuf.buf = appendMulaw(s.wbuf.buf[:wsMaxHeader], b.pcm)
	} else {
		s.wbuf.buf = appendLinear16(s.wbuf.buf[:wsMaxHeader], b.pcm)
	}
	return s.wbuf.body()
}

// writeText sends a control message of the Deepgram protocol (KeepAlive, CloseStream) as a
// text message, through the same buffer as the audio.
func (s *deepgramStream) writeText(conn *websocket.Conn, msg string) error {
	s.wbuf.buf = append(s.wbuf.buf[:wsMaxHeader], msg...)
	if err := s.wbuf.writeTo(conn.NetConn(), wsOpText, time.Now().Add(s.d.cfg.WriteTimeout)); err != nil {
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
