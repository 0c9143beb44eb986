package runtime

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/parley-voice/parley/internal/private"

	"github.com/parley-voice/parley/control/store"
	"github.com/parley-voice/parley/media"
	"github.com/parley-voice/parley/session"
)

// Dialer places phone calls: the SIP service of a media node (see SIPDialer).
type Dialer interface {
	// HasTrunk reports whether calls can go out through the named trunk ("" names the
	// default one).
	HasTrunk(name string) bool
	// Dial places a call and returns once it is answered and its conversation started, or
	// with an error: a *DialFailure says how the attempt ended.
	Dial(ctx context.Context, r DialRequest) error
}

// DialRequest is one outbound phone call.
type DialRequest struct {
	ID       string // the conversation's id
	From, To string // E.164
	Trunk    string // the trunk's name; "" the default
	// Conversation builds the conversation's engine once the callee answers; the dialer starts
	// it on the call (StartVoice) and ends it when the call ends.
	Conversation func(ctx context.Context, port session.AudioPort) (*session.Conversation, error)
	// OnRinging is called when the callee's phone rings (it must not block).
	OnRinging func()
	// OnRedirect is called for each 3xx step of the dial (issue 21); it may block briefly.
	OnRedirect func(Redirect)
	// Tap receives the call's audio, both ways (for the recording); it runs on the media path.
	Tap func(fromCaller bool, f *media.Frame)
	// issue 15: RingTimeout ends an unanswered call (0: the dialler's default); AMD, when set,
	// runs answering-machine detection on the answer.
	RingTimeout time.Duration
	AMD         *AMD
	// TransferAllow is the organization's transfer allow-list (issue 22 item 7), as in
	// InboundPlan.
	TransferAllow []string
	// OnHangup is told how an answered call's leg ended (issue 22 item 4: the callee's BYE and
	// its Reason, a media timeout…), before its conversation is ended; it must not block.
	OnHangup func(store.CallOutcome)
}

// AMD is the answering-machine detection of a call: on a machine, hang up, or wait for the
// beep and say Message; either way the call ends as voicemail.
type AMD struct {
	LeaveMessage bool   `json:"leave_message,omitempty"`
	Message      string `json:"message,omitempty"`
}

// DialFailure is how a call attempt ended without an answer.
type DialFailure struct {
	Reason      session.EndReason // no_answer, busy, invalid_number, failed
	Unreachable bool              // the trunk never answered
	Detail      string
	// Outcome is what the conversation records of it: the SIP status, the Q.850 cause and a
	// short detail written for a person.
	Outcome store.CallOutcome
}

func (e *DialFailure) Error() string {
	s := "runtime: the call was not answered: " + string(e.Reason)
	if e.Detail != "" {
		s += " (" + e.Detail + ")"
	}
	return s
}

// PlaceRequest asks a media node to run a call stored pending.
type PlaceRequest struct {
	ConversationID store.ConversationID `json:"conversation_id"`
	// Trunk carries a phone call (the trunk of the number it is made from).
	Trunk string `json:"trunk,omitempty"`
	// Lines are what the simulated other side of a test call says, one line per turn; nil
	// gives an outbound test call's callee its default lines.
	Lines []string `json:"lines,omitempty"`
	// issue 15: a campaign call's ring timeout and answering-machine detection.
	RingTimeoutMS int64 `json:"ring_timeout_ms,omitempty"`
	AMD           *AMD  `json:"amd,omitempty"`
}

// DefaultCalleeLines are what the simulated callee of an outbound test call says.
var DefaultCalleeLines = []string{"Hello?", "Yes, now is a good time.", "Thank you, goodbye."}

// fastFail is how long a media node waits for a dial to fail at once (the trunk refused the
// connection) before it reports the call as taken.
const fastFail = 1500 * time.Millisecond

