package codec

import (
	"errors"
	"testing"
)

func TestDTMFEventWireFormat(t *testing.T) {
	cases := []struct {
		ev   DTMFEvent
		wire []byte
	}{
		// RFC 4733 §2.3: event, E|R|volume, 16-bit duration.
		{DTMFEvent{Event: 5, End: true, Volume: 10, Duration: 800}, []byte{0x05, 0x8A, 0x03, 0x20}},
		{DTMFEvent{Event: 11, Volume: 63, Duration: 160}, []byte{0x0B, 0x3F, 0x00, 0xA0}},
		{DTMFEvent{Event: 0, Duration: 0xFFFF}, []byte{0x00, 0x00, 0xFF, 0xFF}},
		{DTMFEvent{Event: 16, End: true}, []byte{0x10, 0x80, 0x00, 0x00}}, // flash
	}
	for _, tc := range cases {
		buf := make([]byte, 8)
		n, err := tc.ev.MarshalTo(buf)
		if err != nil || n != 4 || string(buf[:n]) != string(tc.wire) {
			t.Errorf("%+v marshals to % x (%v), want % x", tc.ev, buf[:n], err, tc.wire)
		}
		got, err := ParseDTMFEvent(tc.wire)
		if err != nil || got != tc.ev {
			t.Errorf("parse % x = %+v (%v), want %+v", tc.wire, got, err, tc.ev)
		}
	}
	// The R bit is ignored on receipt (RFC 4733 §2.3.2).
	if ev, _ := ParseDTMFEvent([]byte{1, 0xC5, 0, 1}); !ev.End || ev.Volume != 5 {
		t.Errorf("R bit set: %+v", ev)
	}
	if _, err := ParseDTMFEvent([]byte{1, 2, 3}); !errors.Is(err, ErrInvalidPacket) {
		t.Errorf("3-byte payload: %v", err)
	}
	if _, err := (DTMFEvent{Volume: 64}).MarshalTo(make([]byte, 4)); err == nil {
		t.Error("volume 64 accepted")
	}
	if _, err := (DTMFEvent{}).MarshalTo(make([]byte, 3)); !errors.Is(err, ErrShortBuffer) {
		t.Errorf("short buffer: %v", err)
	}
}

func TestDTMFDigitMapping(t *testing.T) {
	// RFC 4733 §3.2 Table 7.
	table := []struct {
		digit rune
		event uint8
	}{
		{'0', 0}, {'1', 1}, {'2', 2}, {'3', 3}, {'4', 4}, {'5', 5}, {'6', 6}, {'7', 7},
		{'8', 8}, {'9', 9}, {'*', 10}, {'#', 11}, {'A', 12}, {'B', 13}, {'C', 14}, {'D', 15},
	}
	for _, tc := range table {
		if e, ok := DigitToEvent(tc.digit); !ok || e != tc.event {
			t.Errorf("DigitToEvent(%q) = %d, %v", tc.digit, e, ok)
		}
		if d, ok := EventToDigit(tc.event); !ok || d != tc.digit {
			t.Errorf("EventToDigit(%d) = %q, %v", tc.event, d, ok)
		}
	}
	if e, ok := DigitToEvent('c'); !ok || e != 14 {
		t.Errorf("lower-case c: %d %v", e, ok)
	}
	for _, r := range []rune{'E', 'e', ' ', ',', 'p', '٣'} {
		if _, ok := DigitToEvent(r); ok {
			t.Errorf("DigitToEvent(%q) accepted", r)
		}
	}
	for _, e := range []uint8{16, 32, 255} {
		if _, ok := EventToDigit(e); ok {
			t.Errorf("EventToDigit(%d) accepted", e)
		}
	}
}

func FuzzParseDTMFEvent(f *testing.F) {
	f.Add([]byte{0x05, 0x8A, 0x03, 0x20})
	f.Add([]byte{})
	f.Add([]byte{0xFF, 0xFF, 0xFF, 0xFF, 0xFF})
	f.Fuzz(func(t *testing.T, p []byte) {
		ev, err := ParseDTMFEvent(p)
		if len(p) < 4 {
			if err == nil {
				t.Fatal("short payload accepted")
			}
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		var buf [4]byte
		if _, err := ev.MarshalTo(buf[:]); err != nil {
			t.Fatal(err)
		}
		want := [4]byte{p[0], p[1] &^ 0x40, p[2], p[3]} // R is not sent
		if buf != want {
			t.Fatalf("round trip % x -> %+v -> % x", p[:4], ev, buf)
		}
		var r DTMFReceiver
		r.Push(0, p)
		r.Flush()
	})
}

func BenchmarkDTMF(b *testing.B) {
	p := []byte{0x05, 0x8A, 0x03, 0x20}
	b.Run("Parse", func(b *testing.B) {
		benchLoop(b, func() {
			if _, err := ParseDTMFEvent(p); err != nil {
				b.Fatal(err)
			}
		})
	})
	b.Run("Marshal", func(b *testing.B) {
		ev := DTMFEvent{Event: 5, End: true, Volume: 10, Duration: 800}
		var buf [4]byte
		benchLoop(b, func() {
			if _, err := ev.MarshalTo(buf[:]); err != nil {
				b.Fatal(err)
			}
		})
	})
}
