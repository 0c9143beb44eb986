package codec

import (
	"errors"
	"testing"
)

func TestNewEncoderDecoderByInfo(t *testing.T) {
	cases := []struct {
		info Info
		rate int
	}{
		{PCMU, 8000}, {PCMA, 8000}, {G722, 16000}, {Opus, 48000},
		{Info{Name: "OPUS", SampleRate: 16000}, 16000},
		{Info{Name: "pcmu"}, 8000},
	}
	for _, tc := range cases {
		enc, err := NewEncoder(tc.info)
		if err != nil {
			t.Fatalf("%s encoder: %v", tc.info.Name, err)
		}
		dec, err := NewDecoder(tc.info)
		if err != nil {
			t.Fatalf("%s decoder: %v", tc.info.Name, err)
		}
		if enc.SampleRate() != tc.rate || dec.SampleRate() != tc.rate {
			t.Errorf("%s: rates %d/%d, want %d", tc.info.Name, enc.SampleRate(), dec.SampleRate(), tc.rate)
		}
		if _, ok := dec.(Concealer); !ok {
			t.Errorf("%s decoder does not conceal", tc.info.Name)
		}
		// 20 ms through the pair keeps a 440 Hz tone.
		frame := tc.rate / 50
		pcm := tone(tc.rate, 440, 8000, frame*10, 0)
		payload := make([]byte, OpusMaxPacket)
		out := make([]int16, frame)
		var got []int16
		for i := 0; i < len(pcm); i += frame {
			n, err := enc.Encode(payload, pcm[i:i+frame])
			if err != nil {
				t.Fatalf("%s encode: %v", tc.info.Name, err)
			}
			m, err := dec.Decode(out, payload[:n])
			if err != nil || m != frame {
				t.Fatalf("%s decode: %d, %v", tc.info.Name, m, err)
			}
			got = append(got, out...)
		}
		tail := got[len(got)/2:]
		if p := goertzelPower(tail, tc.rate, 440); p < 0.8*energy(tail)/float64(len(tail)) {
			t.Errorf("%s: tone lost in the round trip", tc.info.Name)
		}
		if c, ok := enc.(interface{ Close() error }); ok {
			c.Close()
		}
		if c, ok := dec.(interface{ Close() error }); ok {
			c.Close()
		}
	}
	for _, info := range []Info{TelephoneEvent, {Name: "G729"}, {}} {
		if _, err := NewEncoder(info); !errors.Is(err, ErrUnsupported) {
			t.Errorf("NewEncoder(%q): %v", info.Name, err)
		}
		if _, err := NewDecoder(info); !errors.Is(err, ErrUnsupported) {
			t.Errorf("NewDecoder(%q): %v", info.Name, err)
		}
	}
}
