package webrtc

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/parley-voice/parley/media"
	"github.com/parley-voice/parley/session"
	pion "github.com/pion/webrtc/v4"
)

// listener is the SFU side of a page that listens to a live conversation (any channel: a web
// call or a phone call) and, with a takeover token, speaks instead of the agent.
//
// A pure listener of a web call that asks for split tracks gets the call's own packets, as they
// are (no transcoding): the caller's Opus as the browser sent it and the agent's as the service
// encoded it. Every other listener is fed from a session.Tap: the two sides' 16 kHz frames are
// queued, then every 20 ms mixed into one track (mixed) or sent on two (split), Opus-encoded
// once per listener. During a takeover the human's page does not get the agent side back (it is
// their own voice).
type listener struct {
	p     *peer
	lc    *liveConv
	split bool

	senders   []*audioSender // tap-fed tracks: [mix] or [caller, agent]
	mixer     *media.Mixer
	caller    frameRing
	agent     frameRing
	removeTap func()

	mu     sync.Mutex // serializes takeover start and end
	tk     atomic.Pointer[session.Takeover]
	closed bool
}

func newListener(p *peer, lc *liveConv, split bool) *listener {
	return &listener{p: p, lc: lc, split: split}
}

// receive returns how many audio tracks the page should expect.
func (l *listener) receive() int {
	if l.split {
		return 2
	}
	return 1
}

// addTracks adds the listener's tracks to its connection (at the first offer).
func (l *listener) addTracks(pc *pion.PeerConnection) error {
	if l.split && l.p.role == roleListener && l.lc.call != nil {
		call := l.lc.call
		if ct, at := call.callerForwardTrack(), call.agentTrack.Load(); ct != nil && at != nil {
			for _, t := range []pion.TrackLocal{ct, at} {
				rs, err := pc.AddTrack(t)
				if err != nil {
					return err
				}
				l.p.spawn(func() { drainRTCP(rs) })
			}
			return nil
		}
	}
	ids := []string{"mix"}
	if l.split {
		ids = []string{"caller", "agent"}
	}
	for _, id := range ids {
		t, err := pion.NewTrackLocalStaticRTP(l.p.codec.parameters().RTPCodecCapability, id, "parley")
		if err != nil {
			return err
		}
		rs, err := pc.AddTrack(t)
		if err != nil {
			return err
		}
		s, err := newAudioSender(audioSenderOptions{Codec: l.p.codec, Track: t, OpusBitrate: l.p.svc.opts.OpusBitrate, OpusRate: l.p.svc.opts.OpusEncodeRate, OpusComplexity: l.p.svc.opts.OpusComplexity, OpusApplication: l.p.svc.opts.OpusApplication})
		if err != nil {
			return err
		}
		l.senders = append(l.senders, s)
		l.p.spawn(func() { drainRTCP(rs) })
	}
	m, err := media.NewMixer(media.MixerOptions{Limiter: true})
	if err != nil {
		return err
	}
	l.mixer = m
	l.mu.Lock()
	if !l.closed {
		l.removeTap = l.lc.conv.AddTap(l)
	}
	l.mu.Unlock()
	l.p.spawn(func() { l.pump(l.p.ctx) })
	return nil
}

// CallerFrame implements session.Tap.
func (l *listener) CallerFrame(f *media.Frame) { l.caller.Put(f) }

// AgentFrame implements session.Tap.
func (l *listener) AgentFrame(f *media.Frame) { l.agent.Put(f) }

// pump sends what the taps queued, every 20 ms.
func (l *listener) pump(ctx context.Context) {
	t := time.NewTicker(media.FrameDuration)
	defer t.Stop()
	var cf, af, out media.Frame
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		hasC := l.caller.Get(&cf)
		hasA := l.agent.Get(&af)
		if hasA && l.tk.Load() != nil {
			hasA = false // the human's own voice: not sent back to them
		}
		if l.split {
			if hasC {
				_ = l.senders[0].Write(&cf)
			}
			if hasA {
				_ = l.senders[1].Write(&af)
			}
			continue
		}
		switch {
		case hasC && hasA:
			if l.mixer.MixFrames(&out, &cf, &af) == nil {
				_ = l.senders[0].Write(&out)
			}
		case hasC:
			_ = l.senders[0].Write(&cf)
		case hasA:
			_ = l.senders[0].Write(&af)
		}
	}
}

// setTakeover starts (on) or ends a takeover.
func (l *listener) setTakeover(on bool) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return errors.New("the page has left")
	}
	cur := l.tk.Load()
	if on {
		if cur != nil {
			return nil
		}
		tk, err := l.lc.conv.StartTakeover()
		if err != nil {
			return err
		}
		l.tk.Store(tk)
		return nil
	}
	if cur != nil {
		l.tk.Store(nil)
		cur.End()
	}
	return nil
}

// humanFrame sends the takeover page's microphone to the caller while a takeover runs.
func (l *listener) humanFrame(f *media.Frame) {
	if tk := l.tk.Load(); tk != nil {
		tk.Send(f)
	}
}

// close removes the tap and hands the conversation back if it was taken over.
func (l *listener) close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return
	}
	l.closed = true
	if l.removeTap != nil {
		l.removeTap()
	}
	if tk := l.tk.Swap(nil); tk != nil {
		tk.End()
	}
	for _, s := range l.senders {
		_ = s.Close()
	}
}

var _ session.Tap = (*listener)(nil)
