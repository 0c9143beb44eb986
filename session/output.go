package session

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/parley-voice/parley/media"
)

// output wraps the pacer toward the port. It counts the samples queued and sent so the loop
// knows what the caller has heard, and reports the first frame of each watched utterance and
// the moment the queue catches up with an utterance's end.
type output struct {
	c     *Conversation
	port  AudioPort
	pacer *media.Pacer

	mu      sync.Mutex // serializes enqueue against flush
	enq     int64      // samples accepted by the pacer (flushed ones subtracted)
	minUtt  int        // utterances below this id were cancelled: their audio is refused
	sent    atomic.Int64
	target  atomic.Int64 // notify the loop when sent reaches this (0: none)
	watchMu sync.Mutex
	watches [8]firstWatch

	// The speaker waits for room in a full queue (waitRoom): room gets a value once sent
	// reaches roomAt (0: nobody waits). roomStep is half the queue, so a waiting speaker wakes
	// once per half queue rather than once per frame.
	roomAt   atomic.Int64
	room     chan struct{}
	roomStep int64

	detach func() // takes the pacer off the shared clock
	once   sync.Once
}

type firstWatch struct {
	utt int
	at  int64 // sample index of the utterance's first sample
}

// newOutput paces the agent's audio on clock (nil: the process's shared media clock): the
// first frame of new audio goes out at once, the next ones at the clock's 20 ms ticks.
func newOutput(c *Conversation, port AudioPort, queueFrames int, clock *media.Clock) *output {
	o := &output{c: c, port: port, room: make(chan struct{}, 1),
		roomStep: int64(max(1, queueFrames/2) * media.SamplesPerFrame(media.PipelineRate))}
	p, err := media.NewPacer(media.PacerOptions{Sink: o.sink, Rate: media.PipelineRate, Queue: queueFrames})
	if err != nil {
		panic(err) // options are fixed and valid
	}
	o.pacer = p
	if clock == nil {
		clock = media.SharedClock()
	}
	o.detach = clock.Add(p)
	return o
}

// sink runs with the pacer locked, on the clock's goroutine (or the writer's, for the first
// frame of new audio): count, report, hand to the port.
func (o *output) sink(f *media.Frame) {
	before := o.sent.Load()
	after := o.sent.Add(int64(f.N))
	o.watchMu.Lock()
	for i := range o.watches {
		w := &o.watches[i]
		if w.utt != 0 && w.at >= before && w.at < after {
			o.notify(spkEvent{kind: spkFirstFrameOut, utt: w.utt, at: o.c.now()})
			w.utt = 0
		}
	}
	o.watchMu.Unlock()
	if t := o.target.Load(); t > 0 && after >= t && o.target.CompareAndSwap(t, 0) {
		o.notify(spkEvent{kind: spkPlayed})
	}
	if t := o.roomAt.Load(); t > 0 && after >= t && o.roomAt.CompareAndSwap(t, 0) {
		select {
		case o.room <- struct{}{}:
		default:
		}
	}
	o.c.taps.agent(f)
	o.port.SendFrame(f)
}

// maxLiveBacklog bounds the audio queued from a live source (a human during a takeover): two
// 20 ms clocks (the human's leg and the pacer) drift and burst, and a backlog would add delay
// for the rest of the call, so frames beyond it are dropped instead.
const maxLiveBacklog = 100 * time.Millisecond

// writeRaw queues a human's audio during a takeover; what does not fit is dropped.
func (o *output) writeRaw(pcm []int16) {
	if o.pacer.Pending() > maxLiveBacklog {
		return
	}
	o.mu.Lock()
	n := o.pacer.WritePCM(pcm)
	o.enq += int64(n)
	o.mu.Unlock()
}

func (o *output) notify(ev spkEvent) {
	select {
	case o.c.spkCh <- ev:
	default:
	}
}

// write queues pcm of utterance utt; it returns how many samples were taken (0 when the
// utterance was cancelled or the queue is full). first marks the utterance's first samples.
func (o *output) write(utt int, pcm []int16, first bool) (int, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if utt < o.minUtt {
		return 0, false
	}
	if first {
		o.watchMu.Lock()
		for i := range o.watches {
			if o.watches[i].utt == 0 {
				o.watches[i] = firstWatch{utt: utt, at: o.enq}
				break
			}
		}
		o.watchMu.Unlock()
	}
	n := o.pacer.WritePCM(pcm)
	o.enq += int64(n)
	return n, true
}

// waitRoom waits, once a write found the queue full, until half of the queue has been sent (or
// all of it, when less is queued), so that the speaker refills it in one go; it reports false
// if ctx ends first. The wait follows the pacer's clock, whatever it is: no timer of its own.
func (o *output) waitRoom(ctx context.Context) bool {
	select {
	case <-o.room: // a wake-up left over from a wait that ended with ctx
	default:
	}
	o.mu.Lock()
	at := min(o.sent.Load()+o.roomStep, o.enq)
	o.mu.Unlock()
	o.roomAt.Store(at)
	if o.sent.Load() >= at && o.roomAt.CompareAndSwap(at, 0) {
		return true // sent already (the sink may have passed at before it was stored)
	}
	select {
	case <-o.room:
		return true
	case <-ctx.Done():
		o.roomAt.CompareAndSwap(at, 0)
		return false
	}
}

// finish pads the end of an utterance with silence to a whole frame, so it plays at once and
// the samples counted as queued and as sent stay equal (the pacer's own padding is not counted).
func (o *output) finish(utt int) {
	var zero [media.MaxFrameSamples]int16
	n := int64(media.SamplesPerFrame(media.PipelineRate))
	o.mu.Lock()
	defer o.mu.Unlock()
	if utt < o.minUtt {
		return
	}
	if rem := o.enq % n; rem != 0 {
		o.enq += int64(o.pacer.WritePCM(zero[:n-rem]))
	}
	o.pacer.Finish()
}

// queued returns the sample index just after everything queued so far.
func (o *output) queued() int64 {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.enq
}

// flush drops the queued audio and refuses any more from utterances up to now.
func (o *output) flush() {
	o.mu.Lock()
	defer o.mu.Unlock()
	_, samples := o.pacer.Flush()
	o.enq -= int64(samples)
	o.minUtt = o.c.uttSeq + 1
	o.watchMu.Lock()
	for i := range o.watches {
		o.watches[i].utt = 0
	}
	o.watchMu.Unlock()
}

// sentFrames returns how many samples the caller has been sent.
func (o *output) sentFrames() int64 { return o.sent.Load() }

// watchPlayed asks for a spkPlayed event once end samples have been sent (now if they have).
func (o *output) watchPlayed(end int64) {
	o.target.Store(end)
	if o.sent.Load() >= end && o.target.CompareAndSwap(end, 0) {
		o.notify(spkEvent{kind: spkPlayed})
	}
}

// close stops the output: once it returns, nothing more reaches the port (queued audio is
// dropped; a tick already under way has finished, since Flush waits for the pacer's lock).
func (o *output) close() {
	o.once.Do(func() {
		o.detach()
		o.pacer.Flush()
	})
}
