package stt

import (
	"context"
	"io"
	"log/slog"
	"slices"
	"testing"
	"time"
)

// TestPreRollRing keeps exactly the newest PreRoll samples, in order, whatever the frame sizes.
func TestPreRollRing(t *testing.T) {
	a, err := NewOpenAISTT(OpenAISTTConfig{BaseURL: "http://127.0.0.1:1", PreRoll: time.Millisecond, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	o, _ := StreamOptions{}.normalize()
	s := newOpenAISTTStream(context.Background(), a, o) // 16 samples of pre-roll
	defer s.cancel()
	var all []int16
	next := int16(0)
	for _, n := range []int{3, 5, 7, 1, 16, 2, 30, 9, 4} {
		frame := make([]int16, n)
		for i := range frame {
			frame[i] = next
			next++
		}
		all = append(all, frame...)
		s.pushPreRoll(frame)
		want := all[max(0, len(all)-16):]
		got := s.appendPreRoll(nil)
		if !slices.Equal(got, want) {
			t.Fatalf("after %d samples: got %v want %v", len(all), got, want)
		}
		s.pushPreRoll(got) // put them back (appendPreRoll empties the ring)
	}
}