// Place runs a call stored pending on a media node (this one when it has the role): a phone
// call through the node's dialer, or, in test mode, a simulated call that needs no media (it
// runs here when no node has the role). It returns once the node has taken the call: ErrNoMedia
// when no node runs the media role, ErrNoTrunk when the node has no trunk, ErrUnreachable when
// the node or the trunk did not answer. How the call then goes is recorded in the store.
func (rt *Runtime) Place(ctx context.Context, mode store.Mode, req PlaceRequest) error {
	node, err := rt.mediaNode()
	if err != nil {
		if mode != store.ModeTest {
			return err
		}
		node = rt.o.NodeID // a test call needs no media
	}
	ctx, cancel := context.WithTimeout(ctx, fastFail+5*time.Second)
	defer cancel()
	_, err = rt.mesh.call(ctx, node, kindPlace, req, nil)
	return err
}

// mediaNode picks the node to run a call: this one when it has the media role, else one of
// the others at random.
func (rt *Runtime) mediaNode() (string, error) {
	if rt.o.Media {
		return rt.o.NodeID, nil
	}
	var nodes []string
	if rt.o.MediaNodes != nil {
		nodes = rt.o.MediaNodes()
	}
	if len(nodes) == 0 {
		return "", ErrNoMedia
	}
	return nodes[rand.IntN(len(nodes))], nil
}

func (rt *Runtime) handlePlace(ctx context.Context, body json.RawMessage, reply func(any, bool, error)) {
	var req PlaceRequest
	if err := json.Unmarshal(body, &req); err != nil {
		reply(nil, true, fmt.Errorf("%w: %v", ErrBadRequest, err))
		return
	}
	c, err := rt.store.GetConversation(ctx, req.ConversationID)
	if err != nil {
		reply(nil, true, err)
		return
	}
	if c.Mode == store.ModeTest {
		l, err := rt.register(ctx, c)
		if err != nil {
			reply(nil, true, err)
			return
		}
		lines := req.Lines
		if lines == nil && c.Direction == "outbound" {
			lines = DefaultCalleeLines
		}
		l.simulated.Store(true)
		reply(nil, true, nil)
		rt.simulate(l, lines)
		return
	}
	switch {
	case rt.o.Dialer == nil || !rt.o.Media:
		reply(nil, true, ErrNoMedia)
		return
	case !rt.o.Dialer.HasTrunk(req.Trunk):
		reply(nil, true, fmt.Errorf("%w: no trunk %q on node %s", ErrNoTrunk, req.Trunk, rt.o.NodeID))
		return
	}
	l, err := rt.register(ctx, c)
	if err != nil {
		reply(nil, true, err)
		return
	}
	failed := make(chan error, 1)
	rt.wg.Add(1)
	go func() {
		defer rt.wg.Done()
		failed <- rt.dial(l, req)
	}()
	t := time.NewTimer(fastFail)
	defer t.Stop()
	select {
	case err := <-failed:
		var df *DialFailure
		if errors.As(err, &df) && df.Unreachable {
			reply(nil, true, fmt.Errorf("%w: %s", ErrUnreachable, df.Error()))
			return
		}
	case <-t.C:
	}
	reply(nil, true, nil)
}

// dial places a live phone call and runs it; it returns the dial's error (nil once answered).
func (rt *Runtime) dial(l *live, req PlaceRequest) error {
	c := l.conv
	var rec atomic.Pointer[media.Recorder] // set on answer, read on the media path
	dr := DialRequest{
		ID: string(c.ID), From: c.FromNumber, To: c.ToNumber, Trunk: req.Trunk,
		RingTimeout: time.Duration(req.RingTimeoutMS) * time.Millisecond, AMD: req.AMD,
		OnRinging:  func() { l.p.status(store.ConvRinging) },
		OnHangup:   func(o store.CallOutcome) { l.p.outcome(o) },
		OnRedirect: func(r Redirect) { rt.redirected(l, r) },
		Conversation: func(ctx context.Context, port session.AudioPort) (*session.Conversation, error) {
			var sink session.Sink = l.p
			if rt.o.WebCalls != nil {
				sink = rt.o.WebCalls.Sink(string(c.ID), l.p)
			}
			sess, err := rt.build(ctx, c, true, sink)
			if err != nil {
				return nil, err
			}
			l.setEngine(sess, false)
			if r := rt.startRecording(l, sess); r != nil {
				rec.Store(r)
			}
			return sess, nil
		},
	}
	dr.Tap = recordingTap(&rec)
	// issue 22 item 7: the organization's transfer allow-list; without it (the store did not
	// answer) the call's transfers go by the node's and the trunk's lists alone, which refuse more.
	if org, err := rt.store.GetOrg(l.ctx, c.OrgID); err == nil {
		dr.TransferAllow = org.TransferAllow
	}
	err := rt.o.Dialer.Dial(l.ctx, dr)
	if err != nil {
		reason := session.EndFailed
		var df *DialFailure
		if errors.As(err, &df) && df.Reason != "" {
			reason = df.Reason
		}
		if df != nil {
			l.p.outcome(df.Outcome)
		}
		if l.stopped.Load() {
			reason = session.EndAPI
		}
		rt.log.Info("call: not answered", "conversation", c.ID, "reason", reason, "err", err)
		if sess := l.engine(); sess != nil && sess.EndReason() == "" {
			sess.End(reason)
		} else {
			l.p.end(reason, session.Cost{})
		}
		return err
	}
	l.p.status(store.ConvInProgress)
	if sess := l.engine(); sess != nil && rt.o.WebCalls != nil {
		rt.listenable(l, sess)
	}
	return nil
}

