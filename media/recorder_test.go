package media

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/parley-voice/parley/codec"
	"github.com/parley-voice/parley/internal/testenv"
	"github.com/parley-voice/parley/media/mediatest"
)

// recClock is a manual clock safe to read from the recorder's callers.
type recClock struct{ ns atomic.Int64 }

func (c *recClock) Now() time.Time          { return time.Unix(0, c.ns.Load()) }
func (c *recClock) Advance(d time.Duration) { c.ns.Add(int64(d)) }

// callAudio writes a call to r: the caller speaks a 440 Hz tone throughout, the agent a 1 kHz
// tone from agentFrom to agentTo; one frame each every 20 ms of the clock, with the given
// jitter pattern (added to the clock before each write, then taken back).
func callAudio(t testing.TB, r *Recorder, clk *recClock, frames, agentFrom, agentTo int, jitter []time.Duration) {
	t.Helper()
	caller := mediatest.NewTone(440, -12, 16000)
	agent := mediatest.NewTone(1000, -12, 16000)
	buf := make([]int16, 320)
	for i := range frames {
		j := time.Duration(0)
		if len(jitter) > 0 {
			j = jitter[i%len(jitter)]
		}
		clk.Advance(j)
		caller.Fill(buf)
		if !r.Write(RecordCaller, buf) {
			t.Fatalf("caller frame %d dropped", i)
		}
		if i >= agentFrom && i < agentTo {
			agent.Fill(buf)
			if !r.Write(RecordAgent, buf) {
				t.Fatalf("agent frame %d dropped", i)
			}
		}
		clk.Advance(FrameDuration - j)
	}
}

