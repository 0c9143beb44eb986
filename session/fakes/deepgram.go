package fakes

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"
)

// DeepgramFakeOptions configure a DeepgramFake.
type DeepgramFakeOptions struct {
	// APIKey is the key accepted in "Authorization: Token <key>". Empty accepts any non-empty
	// key; a missing or wrong key is refused with 401 like the vendor.
	APIKey string
	// Script holds one transcript line per utterance, used in turn (cycling) on each
	// connection. Default: a few short sentences.
	Script []string
	// InterimEvery is the audio time between interim Results during speech. Default 250 ms.
	InterimEvery time.Duration
	// FinalDelay is the recogniser's latency: the final Results (and UtteranceEnd) leave this
	// long after the endpointing silence has been heard.
	FinalDelay time.Duration
	// HandshakeDelay delays the WebSocket upgrade.
	HandshakeDelay time.Duration
	// DefaultEndpointing is the silence that ends an utterance when the client sends no
	// endpointing parameter. Default 10 ms (Deepgram's default).
	DefaultEndpointing time.Duration
	// Threshold is the RMS (0..1 of full scale) of a 10 ms window that counts as speech.
	// Default 0.01 (-40 dBFS).
	Threshold float64
	// IdleTimeout closes the socket (1011, NET-0001) when neither audio nor KeepAlive arrives
	// for this long. Default 10 s, as the vendor.
	IdleTimeout time.Duration
	// DropAfterSpeech is how far into an utterance an armed drop (ArmDrop) cuts the
	// connection. Default 200 ms.
	DropAfterSpeech time.Duration
}

func (o DeepgramFakeOptions) withDefaults() DeepgramFakeOptions {
	if len(o.Script) == 0 {
		o.Script = []string{"hello there", "i would like to book a table for two", "thank you very much"}
	}
	if o.InterimEvery <= 0 {
		o.InterimEvery = 250 * time.Millisecond
	}
	if o.DefaultEndpointing <= 0 {
		o.DefaultEndpointing = 10 * time.Millisecond
	}
	if o.Threshold <= 0 {
		o.Threshold = 0.01
	}
	if o.IdleTimeout <= 0 {
		o.IdleTimeout = 10 * time.Second
	}
	if o.DropAfterSpeech <= 0 {
		o.DropAfterSpeech = 200 * time.Millisecond
	}
	return o
}

// DeepgramFakeConn is what the fake recorded about one connection (or refused attempt).
type DeepgramFakeConn struct {
	// Query and Header are the upgrade request's query parameters and headers.
	Query  url.Values
	Header http.Header
	// Status is the HTTP status of the handshake (101 when upgraded).
	Status int
	// Messages lists the client's text messages by type, in order ("KeepAlive",
	// "CloseStream", "Finalize", or "invalid").
	Messages []string
	// AudioMessages and AudioBytes count the binary (audio) messages received.
	AudioMessages int
	AudioBytes    int64
	// Sent lists the types of the messages the fake sent, in order.
	Sent []string
	// Utterances counts detected utterances.
	Utterances int
	// Opened and Closed bracket the connection; Closed is zero while it is open.
	Opened, Closed time.Time
	// Dropped is set when the fake cut the connection on purpose (ArmDrop).
	Dropped bool
	// CloseCode is the close code the fake sent (0 if none).
	CloseCode int
}

// DeepgramFake is an http.Handler speaking Deepgram's live streaming protocol
// (GET /v1/listen upgraded to a WebSocket). It detects speech in the audio by energy (linear16
// or mulaw), sends interim and final Results from a script, SpeechStarted (vad_events),
// UtteranceEnd (utterance_end_ms), and on CloseStream the final Results and Metadata before
// closing. Serve it with httptest.NewServer or any listener; Close it before the server.
type DeepgramFake struct {
	mu       sync.Mutex
	opts     DeepgramFakeOptions
	conns    []*DeepgramFakeConn
	live     map[*websocket.Conn]struct{}
	failN    int
	failCode int
	closed   bool
	done     chan struct{}
	wg       sync.WaitGroup
	drops    atomic.Int32
	upgrader websocket.Upgrader
}