// startRecording records a voice conversation into <data>/recordings/<id>.wav; the file is
// named on the conversation once it is complete, with its end when it is closed in time. It returns nil when recording is impossible
// (the call goes on without).
func (rt *Runtime) startRecording(l *live, sess *session.Conversation) *media.Recorder {
	if rt.o.DataDir == "" || rt.o.NoRecording {
		return nil
	}
	rel := filepath.ToSlash(filepath.Join("recordings", string(l.conv.ID)+".wav"))
	abs := filepath.Join(rt.o.DataDir, filepath.FromSlash(rel))
	if err := private.MkdirAll(filepath.Dir(abs)); err != nil {
		rt.log.Warn("recording: cannot make its directory", "err", err)
		return nil
	}
	rec, err := media.CreateRecorder(l.ctx, abs, media.RecorderOptions{Format: media.RecordWAV})
	if err != nil {
		rt.log.Warn("recording: cannot start", "conversation", l.conv.ID, "err", err)
		return nil
	}
	sess.AddTap(session.HoldRecorder{Rec: rec}) // paused while the call is on hold
	l.p.recordingStarted()
	rt.wg.Add(1)
	go func() {
		defer rt.wg.Done()
		<-sess.Done()
		if err := rec.Close(); err != nil {
			rt.log.Warn("recording: incomplete", "conversation", l.conv.ID, "err", err)
		}
		if l.p.recordingDone(rel) {
			return // named with the end (issue 20)
		}
		ctx, cancel := context.WithTimeout(context.WithoutCancel(rt.ctx), 5*time.Second)
		defer cancel()
		if err := rt.store.SetConversationRecording(ctx, l.conv.ID, rel); err != nil {
			rt.log.Warn("recording: cannot name it on the conversation", "conversation", l.conv.ID, "err", err)
		}
	}()
	return rec
}

// CanPlace reports whether some node of the deployment takes live calls (ErrNoMedia when
// none runs the media role).
func (rt *Runtime) CanPlace() error {
	_, err := rt.mediaNode()
	return err
}

// recordingTap feeds a call's frames, both ways, to the recorder once there is one. It runs on
// the media path: an atomic load and the recorder's non-blocking write, nothing allocated.
func recordingTap(rec *atomic.Pointer[media.Recorder]) func(fromCaller bool, f *media.Frame) {
	return func(fromCaller bool, f *media.Frame) {
		r := rec.Load()
		if r == nil {
			return
		}
		if fromCaller {
			r.WriteFrame(media.RecordCaller, f)
		} else {
			r.WriteFrame(media.RecordAgent, f)
		}
	}
}

// listenable makes a phone conversation available to listen-in and takeover until it ends.
func (rt *Runtime) listenable(l *live, sess *session.Conversation) {
	unregister := rt.o.WebCalls.Register(sess)
	rt.wg.Add(1)
	context.AfterFunc(l.ctx, func() { // no goroutine waits for the call's whole life
		defer rt.wg.Done()
		unregister()
	})
}
