package tts

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
)

func linesSource(s string) *elevenLinesSource {
	return &elevenLinesSource{br: bufio.NewReaderSize(strings.NewReader(s), 16), hz: 16000, bytesPerSec: 32000, al: newAligner("hi yo")}
}

// TestElevenLinesSource: long lines (beyond the reader's buffer), blank lines, alignment-only
// lines and a last line without a newline.
func TestElevenLinesSource(t *testing.T) {
	in := `{"audio_base64":"AQIDBA==","alignment":{"characters":["h","i"," "],"character_start_times_seconds":[0,0.01,0.02],"character_end_times_seconds":[0.01,0.02,0.03]}}` + "\n\n" +
		`{"audio_base64":"","alignment":null}` + "\n" +
		`{"audio_base64":"BQY=","alignment":{"characters":["y","o"],"character_start_times_seconds":[0.03,0.04],"character_end_times_seconds":[0.04,0.05]}}`
	s := linesSource(in)
	var audio []byte
	for {
		b, err := s.next()
		audio = append(audio, b...)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if !bytes.Equal(audio, []byte{1, 2, 3, 4, 5, 6}) {
		t.Errorf("audio % x", audio)
	}
	s.al.finish()
	if m := s.al.snapshot(); len(m) != 2 || m[1].Text != "yo" || m[1].CharOffset != 3 {
		t.Errorf("marks %+v", m)
	}
	for _, bad := range []string{"{not json}\n", `{"audio_base64":"!!!"}` + "\n", `{"audio_base64":"AQID` /* cut */} {
		s := linesSource(bad)
		if _, err := s.next(); err == nil || errors.Is(err, io.EOF) && !strings.Contains(err.Error(), "truncated") {
			t.Errorf("%q: err = %v", bad, err)
		}
	}
}

func FuzzElevenLinesSource(f *testing.F) {
	f.Add(`{"audio_base64":"AQI=","alignment":{"characters":["a"],"character_start_times_seconds":[0],"character_end_times_seconds":[1]}}` + "\n")
	f.Add(`{"alignment":{"characters":["a","b"],"character_start_times_seconds":[1e308],"character_end_times_seconds":[-1,2,3]}}`)
	f.Add(`{"alignment":{"characters":["a","b"],"character_start_times_seconds":[5,0],"character_end_times_seconds":[6,0.1]}}`)
	f.Fuzz(func(t *testing.T, in string) {
		s := linesSource(in)
		for range 100 {
			if _, err := s.next(); err != nil {
				break
			}
		}
		s.al.finish()
		for _, m := range s.al.snapshot() {
			if m.CharOffset < 0 || m.CharOffset > len(s.al.text) || m.Start < 0 || m.End < m.Start {
				t.Fatalf("bad mark %+v", m)
			}
		}
	})
}