// NewDeepgramFake returns a fake with o (defaults filled in).
func NewDeepgramFake(o DeepgramFakeOptions) *DeepgramFake {
	return &DeepgramFake{
		opts:     o.withDefaults(),
		live:     map[*websocket.Conn]struct{}{},
		done:     make(chan struct{}),
		upgrader: websocket.Upgrader{CheckOrigin: func(*http.Request) bool { return true }},
	}
}

// Options returns the current options.
func (f *DeepgramFake) Options() DeepgramFakeOptions {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.opts
}

// SetOptions replaces the options; new connections (and new utterances' latencies) use them.
func (f *DeepgramFake) SetOptions(o DeepgramFakeOptions) {
	f.mu.Lock()
	f.opts = o.withDefaults()
	f.mu.Unlock()
}

// FailHandshakes makes the next n upgrade attempts fail with HTTP status (503 when 0).
func (f *DeepgramFake) FailHandshakes(n, status int) {
	if status == 0 {
		status = http.StatusServiceUnavailable
	}
	f.mu.Lock()
	f.failN, f.failCode = n, status
	f.mu.Unlock()
}

// ArmDrop makes the fake cut the next utterance it hears (on any connection) by dropping the
// TCP connection, without a close frame, DropAfterSpeech into the speech.
func (f *DeepgramFake) ArmDrop() { f.drops.Add(1) }

// Connections returns a copy of what was recorded, oldest first (refused attempts included).
func (f *DeepgramFake) Connections() []DeepgramFakeConn {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]DeepgramFakeConn, len(f.conns))
	for i, c := range f.conns {
		out[i] = *c
		out[i].Messages = append([]string(nil), c.Messages...)
		out[i].Sent = append([]string(nil), c.Sent...)
	}
	return out
}

// Close ends every live connection and waits for the fake's goroutines. It is idempotent.
func (f *DeepgramFake) Close() error {
	f.mu.Lock()
	if !f.closed {
		f.closed = true
		close(f.done)
		for c := range f.live {
			c.NetConn().Close()
		}
	}
	f.mu.Unlock()
	f.wg.Wait()
	return nil
}

func (f *DeepgramFake) record(c *DeepgramFakeConn, fn func(c *DeepgramFakeConn)) {
	f.mu.Lock()
	fn(c)
	f.mu.Unlock()
}

// dgFakeError writes Deepgram's REST error shape with its dg-error header.
func dgFakeError(w http.ResponseWriter, status int, code, msg, reqID string) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("dg-error", msg)
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(map[string]string{"err_code": code, "err_msg": msg, "request_id": reqID})
}

