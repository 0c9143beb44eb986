package runtime

import (
	"context"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/parley-voice/parley/media"
)

// BenchmarkRecordingTap measures the per-frame path of a call's recording: it must allocate
// nothing.
func BenchmarkRecordingTap(b *testing.B) {
	rec, err := media.CreateRecorder(context.Background(), filepath.Join(b.TempDir(), "r.wav"), media.RecorderOptions{Format: media.RecordWAV})
	if err != nil {
		b.Fatal(err)
	}
	defer rec.Close()
	var p atomic.Pointer[media.Recorder]
	p.Store(rec)
	tap := recordingTap(&p)
	f := &media.Frame{Rate: media.PipelineRate, N: media.PipelineRate / 50}
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		tap(i%2 == 0, f)
	}
}

// TestRecordingTapWithoutRecorder: frames before the recorder exists are ignored.
func TestRecordingTapWithoutRecorder(t *testing.T) {
	var p atomic.Pointer[media.Recorder]
	tap := recordingTap(&p)
	f := &media.Frame{}
	if allocs := testing.AllocsPerRun(100, func() { tap(true, f) }); allocs != 0 {
		t.Fatalf("%v allocations a frame", allocs)
	}
}
