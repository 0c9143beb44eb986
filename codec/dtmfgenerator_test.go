package codec

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

func TestDTMFGeneratorPackets(t *testing.T) {
	g, err := NewDTMFGenerator(8000, "1#", 100, 60)
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	buf := make([]byte, 4)
	for i := 0; i < 100; i++ {
		n, marker, ts, ok := g.Next(buf)
		if !ok {
			break
		}
		if n == 0 {
			lines = append(lines, "-")
			continue
		}
		e, err := ParseDTMFEvent(buf[:n])
		if err != nil {
			t.Fatal(err)
		}
		m := ""
		if marker {
			m = "M"
		}
		end := ""
		if e.End {
			end = "E"
		}
		lines = append(lines, fmt.Sprintf("%s%d@%d:%d%s", m, e.Event, ts, e.Duration, end))
	}
	// 100 ms = 5 packets of growing duration; the end packet three times; the 60 ms gap is
	// three intervals, two of them taken by the repeats; '#' starts at interval 8 (ts 1280).
	want := "M1@0:160 1@0:320 1@0:480 1@0:640 1@0:800E 1@0:800E 1@0:800E - " +
		"M11@1280:160 11@1280:320 11@1280:480 11@1280:640 11@1280:800E 11@1280:800E 11@1280:800E"
	if got := strings.Join(lines, " "); got != want {
		t.Fatalf("packets:\n got %s\nwant %s", got, want)
	}
	if !g.Done() {
		t.Fatal("not done after all digits")
	}
	if _, _, _, ok := g.Next(buf); ok {
		t.Fatal("Next after the end should report !ok")
	}
}

func TestDTMFGeneratorToReceiver(t *testing.T) {
	for _, clock := range []uint32{8000, 48000} {
		g, err := NewDTMFGenerator(clock, "0123456789*#ABCD", 80, 40)
		if err != nil {
			t.Fatal(err)
		}
		g.SetVolume(7)
		var r DTMFReceiver
		var got strings.Builder
		buf := make([]byte, 4)
		base := uint32(0xFFFFF000) // crosses the timestamp wrap
		for {
			n, _, off, ok := g.Next(buf)
			if !ok {
				break
			}
			if n == 0 {
				continue
			}
			if e, _ := ParseDTMFEvent(buf); e.Volume != 7 {
				t.Fatalf("volume %d", e.Volume)
			}
			if d, dur, ok := r.Push(base+off, buf[:n]); ok {
				if want := uint16(80 * clock / 1000); dur != want {
					t.Errorf("%c: duration %d, want %d", d, dur, want)
				}
				got.WriteRune(d)
			}
		}
		if got.String() != "0123456789*#ABCD" {
			t.Fatalf("clock %d: received %q", clock, got.String())
		}
	}
}

func TestDTMFGeneratorErrors(t *testing.T) {
	cases := []struct {
		clock        uint32
		digits       string
		tone, gapLen int
	}{
		{8000, "12x", 100, 100},
		{8000, "", 100, 100},
		{0, "1", 100, 100},
		{8000, "1", 0, 100},
		{8000, "1", 100, -1},
		{48000, "1", 2000, 100}, // 2 s at 48 kHz overflows the 16-bit duration
	}
	for _, tc := range cases {
		if _, err := NewDTMFGenerator(tc.clock, tc.digits, tc.tone, tc.gapLen); !errors.Is(err, ErrUnsupported) {
			t.Errorf("%+v: %v", tc, err)
		}
	}
	g, _ := NewDTMFGenerator(8000, "1", 100, 100)
	if err := g.SetVolume(64); err == nil {
		t.Error("volume 64 accepted")
	}
	if _, _, _, ok := g.Next(make([]byte, 3)); ok {
		t.Error("short buffer accepted")
	}
}

func BenchmarkDTMFGeneratorNext(b *testing.B) {
	buf := make([]byte, 4)
	g, _ := NewDTMFGenerator(8000, strings.Repeat("5", 1000), 100, 100)
	benchLoop(b, func() {
		if _, _, _, ok := g.Next(buf); !ok {
			g, _ = NewDTMFGenerator(8000, strings.Repeat("5", 1000), 100, 100)
		}
	})
}