func dgFakeID() string {
	var b [16]byte
	rand.Read(b[:])
	h := hex.EncodeToString(b[:])
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

// dgFakeParams are the query parameters the fake acts on.
type dgFakeParams struct {
	mulaw          bool
	rate           int
	interim        bool
	vad            bool
	endpointing    time.Duration // 0 = disabled (endpointing=false)
	utteranceEnd   time.Duration
	model          string
	requestID      string
	script         []string
	interimEvery   time.Duration
	threshold      float64
	idle           time.Duration
	dropAfter      time.Duration
	defaultEndStop time.Duration
}

func parseDGFakeParams(q url.Values, o DeepgramFakeOptions) (dgFakeParams, error) {
	p := dgFakeParams{script: o.Script, interimEvery: o.InterimEvery, threshold: o.Threshold, idle: o.IdleTimeout, dropAfter: o.DropAfterSpeech}
	enc := q.Get("encoding")
	switch enc {
	case "linear16":
	case "mulaw":
		p.mulaw = true
	case "":
		return p, errors.New("this fake needs raw audio: set encoding (linear16 or mulaw) and sample_rate")
	default:
		return p, fmt.Errorf("encoding %q is not supported by this fake (linear16, mulaw)", enc)
	}
	sr := q.Get("sample_rate")
	if sr == "" {
		return p, errors.New("sample_rate is required when encoding is set")
	}
	rate, err := strconv.Atoi(sr)
	if err != nil || rate < 4000 || rate > 48000 {
		return p, fmt.Errorf("invalid sample_rate %q", sr)
	}
	p.rate = rate
	if ch := q.Get("channels"); ch != "" && ch != "1" {
		return p, fmt.Errorf("channels=%s: this fake supports mono only", ch)
	}
	boolParam := func(name string) (bool, error) {
		switch v := q.Get(name); v {
		case "", "false":
			return false, nil
		case "true":
			return true, nil
		default:
			return false, fmt.Errorf("invalid %s %q (true or false)", name, v)
		}
	}
	for _, name := range []string{"smart_format", "punctuate"} {
		if _, err := boolParam(name); err != nil {
			return p, err
		}
	}
	if p.interim, err = boolParam("interim_results"); err != nil {
		return p, err
	}
	if p.vad, err = boolParam("vad_events"); err != nil {
		return p, err
	}
	switch v := q.Get("endpointing"); v {
	case "":
		p.endpointing = o.DefaultEndpointing
	case "false":
		p.endpointing = 0
	default:
		ms, err := strconv.Atoi(v)
		if err != nil || ms < 0 {
			return p, fmt.Errorf("invalid endpointing %q (milliseconds or false)", v)
		}
		p.endpointing = time.Duration(ms) * time.Millisecond
		if ms == 0 {
			p.endpointing = o.DefaultEndpointing
		}
	}
	if v := q.Get("utterance_end_ms"); v != "" {
		ms, err := strconv.Atoi(v)
		if err != nil || ms <= 0 {
			return p, fmt.Errorf("invalid utterance_end_ms %q", v)
		}
		p.utteranceEnd = time.Duration(ms) * time.Millisecond
	}
	p.model = q.Get("model")
	if p.model == "" {
		p.model = "base"
	}
	return p, nil
}

// ServeHTTP accepts GET /v1/listen WebSocket upgrades.
func (f *DeepgramFake) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	reqID := dgFakeID()
	w.Header().Set("dg-request-id", reqID)
	if r.URL.Path != "/v1/listen" {
		dgFakeError(w, http.StatusNotFound, "NOT_FOUND", "unknown path "+r.URL.Path, reqID)
		return
	}
	f.mu.Lock()
	if f.closed {
		f.mu.Unlock()
		dgFakeError(w, http.StatusServiceUnavailable, "UNAVAILABLE", "fake closed", reqID)
		return
	}
	f.wg.Add(1)
	o := f.opts
	rec := &DeepgramFakeConn{Query: r.URL.Query(), Header: r.Header.Clone(), Opened: time.Now()}
	f.conns = append(f.conns, rec)
	fail := 0
	if f.failN > 0 {
		f.failN--
		fail = f.failCode
	}
	f.mu.Unlock()
	defer f.wg.Done()
	reject := func(status int, code, msg string) {
		f.record(rec, func(c *DeepgramFakeConn) { c.Status, c.Closed = status, time.Now() })
		dgFakeError(w, status, code, msg, reqID)
	}

	if o.HandshakeDelay > 0 && !audioWaitUntil(r.Context(), f.done, time.Now().Add(o.HandshakeDelay)) {
		reject(http.StatusServiceUnavailable, "UNAVAILABLE", "aborted")
		return
	}
	if fail != 0 {
		reject(fail, "INTERNAL_SERVER_ERROR", "injected failure")
		return
	}
	auth := r.Header.Get("Authorization")
	key, ok := strings.CutPrefix(auth, "Token ")
	if !ok || key == "" || (o.APIKey != "" && key != o.APIKey) {
		reject(http.StatusUnauthorized, "INVALID_AUTH", "Invalid credentials.")
		return
	}
	if r.Method != http.MethodGet || !websocket.IsWebSocketUpgrade(r) {
		reject(http.StatusBadRequest, "Bad Request", "expected a WebSocket upgrade (GET) on /v1/listen")
		return
	}
	p, err := parseDGFakeParams(r.URL.Query(), o)
	if err != nil {
		reject(http.StatusBadRequest, "Bad Request", err.Error())
		return
	}
	p.requestID = reqID
	conn, err := f.upgrader.Upgrade(w, r, http.Header{"dg-request-id": {reqID}})
	if err != nil {
		f.record(rec, func(c *DeepgramFakeConn) { c.Status, c.Closed = http.StatusBadRequest, time.Now() })
		return
	}
	f.mu.Lock()
	rec.Status = http.StatusSwitchingProtocols
	f.live[conn] = struct{}{}
	f.mu.Unlock()
	sess := &dgFakeSession{f: f, rec: rec, conn: conn, p: p, finalDelay: o.FinalDelay}
	sess.serve()
	f.mu.Lock()
	delete(f.live, conn)
	rec.Closed = time.Now()
	f.mu.Unlock()
	conn.Close()
}