func waitUntil(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// soxDuration returns what `sox --i -D` reports for path.
func soxDuration(t *testing.T, path string) float64 {
	t.Helper()
	sox := testenv.NeedCommand(t, "sox")
	out, err := exec.Command(sox, "--i", "-D", path).CombinedOutput()
	if err != nil {
		t.Fatalf("sox --i %s: %v: %s", path, err, out)
	}
	d, err := strconv.ParseFloat(strings.TrimSpace(string(out)), 64)
	if err != nil {
		t.Fatalf("sox --i -D said %q", out)
	}
	return d
}

// TestRecorderWAVStereoTimeline checks the channel layout and the alignment on the timeline:
// the agent's tone lands exactly where it was spoken, with silence around it, and scheduling
// jitter below the tolerance leaves no gaps.
func TestRecorderWAVStereoTimeline(t *testing.T) {
	path := filepath.Join(t.TempDir(), "call.wav")
	clk := &recClock{}
	r, err := CreateRecorder(context.Background(), path, RecorderOptions{Now: clk.Now, Queue: 400})
	if err != nil {
		t.Fatal(err)
	}
	jitter := []time.Duration{0, 3 * time.Millisecond, 19 * time.Millisecond, 7 * time.Millisecond, 0, 12 * time.Millisecond}
	callAudio(t, r, clk, 150, 50, 100, jitter) // 3 s; the agent speaks from 1 s to 2 s
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if err := r.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	w, err := mediatest.ReadWAV(path)
	if err != nil {
		t.Fatal(err)
	}
	if w.Rate != 16000 || w.Channels != 2 || len(w.Samples) != 2*150*320 {
		t.Fatalf("got %d Hz, %d channels, %d samples", w.Rate, w.Channels, len(w.Samples))
	}
	left, right := w.Channel(0), w.Channel(1)
	for seg := range 30 { // 100 ms segments
		l, r := left[seg*1600:(seg+1)*1600], right[seg*1600:(seg+1)*1600]
		if lv := mediatest.DetectTone(l, 16000, 440); math.Abs(lv+12) > 0.5 {
			t.Errorf("segment %d: caller tone at %.1f dBFS on the left, want -12", seg, lv)
		}
		if lv := mediatest.DetectTone(l, 16000, 1000); lv > -60 {
			t.Errorf("segment %d: agent tone leaks into the left at %.1f dBFS", seg, lv)
		}
		rv := mediatest.DetectTone(r, 16000, 1000)
		speaking := seg >= 10 && seg < 20
		if speaking && math.Abs(rv+12) > 0.5 || !speaking && !math.IsInf(rv, -1) {
			t.Errorf("segment %d: agent tone on the right at %.1f dBFS (speaking=%v)", seg, rv, speaking)
		}
	}
	// Exact placement: the agent's first sample is at 1.000 s.
	if right[16000-1] != 0 || right[16000] == 0 && right[16001] == 0 {
		t.Errorf("agent audio does not start at sample 16000: %v", right[15998:16003])
	}
	if st := r.Stats(); st.Frames != 200 || st.Dropped != 0 || st.Written != 3*time.Second || st.Durable != 3*time.Second {
		t.Errorf("stats %+v", st)
	}
	if got := soxDuration(t, path); math.Abs(got-3) > 0.001 {
		t.Errorf("sox reads %.3f s, want 3", got)
	}
}

// A gap longer than the tolerance is silence on the timeline; a burst is laid end to end.
func TestRecorderTimelineGapsAndBursts(t *testing.T) {
	clk := &recClock{}
	var f memFile
	r, err := NewRecorder(context.Background(), &f, RecorderOptions{Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	frame := func(v int16) []int16 {
		b := make([]int16, 320)
		for i := range b {
			b[i] = v
		}
		return b
	}
	// Caller: frames 1, 2 at slots 0, 1, then nothing for 300 ms, then frame 3 at slot 17.
	r.Write(RecordCaller, frame(1))
	clk.Advance(20 * time.Millisecond)
	r.Write(RecordCaller, frame(2))
	clk.Advance(320 * time.Millisecond)
	r.Write(RecordCaller, frame(3))
	// Agent: a burst of three frames at once at slot 17: they follow each other (17, 18, 19).
	r.Write(RecordAgent, frame(7))
	r.Write(RecordAgent, frame(8))
	r.Write(RecordAgent, frame(9))
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	w, err := mediatest.DecodeWAV(f.buf)
	if err != nil {
		t.Fatal(err)
	}
	left, right := w.Channel(0), w.Channel(1)
	at := func(ch []int16, slot int) int16 { return ch[slot*320+100] }
	wantL := map[int]int16{0: 1, 1: 2, 2: 0, 16: 0, 17: 3, 18: 0, 19: 0}
	wantR := map[int]int16{0: 0, 16: 0, 17: 7, 18: 8, 19: 9}
	if len(left) != 20*320 {
		t.Fatalf("%d samples per channel, want 20 frames", len(left))
	}
	for s, v := range wantL {
		if at(left, s) != v {
			t.Errorf("left slot %d = %d, want %d", s, at(left, s), v)
		}
	}
	for s, v := range wantR {
		if at(right, s) != v {
			t.Errorf("right slot %d = %d, want %d", s, at(right, s), v)
		}
	}
}

// TestRecorderCrashLeavesReadableWAV writes 3.5 s without closing (as if the process died) and
// reads the file while it is still open: the checkpoints make at least 3 s of it valid.
func TestRecorderCrashLeavesReadableWAV(t *testing.T) {
	testenv.NeedCommand(t, "sox")
	path := filepath.Join(t.TempDir(), "crash.wav")
	clk := &recClock{}
	r, err := CreateRecorder(context.Background(), path, RecorderOptions{Now: clk.Now, Queue: 400})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	callAudio(t, r, clk, 175, 0, 175, nil)
	waitUntil(t, "3 s durable", func() bool { return r.Stats().Durable >= 3*time.Second })
	got := soxDuration(t, path)
	t.Logf("open file after the 3 s checkpoint: sox reads %.3f s", got)
	if got < 3 || got > 3.5 {
		t.Errorf("sox reads %.3f s of the open file, want 3 to 3.5", got)
	}
	w, err := mediatest.ReadWAV(path)
	if err != nil {
		t.Fatalf("reading the open file: %v", err)
	}
	if lv := mediatest.DetectTone(w.Channel(0)[:16000], 16000, 440); math.Abs(lv+12) > 0.5 {
		t.Errorf("caller tone in the open file at %.1f dBFS", lv)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if got := soxDuration(t, path); math.Abs(got-3.5) > 0.001 {
		t.Errorf("closed file: sox reads %.3f s, want 3.5", got)
	}
}

// checkOggOpus validates the page structure and headers and decodes the audio at 16 kHz with
// the pre-skip removed and the end trimmed to the last granule position.
func checkOggOpus(t *testing.T, b []byte, wantEOS bool) []int16 {
	t.Helper()
	pages := parseOgg(t, b)
	if len(pages) < 3 {
		t.Fatalf("%d pages", len(pages))
	}
	if pages[0].flags != oggBOS || len(pages[0].packets) != 1 || len(pages[1].packets) != 1 {
		t.Fatalf("first pages: flags %x, %d and %d packets", pages[0].flags, len(pages[0].packets), len(pages[1].packets))
	}
	head := pages[0].packets[0]
	if len(head) != 19 || string(head[:8]) != "OpusHead" || head[8] != 1 || head[9] != 1 || head[18] != 0 {
		t.Fatalf("OpusHead %q", head)
	}
	preSkip := int(binary.LittleEndian.Uint16(head[10:]))
	if rate := binary.LittleEndian.Uint32(head[12:]); rate != 16000 {
		t.Errorf("OpusHead input rate %d", rate)
	}
	if tags := pages[1].packets[0]; string(tags[:8]) != "OpusTags" {
		t.Fatalf("OpusTags %q", tags)
	}
	dec, err := codec.NewOpusDecoder(16000)
	if err != nil {
		t.Fatal(err)
	}
	defer dec.Close()
	var pcm []int16
	buf := make([]int16, codec.OpusMaxFrame)
	last := int64(0)
	for i, p := range pages {
		if p.serial != pages[0].serial || p.seq != uint32(i) {
			t.Fatalf("page %d: serial %x seq %d", i, p.serial, p.seq)
		}
		if i >= 2 {
			if p.granule < last {
				t.Fatalf("page %d: granule %d goes back from %d", i, p.granule, last)
			}
			last = p.granule
			for _, pk := range p.packets {
				n, err := dec.Decode(buf, pk)
				if err != nil {
					t.Fatalf("page %d: decoding: %v", i, err)
				}
				pcm = append(pcm, buf[:n]...)
			}
		}
		if eos := p.flags&oggEOS != 0; eos != (wantEOS && i == len(pages)-1) {
			t.Errorf("page %d of %d: EOS flag %v", i, len(pages), eos)
		}
	}
	// Granule positions are at 48 kHz: trim to the last one, then drop the pre-skip.
	end := int(last / 3)
	if end > len(pcm) {
		t.Fatalf("last granule %d beyond the %d decoded samples", last, len(pcm)*3)
	}
	return pcm[preSkip/3 : end]
}

func TestRecorderOggOpus(t *testing.T) {
	path := filepath.Join(t.TempDir(), "call.opus")
	clk := &recClock{}
	r, err := CreateRecorder(context.Background(), path, RecorderOptions{Format: RecordOggOpus, Now: clk.Now, Queue: 400})
	if err != nil {
		t.Fatal(err)
	}
	callAudio(t, r, clk, 100, 50, 100, nil) // 2 s; the agent speaks in the second one
	waitUntil(t, "1 s durable", func() bool { return r.Stats().Durable >= time.Second })
	// Crash check: the open file decodes up to its last complete page.
	open, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if pcm := checkOggOpus(t, open, false); len(pcm) < 15000 {
		t.Errorf("open file decodes to %d samples, want at least ~1 s", len(pcm))
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	pcm := checkOggOpus(t, b, true)
	if len(pcm) != 32000 {
		t.Fatalf("decoded %d samples, want 32000 (2 s)", len(pcm))
	}
	// Mono mix: the caller's tone throughout, the agent's in the second half (codec delay and
	// onset aside, so skip 100 ms around the switch).
	first, second := pcm[1600:14400], pcm[17600:32000]
	for _, c := range []struct {
		name string
		pcm  []int16
		freq float64
		want bool
	}{{"caller 1st", first, 440, true}, {"agent 1st", first, 1000, false}, {"caller 2nd", second, 440, true}, {"agent 2nd", second, 1000, true}} {
		lv := mediatest.DetectTone(c.pcm, 16000, c.freq)
		if c.want && math.Abs(lv+12) > 2 || !c.want && lv > -40 {
			t.Errorf("%s: %.0f Hz at %.1f dBFS (want present=%v)", c.name, c.freq, lv, c.want)
		}
	}
	st := r.Stats()
	t.Logf("Ogg/Opus: %d bytes for 2 s (%.1f kbit/s)", st.Bytes, float64(st.Bytes)*8/2/1000)
	if st.Bytes != int64(len(b)) {
		t.Errorf("stats count %d bytes, file has %d", st.Bytes, len(b))
	}

	// Another implementation reads it too (and checks the CRCs).
	ffmpeg := testenv.NeedCommand(t, "ffmpeg")
	out, err := exec.Command(ffmpeg, "-v", "error", "-err_detect", "crccheck+explode", "-i", path,
		"-f", "s16le", "-ac", "1", "-ar", "16000", "-").Output()
	if err != nil {
		t.Fatalf("ffmpeg: %v", err)
	}
	if n := len(out) / 2; n < 31900 || n > 32100 {
		t.Errorf("ffmpeg decodes %d samples, want 32000", n)
	}
}

// failingFile fails every write after limit bytes, like a disk that fills up.
type failingFile struct {
	memFile
	limit int
}

func (f *failingFile) Write(b []byte) (int, error) {
	if f.pos+len(b) > f.limit {
		return 0, syscall.ENOSPC
	}
	return f.memFile.Write(b)
}

func TestRecorderDiskFull(t *testing.T) {
	for _, format := range []RecordFormat{RecordWAV, RecordOggOpus} {
		t.Run(format.String(), func(t *testing.T) {
			var calls atomic.Int32
			var reported error
			f := &failingFile{limit: 50_000}
			if format == RecordOggOpus {
				f.limit = 300 // Opus is compact: fail at the first checkpoint
			}
			clk := &recClock{}
			r, err := NewRecorder(context.Background(), f, RecorderOptions{
				Format: format, Now: clk.Now, BufferSize: 4096,
				OnError: func(err error) { calls.Add(1); reported = err },
			})
			if err != nil {
				t.Fatal(err)
			}
			buf := mediatest.Sine(320, 16000, 440, -6)
			deadline := time.Now().Add(10 * time.Second)
			for r.Err() == nil { // keep the call going until the disk is full
				if time.Now().After(deadline) {
					t.Fatal("the write error was never reported")
				}
				r.Write(RecordCaller, buf)
				r.Write(RecordAgent, buf)
				clk.Advance(FrameDuration)
			}
			if !errors.Is(r.Err(), syscall.ENOSPC) {
				t.Errorf("Err() = %v, want ENOSPC", r.Err())
			}
			if r.Write(RecordCaller, buf) {
				t.Error("Write accepted a frame after the failure")
			}
			if err := r.Close(); !errors.Is(err, syscall.ENOSPC) {
				t.Errorf("Close() = %v", err)
			}
			if calls.Load() != 1 || !errors.Is(reported, syscall.ENOSPC) {
				t.Errorf("OnError called %d times with %v", calls.Load(), reported)
			}
		})
	}
}

// /dev/full is a real device that fails every write with ENOSPC.
func TestRecorderDevFull(t *testing.T) {
	f, err := os.OpenFile("/dev/full", os.O_WRONLY, 0)
	if err != nil {
		t.Skipf("no /dev/full here: %v", err)
	}
	defer f.Close()
	errs := make(chan error, 1)
	r, err := NewRecorder(context.Background(), f, RecorderOptions{OnError: func(err error) { errs <- err }})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-errs:
		if !errors.Is(err, syscall.ENOSPC) {
			t.Errorf("reported %v, want ENOSPC", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no error reported")
	}
	if err := r.Close(); !errors.Is(err, syscall.ENOSPC) {
		t.Errorf("Close() = %v", err)
	}
}

// blockingFile blocks every write until released: a disk that hangs.
type blockingFile struct {
	memFile
	release chan struct{}
}

func (f *blockingFile) Write(b []byte) (int, error) {
	<-f.release
	return f.memFile.Write(b)
}

// However slow the disk, Write never blocks: the queue fills and frames are dropped.
func TestRecorderNeverBlocksTheMediaPath(t *testing.T) {
	f := &blockingFile{release: make(chan struct{})}
	r, err := NewRecorder(context.Background(), f, RecorderOptions{Queue: 8, BufferSize: 4096})
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]int16, 320)
	start := time.Now()
	accepted := 0
	for range 500 {
		if r.Write(RecordCaller, buf) {
			accepted++
		}
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("500 writes took %v", d)
	}
	// The goroutine may hold one popped frame; the queue holds 8.
	st := r.Stats()
	if accepted < 8 || accepted > 9 || st.Dropped != uint64(500-accepted) {
		t.Errorf("accepted %d, stats %+v", accepted, st)
	}
	close(f.release)
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	w, err := mediatest.DecodeWAV(f.buf)
	if err != nil {
		t.Fatal(err)
	}
	if len(w.Samples) != 2*320*accepted {
		t.Errorf("file holds %d frames, %d were accepted", len(w.Samples)/640, accepted)
	}
}

func TestRecorderContextCancelFinishes(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	var f memFile
	clk := &recClock{}
	r, err := NewRecorder(ctx, &f, RecorderOptions{Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	callAudio(t, r, clk, 10, 0, 0, nil)
	cancel()
	waitUntil(t, "the recorder to stop", func() bool {
		select {
		case <-r.done:
			return true
		default:
			return false
		}
	})
	if r.Write(RecordCaller, make([]int16, 320)) {
		t.Error("Write accepted after the context ended")
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	w, err := mediatest.DecodeWAV(f.bytes())
	if err != nil || len(w.Samples) != 2*10*320 {
		t.Fatalf("%v, %d samples", err, len(w.Samples))
	}
}

func TestRecorderOptions(t *testing.T) {
	for name, o := range map[string]RecorderOptions{
		"rate":         {Rate: 11025},
		"opus rate":    {Format: RecordOggOpus, Rate: 22050},
		"queue":        {Queue: -1},
		"buffer":       {BufferSize: 10},
		"sync":         {SyncEvery: time.Millisecond},
		"skew":         {MaxSkew: time.Hour},
		"format":       {Format: 9},
		"opus bitrate": {Format: RecordOggOpus, OpusBitrate: 1},
	} {
		var f memFile
		if r, err := NewRecorder(context.Background(), &f, o); err == nil {
			r.Close()
			t.Errorf("%s: want an error", name)
		}
	}
	if _, err := CreateRecorder(context.Background(), filepath.Join(t.TempDir(), "no", "such", "dir.wav"), RecorderOptions{}); err == nil {
		t.Error("uncreatable path: want an error")
	}
	var f memFile
	r, _ := NewRecorder(context.Background(), &f, RecorderOptions{})
	defer r.Close()
	var f8 Frame
	f8.Init(8000)
	if r.WriteFrame(RecordCaller, &f8) || r.Write(RecordCaller, make([]int16, 321)) || r.Write(7, nil) {
		t.Error("accepted a frame at the wrong rate, too long, or for no channel")
	}
}

// memFile is an in-memory io.WriteSeeker.
type memFile struct {
	mu  sync.Mutex
	buf []byte
	pos int
}

func (m *memFile) Write(b []byte) (int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if end := m.pos + len(b); end > len(m.buf) {
		m.buf = append(m.buf, make([]byte, end-len(m.buf))...)
	}
	copy(m.buf[m.pos:], b)
	m.pos += len(b)
	return len(b), nil
}

func (m *memFile) Seek(off int64, whence int) (int64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	switch whence {
	case io.SeekStart:
	case io.SeekCurrent:
		off += int64(m.pos)
	case io.SeekEnd:
		off += int64(len(m.buf))
	}
	if off < 0 {
		return 0, fmt.Errorf("negative seek")
	}
	m.pos = int(off)
	return off, nil
}

func (m *memFile) bytes() []byte {
	m.mu.Lock()
	defer m.mu.Unlock()
	return bytes.Clone(m.buf)
}

// discardFile is a WriteSeeker that keeps nothing, for benchmarks.
type discardFile struct{ n int64 }

func (d *discardFile) Write(b []byte) (int, error) { d.n += int64(len(b)); return len(b), nil }
func (d *discardFile) Seek(off int64, whence int) (int64, error) {
	return 0, nil
}

func BenchmarkRecorderWrite(b *testing.B) {
	for _, format := range []RecordFormat{RecordWAV, RecordOggOpus} {
		b.Run(format.String(), func(b *testing.B) {
			clk := &recClock{}
			r, err := NewRecorder(context.Background(), &discardFile{}, RecorderOptions{Format: format, Now: clk.Now, Queue: 1000})
			if err != nil {
				b.Fatal(err)
			}
			buf := mediatest.Sine(320, 16000, 440, -6)
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				// One 20 ms frame of each channel; wait for the writer when the queue is
				// full so that the benchmark measures the whole path, not drops.
				for !r.Write(RecordCaller, buf) {
					time.Sleep(50 * time.Microsecond)
				}
				for !r.Write(RecordAgent, buf) {
					time.Sleep(50 * time.Microsecond)
				}
				clk.Advance(FrameDuration)
			}
			if err := r.Close(); err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N), "ns/frame")
		})
	}
}

// TestRecorderPauseResume (issue 22 item 4): while paused (a call on hold) frames are dropped
// and the time is left out: the recording goes on from where it paused.
func TestRecorderPauseResume(t *testing.T) {
	clk := &recClock{}
	var f memFile
	r, err := NewRecorder(context.Background(), &f, RecorderOptions{Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	frame := func(v int16) []int16 {
		b := make([]int16, 320)
		for i := range b {
			b[i] = v
		}
		return b
	}
	for v := int16(1); v <= 3; v++ { // slots 0–2
		r.Write(RecordCaller, frame(v))
		clk.Advance(20 * time.Millisecond)
	}
	r.Pause()
	r.Pause()       // twice: one pause
	for range 250 { // 5 s of hold music, not recorded
		if r.Write(RecordCaller, frame(99)) {
			t.Fatal("a frame was taken while paused")
		}
		clk.Advance(20 * time.Millisecond)
	}
	r.Resume()
	r.Resume()
	r.Write(RecordCaller, frame(4)) // slot 3
	clk.Advance(20 * time.Millisecond)
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	w, err := mediatest.DecodeWAV(f.buf)
	if err != nil {
		t.Fatal(err)
	}
	left := w.Channel(0)
	if len(left) != 4*320 {
		t.Fatalf("%d frames recorded, want 4 (the hold left out)", len(left)/320)
	}
	for s, want := range []int16{1, 2, 3, 4} {
		if got := left[s*320+100]; got != want {
			t.Errorf("slot %d = %d, want %d", s, got, want)
		}
	}
}