// dgFakeOut is one queued server message.
type dgFakeOut struct {
	at        time.Time
	kind      string
	data      []byte
	closeCode int
}

// dgFakeSession is one upgraded connection. The handler goroutine reads and analyses; one
// writer goroutine sends queued messages at their due time, in order.
type dgFakeSession struct {
	f          *DeepgramFake
	rec        *DeepgramFakeConn
	conn       *websocket.Conn
	p          dgFakeParams
	finalDelay time.Duration

	out    chan dgFakeOut
	lastAt time.Time

	// analysis state (reader goroutine)
	win         int
	acc         []int16
	t           int64 // samples analysed
	inSpeech    bool
	uttStart    int64
	lastVoiced  int64
	lastInterim int64
	interims    int
	line        int
	pendingLine string
	ueArmed     bool
	finalDue    bool // speech heard since the last final
	drop        bool
}

func (s *dgFakeSession) serve() {
	s.out = make(chan dgFakeOut, 1024)
	s.win = s.p.rate / 100
	stopW := make(chan struct{})
	wdone := make(chan struct{})
	go s.writer(stopW, wdone)
	graceful := s.readLoop()
	if graceful {
		close(s.out)
	} else {
		close(stopW)
	}
	<-wdone
}

// writer sends queued messages when due; a message with closeCode ends the connection.
func (s *dgFakeSession) writer(stop, done chan struct{}) {
	defer close(done)
	for {
		var m dgFakeOut
		var ok bool
		select {
		case m, ok = <-s.out:
			if !ok {
				return
			}
		case <-stop:
			return
		}
		if !audioWaitUntil(context.Background(), stop, m.at) {
			return
		}
		s.conn.SetWriteDeadline(time.Now().Add(5 * time.Second))
		if m.closeCode != 0 {
			s.conn.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(m.closeCode, string(m.data)), time.Now().Add(time.Second))
			s.f.record(s.rec, func(c *DeepgramFakeConn) { c.CloseCode = m.closeCode })
			return
		}
		if err := s.conn.WriteMessage(websocket.TextMessage, m.data); err != nil {
			return
		}
		s.f.record(s.rec, func(c *DeepgramFakeConn) { c.Sent = append(c.Sent, m.kind) })
	}
}

// send queues v (marshalled) to leave after delay, never before earlier messages.
func (s *dgFakeSession) send(kind string, v any, delay time.Duration) {
	b, err := json.Marshal(v)
	if err != nil {
		return
	}
	s.enqueue(dgFakeOut{kind: kind, data: b}, delay)
}

func (s *dgFakeSession) enqueue(m dgFakeOut, delay time.Duration) {
	m.at = time.Now().Add(delay)
	if m.at.Before(s.lastAt) {
		m.at = s.lastAt
	}
	s.lastAt = m.at
	select {
	case s.out <- m:
	default: // a client this far behind is not worth modelling
	}
}

// readLoop reads client messages until the stream ends. It reports whether the end was
// graceful (queued messages must still go out).
func (s *dgFakeSession) readLoop() bool {
	for {
		s.conn.SetReadDeadline(time.Now().Add(s.p.idle))
		mt, data, err := s.conn.ReadMessage()
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				s.enqueue(dgFakeOut{kind: "close", closeCode: websocket.CloseInternalServerErr, data: []byte("NET-0001")}, 0)
				return true
			}
			return false
		}
		switch mt {
		case websocket.BinaryMessage:
			s.f.record(s.rec, func(c *DeepgramFakeConn) { c.AudioMessages++; c.AudioBytes += int64(len(data)) })
			s.audio(data)
			if s.drop {
				s.f.record(s.rec, func(c *DeepgramFakeConn) { c.Dropped = true })
				s.conn.NetConn().Close()
				return false
			}
		case websocket.TextMessage:
			var m struct {
				Type string `json:"type"`
			}
			kind := "invalid"
			if json.Unmarshal(data, &m) == nil && m.Type != "" {
				kind = m.Type
			}
			s.f.record(s.rec, func(c *DeepgramFakeConn) { c.Messages = append(c.Messages, kind) })
			switch kind {
			case "KeepAlive":
			case "Finalize":
				s.finalize(false, true)
			case "CloseStream":
				s.finalize(false, false)
				s.metadata()
				s.enqueue(dgFakeOut{kind: "close", closeCode: websocket.CloseNormalClosure}, 0)
				return true
			default:
				s.enqueue(dgFakeOut{kind: "close", closeCode: websocket.CloseUnsupportedData, data: []byte("DATA-0000")}, 0)
				return true
			}
		}
	}
}

// audio decodes one message and analyses it in 10 ms windows.
func (s *dgFakeSession) audio(b []byte) {
	if s.p.mulaw {
		for _, u := range b {
			s.sample(audioMulawToLinear(u))
		}
		return
	}
	for i := 0; i+1 < len(b); i += 2 {
		s.sample(int16(uint16(b[i]) | uint16(b[i+1])<<8))
	}
}

func (s *dgFakeSession) sample(v int16) {
	s.acc = append(s.acc, v)
	if len(s.acc) < s.win {
		return
	}
	voiced := audioRMS(s.acc) >= s.p.threshold
	s.acc = s.acc[:0]
	start := s.t
	s.t += int64(s.win)
	s.window(start, s.t, voiced)
}

func (s *dgFakeSession) dur(samples int64) time.Duration {
	return time.Duration(samples * int64(time.Second) / int64(s.p.rate))
}

func (s *dgFakeSession) sec(samples int64) float64 { return float64(samples) / float64(s.p.rate) }

// window advances the utterance state machine by one analysis window [start, end).
func (s *dgFakeSession) window(start, end int64, voiced bool) {
	if voiced {
		if !s.inSpeech {
			s.inSpeech, s.finalDue = true, true
			s.uttStart, s.lastInterim, s.interims = start, start, 0
			s.ueArmed = false
			if s.pendingLine == "" {
				s.pendingLine = s.p.script[s.line%len(s.p.script)]
				s.line++
				s.f.record(s.rec, func(c *DeepgramFakeConn) { c.Utterances++ })
			}
			if s.p.vad {
				s.send("SpeechStarted", map[string]any{"type": "SpeechStarted", "channel": []int{0}, "timestamp": s.sec(start)}, 0)
			}
		}
		s.lastVoiced = end
		if s.p.interim && s.dur(end-s.lastInterim) >= s.p.interimEvery {
			s.interims++
			s.lastInterim = end
			words := strings.Fields(s.pendingLine)
			k := min(s.interims, max(len(words)-1, 1))
			s.send("Results", s.results(strings.Join(words[:min(k, len(words))], " "), s.uttStart, end, false, false, false), 0)
		}
		if s.f.drops.Load() > 0 && s.dur(end-s.uttStart) >= s.p.dropAfter {
			if s.f.drops.Add(-1) >= 0 {
				s.drop = true
			} else {
				s.f.drops.Add(1)
			}
		}
		return
	}
	silence := s.dur(end - s.lastVoiced)
	if s.inSpeech {
		switch {
		case s.p.endpointing > 0 && silence >= s.p.endpointing:
			s.final(true, false)
		case s.p.endpointing == 0 && silence >= min(300*time.Millisecond, max(s.p.utteranceEnd, 10*time.Millisecond)):
			s.final(false, false)
		}
	}
	if s.ueArmed && s.p.utteranceEnd > 0 && silence >= s.p.utteranceEnd {
		s.ueArmed = false
		s.send("UtteranceEnd", map[string]any{"type": "UtteranceEnd", "channel": []int{0, 1}, "last_word_end": s.sec(s.lastVoiced)}, s.finalDelay)
	}
}

// final sends the utterance's final Results after the recogniser latency.
func (s *dgFakeSession) final(speechFinal, fromFinalize bool) {
	s.inSpeech = false
	if !s.finalDue {
		return
	}
	s.finalDue = false
	s.ueArmed = s.p.utteranceEnd > 0
	s.send("Results", s.results(s.pendingLine, s.uttStart, s.lastVoiced, true, speechFinal, fromFinalize), s.finalDelay)
	s.pendingLine = ""
}

// finalize flushes an utterance in progress (Finalize or CloseStream).
func (s *dgFakeSession) finalize(speechFinal, fromFinalize bool) {
	if s.finalDue {
		s.final(speechFinal, fromFinalize)
	}
}

func (s *dgFakeSession) metadata() {
	s.send("Metadata", map[string]any{
		"type": "Metadata", "transaction_key": "deprecated", "request_id": s.p.requestID,
		"sha256": strings.Repeat("0", 64), "created": time.Now().UTC().Format(time.RFC3339Nano),
		"duration": s.sec(s.t), "channels": 1,
	}, s.finalDelay)
}

type dgFakeWord struct {
	Word           string  `json:"word"`
	Start          float64 `json:"start"`
	End            float64 `json:"end"`
	Confidence     float64 `json:"confidence"`
	PunctuatedWord string  `json:"punctuated_word"`
}

// results builds a Results message in the documented shape.
func (s *dgFakeSession) results(text string, from, to int64, isFinal, speechFinal, fromFinalize bool) map[string]any {
	fields := strings.Fields(text)
	words := make([]dgFakeWord, len(fields))
	span := s.sec(to - from)
	for i, w := range fields {
		a := s.sec(from) + span*float64(i)/float64(len(fields))
		b := s.sec(from) + span*float64(i+1)/float64(len(fields))
		words[i] = dgFakeWord{Word: strings.ToLower(w), Start: a, End: b, Confidence: 0.98, PunctuatedWord: w}
	}
	return map[string]any{
		"type":          "Results",
		"channel_index": []int{0, 1},
		"duration":      span,
		"start":         s.sec(from),
		"is_final":      isFinal,
		"speech_final":  speechFinal,
		"from_finalize": fromFinalize,
		"channel": map[string]any{"alternatives": []map[string]any{{
			"transcript": text, "confidence": 0.98, "words": words,
		}}},
		"metadata": map[string]any{
			"request_id": s.p.requestID,
			"model_info": map[string]string{"name": s.p.model, "version": "fake", "arch": s.p.model},
			"model_uuid": "00000000-0000-0000-0000-000000000000",
		},
	}
}

// Forget drops the records of the connections so far (a soak's fakes would otherwise grow
// with every call); connections still open keep recording into records no longer listed.
func (f *DeepgramFake) Forget() {
	f.mu.Lock()
	f.conns = nil
	f.mu.Unlock()
}
