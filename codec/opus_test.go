package codec

import (
	"errors"
	"math"
	"testing"
)

// speechLike returns a voiced, speech-like test signal: a 140 Hz pulse-ish harmonic series
// under a slow amplitude envelope, so that SILK (the speech mode whose FEC we test) is used.
func speechLike(rate, n int) []int16 {
	out := make([]int16, n)
	for i := range out {
		t := float64(i) / float64(rate)
		f0 := 140 + 20*math.Sin(2*math.Pi*1.3*t)
		env := 0.55 + 0.45*math.Sin(2*math.Pi*3*t)
		var v float64
		for h := 1; h <= 12; h++ {
			if float64(h)*f0 > float64(rate)/2*0.9 {
				break
			}
			v += math.Sin(2*math.Pi*float64(h)*f0*t+float64(h)) / float64(h)
		}
		out[i] = int16(6000 * env * v)
	}
	return out
}

func encodeAll(t testing.TB, enc *OpusEncoder, pcm []int16) [][]byte {
	frame := enc.SampleRate() / 50
	var packets [][]byte
	buf := make([]byte, OpusMaxPacket)
	for i := 0; i+frame <= len(pcm); i += frame {
		n, err := enc.Encode(buf, pcm[i:i+frame])
		if err != nil {
			t.Fatalf("encode frame %d: %v", i/frame, err)
		}
		packets = append(packets, append([]byte(nil), buf[:n]...))
	}
	return packets
}

func TestOpusToneSurvives(t *testing.T) {
	for _, rate := range []int{48000, 16000} {
		enc, err := NewOpusEncoder(OpusOptions{SampleRate: rate})
		if err != nil {
			t.Fatal(err)
		}
		defer enc.Close()
		dec, err := NewOpusDecoder(rate)
		if err != nil {
			t.Fatal(err)
		}
		defer dec.Close()
		const freq, amp = 1000.0, 10000.0
		pcm := tone(rate, freq, amp, rate, 0) // 1 s
		out := make([]int16, 0, len(pcm))
		frame := make([]int16, rate/50)
		for _, p := range encodeAll(t, enc, pcm) {
			n, err := dec.Decode(frame, p)
			if err != nil {
				t.Fatal(err)
			}
			if n != rate/50 {
				t.Fatalf("decoded %d samples, want %d", n, rate/50)
			}
			out = append(out, frame[:n]...)
		}
		tail := out[rate/5:] // skip 200 ms of start-up
		tonePow := goertzelPower(tail, rate, freq)
		total := energy(tail) / float64(len(tail))
		gain := 10 * math.Log10(tonePow/(amp*amp/2))
		t.Logf("%d Hz: %.1f%% of the decoded power is the tone, gain %.2f dB", rate, 100*tonePow/total, gain)
		if tonePow < 0.95*total {
			t.Errorf("%d Hz: only %.1f%% of the decoded power is at %g Hz", rate, 100*tonePow/total, freq)
		}
		if math.Abs(gain) > 1.5 {
			t.Errorf("%d Hz: tone level changed by %.2f dB", rate, gain)
		}
	}
}

func TestOpusBitrateAndComplexity(t *testing.T) {
	pcm := speechLike(48000, 48000)
	meanSize := func(o OpusOptions) float64 {
		enc, err := NewOpusEncoder(o)
		if err != nil {
			t.Fatal(err)
		}
		defer enc.Close()
		var sum int
		packets := encodeAll(t, enc, pcm)
		for _, p := range packets {
			sum += len(p)
		}
		return float64(sum) / float64(len(packets))
	}
	low := meanSize(OpusOptions{Bitrate: 12000, Complexity: 1})
	high := meanSize(OpusOptions{Bitrate: 64000, Complexity: 10})
	// 20 ms packets: 12 kbit/s is 30 bytes, 64 kbit/s is 160 bytes (VBR varies around that).
	t.Logf("mean packet %.1f bytes at 12 kbit/s, %.1f at 64 kbit/s", low, high)
	if low < 15 || low > 45 || high < 110 || high > 200 {
		t.Errorf("mean packet sizes %.1f and %.1f bytes do not follow the bitrates", low, high)
	}
	enc, _ := NewOpusEncoder(OpusOptions{})
	defer enc.Close()
	if err := enc.SetBitrate(20000); err != nil {
		t.Fatal(err)
	}
	if br, err := enc.Bitrate(); err != nil || br != 20000 {
		t.Fatalf("Bitrate() = %d, %v after SetBitrate(20000)", br, err)
	}
	for _, c := range []int{0, 5, 10} {
		if err := enc.SetComplexity(c); err != nil {
			t.Errorf("SetComplexity(%d): %v", c, err)
		}
	}
	if err := enc.SetComplexity(11); !errors.Is(err, ErrUnsupported) {
		t.Errorf("SetComplexity(11): %v", err)
	}
	if err := enc.SetBitrate(100); !errors.Is(err, ErrUnsupported) {
		t.Errorf("SetBitrate(100): %v", err)
	}
	if err := enc.SetPacketLoss(101); !errors.Is(err, ErrUnsupported) {
		t.Errorf("SetPacketLoss(101): %v", err)
	}
}

// TestOpusFECBeatsPLC drops one packet and rebuilds it twice: from the FEC data in the next
// packet, and by concealment alone. Both are compared with what the decoder produced when the
// packet was not lost.
func TestOpusFECBeatsPLC(t *testing.T) {
	for _, rate := range []int{48000, 16000} {
		enc, err := NewOpusEncoder(OpusOptions{SampleRate: rate, Bitrate: 24000, FEC: true, PacketLossPercent: 20, Signal: "voice"})
		if err != nil {
			t.Fatal(err)
		}
		packets := encodeAll(t, enc, speechLike(rate, rate))
		enc.Close()
		frame := rate / 50

		decodeWith := func(lost int, fec bool) []int16 {
			dec, err := NewOpusDecoder(rate)
			if err != nil {
				t.Fatal(err)
			}
			defer dec.Close()
			out := make([]int16, frame)
			for i, p := range packets {
				if i == lost {
					var next []byte
					if fec {
						next = packets[i+1]
					}
					n, err := dec.Conceal(out, next)
					if err != nil || n != frame {
						t.Fatalf("conceal: n=%d err=%v", n, err)
					}
					return append([]int16(nil), out...)
				}
				if _, err := dec.Decode(out, p); err != nil {
					t.Fatal(err)
				}
			}
			t.Fatal("unreachable")
			return nil
		}
		var fecSum, plcSum float64
		lostFrames := []int{20, 27, 33, 41}
		for _, lost := range lostFrames {
			ref := make([]int16, frame)
			dec, _ := NewOpusDecoder(rate)
			for _, p := range packets[:lost+1] {
				dec.Decode(ref, p)
			}
			dec.Close()
			fec := snrDB(ref, decodeWith(lost, true))
			plc := snrDB(ref, decodeWith(lost, false))
			t.Logf("%d Hz, frame %d lost: FEC %.1f dB, PLC %.1f dB against the undamaged decode", rate, lost, fec, plc)
			fecSum += fec
			plcSum += plc
		}
		fec, plc := fecSum/float64(len(lostFrames)), plcSum/float64(len(lostFrames))
		if fec < plc+5 { // measured: about 10 dB better
			t.Errorf("%d Hz: FEC recovery %.1f dB is not clearly better than PLC %.1f dB", rate, fec, plc)
		}
	}
}

func TestOpusDTXSendsTinyPacketsOnSilence(t *testing.T) {
	silence := make([]int16, 48000) // 1 s
	for _, dtx := range []bool{true, false} {
		enc, err := NewOpusEncoder(OpusOptions{DTX: dtx})
		if err != nil {
			t.Fatal(err)
		}
		packets := encodeAll(t, enc, silence)
		enc.Close()
		tiny := 0
		for _, p := range packets[10:] { // after 200 ms
			if len(p) <= 2 {
				tiny++
			}
		}
		frac := float64(tiny) / float64(len(packets)-10)
		t.Logf("DTX %v: %.0f%% of the packets are DTX frames (<= 2 bytes)", dtx, 100*frac)
		if dtx && frac < 0.8 {
			t.Errorf("with DTX only %.0f%% of silent packets are <= 2 bytes", 100*frac)
		}
		if !dtx && tiny > 0 {
			t.Errorf("without DTX %d packets are <= 2 bytes", tiny)
		}
	}
}

func TestOpusErrors(t *testing.T) {
	if _, err := NewOpusEncoder(OpusOptions{SampleRate: 44100}); !errors.Is(err, ErrUnsupported) {
		t.Errorf("44.1 kHz encoder: %v", err)
	}
	if _, err := NewOpusDecoder(11025); !errors.Is(err, ErrUnsupported) {
		t.Errorf("11.025 kHz decoder: %v", err)
	}
	if _, err := NewOpusEncoder(OpusOptions{Application: "karaoke"}); !errors.Is(err, ErrUnsupported) {
		t.Errorf("unknown application: %v", err)
	}
	enc, _ := NewOpusEncoder(OpusOptions{SampleRate: 16000})
	defer enc.Close()
	buf := make([]byte, OpusMaxPacket)
	for _, n := range []int{0, 1, 319, 321, 16000} {
		if _, err := enc.Encode(buf, make([]int16, n)); !errors.Is(err, ErrFrameSize) {
			t.Errorf("encode %d samples: %v, want ErrFrameSize", n, err)
		}
	}
	if _, err := enc.Encode(nil, make([]int16, 320)); !errors.Is(err, ErrShortBuffer) {
		t.Errorf("encode into nil: %v", err)
	}
	n, err := enc.Encode(buf, tone(16000, 440, 8000, 320, 0))
	if err != nil {
		t.Fatal(err)
	}
	good := buf[:n]

	dec, _ := NewOpusDecoder(16000)
	defer dec.Close()
	out := make([]int16, 320)
	bad := [][]byte{
		{0x03},             // code 3 without the frame count byte (RFC 6716 §3.2.5)
		{0x03, 0x00},       // code 3 with zero frames
		{0x03, 0xFF, 0x01}, // 63 frames: more than 120 ms
		{0x01, 0x05},       // code 1: two equal frames need an even remainder
		{0x02, 0xFC},       // code 2: frame length byte without the data
	}
	for _, p := range bad {
		if _, err := dec.Decode(out, p); !errors.Is(err, ErrInvalidPacket) {
			t.Errorf("decode %x: %v, want ErrInvalidPacket", p, err)
		}
	}
	if _, err := dec.Decode(out, nil); !errors.Is(err, ErrInvalidPacket) {
		t.Errorf("decode empty: %v", err)
	}
	if _, err := dec.Decode(out[:100], good); !errors.Is(err, ErrShortBuffer) {
		t.Errorf("decode 20 ms into 100 samples: %v, want ErrShortBuffer", err)
	}
	if _, err := dec.Decode(nil, good); !errors.Is(err, ErrShortBuffer) {
		t.Errorf("decode into nil: %v", err)
	}
	if _, err := dec.Conceal(out[:10], nil); !errors.Is(err, ErrShortBuffer) {
		t.Errorf("conceal into less than 2.5 ms: %v", err)
	}
	// A corrupt "next" packet falls back to plain concealment.
	if n, err := dec.Conceal(out, []byte{0x03}); err != nil || n != 320 {
		t.Errorf("conceal with corrupt next: n=%d err=%v", n, err)
	}
	if got, err := OpusPacketSamples(good, 48000); err != nil || got != 960 {
		t.Errorf("OpusPacketSamples = %d, %v; want 960", got, err)
	}
	if _, err := OpusPacketSamples([]byte{0x03}, 48000); !errors.Is(err, ErrInvalidPacket) {
		t.Errorf("OpusPacketSamples of a bad packet: %v", err)
	}
}

func TestOpusCloseIsIdempotent(t *testing.T) {
	enc, _ := NewOpusEncoder(OpusOptions{})
	dec, _ := NewOpusDecoder(48000)
	for i := 0; i < 2; i++ {
		if err := enc.Close(); err != nil {
			t.Fatal(err)
		}
		if err := dec.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := enc.Encode(make([]byte, 100), make([]int16, 960)); !errors.Is(err, ErrClosed) {
		t.Errorf("encode after close: %v", err)
	}
	if _, err := dec.Decode(make([]int16, 960), []byte{0x08}); !errors.Is(err, ErrClosed) {
		t.Errorf("decode after close: %v", err)
	}
	if _, err := dec.Conceal(make([]int16, 960), nil); !errors.Is(err, ErrClosed) {
		t.Errorf("conceal after close: %v", err)
	}
	if err := enc.SetBitrate(20000); !errors.Is(err, ErrClosed) {
		t.Errorf("set after close: %v", err)
	}
	if err := dec.Reset(); !errors.Is(err, ErrClosed) {
		t.Errorf("reset after close: %v", err)
	}
}

func TestOpusLookaheadAndReset(t *testing.T) {
	enc, _ := NewOpusEncoder(OpusOptions{SampleRate: 16000})
	defer enc.Close()
	la, err := enc.Lookahead()
	if err != nil || la <= 0 || la > 16000/50 {
		t.Fatalf("Lookahead() = %d, %v", la, err)
	}
	pcm := speechLike(16000, 3200)
	first := encodeAll(t, enc, pcm)
	if err := enc.Reset(); err != nil {
		t.Fatal(err)
	}
	again := encodeAll(t, enc, pcm)
	for i := range first {
		if string(first[i]) != string(again[i]) {
			t.Fatalf("packet %d differs after Reset", i)
		}
	}
}

func FuzzOpusDecode(f *testing.F) {
	enc, _ := NewOpusEncoder(OpusOptions{SampleRate: 16000, FEC: true})
	buf := make([]byte, OpusMaxPacket)
	n, _ := enc.Encode(buf, speechLike(16000, 320))
	enc.Close()
	f.Add(append([]byte(nil), buf[:n]...))
	f.Add([]byte{0x03, 0x83, 0x01, 0x02})
	f.Add([]byte{0xFC})
	dec, _ := NewOpusDecoder(16000)
	out := make([]int16, 16000/400*48)
	f.Fuzz(func(t *testing.T, p []byte) {
		n, err := dec.Decode(out, p)
		if err == nil && (n <= 0 || n > len(out)) {
			t.Fatalf("decoded %d samples", n)
		}
		if _, err := dec.Conceal(out, p); err != nil {
			t.Fatalf("conceal with arbitrary next: %v", err)
		}
	})
}

func BenchmarkOpus(b *testing.B) {
	for _, rate := range []int{48000, 16000} {
		pcm := speechLike(rate, rate/50)
		enc, _ := NewOpusEncoder(OpusOptions{SampleRate: rate, Complexity: 5, FEC: true})
		defer enc.Close()
		packet := make([]byte, OpusMaxPacket)
		n, _ := enc.Encode(packet, pcm)
		// A realistic packet stream to decode: one second of speech-like audio, cycled.
		packets := encodeAll(b, enc, speechLike(rate, rate))
		out := make([]int16, rate/50)
		name := map[int]string{48000: "48k", 16000: "16k"}[rate]

		b.Run("Encode/"+name+"/c5/20ms", func(b *testing.B) {
			benchLoop(b, func() {
				if _, err := enc.Encode(packet, pcm); err != nil {
					b.Fatal(err)
				}
			})
		})
		b.Run("EncodeRawLibopus/"+name+"/c5/20ms", func(b *testing.B) {
			benchLoop(b, func() {
				rawOpusEncode(enc, packet, pcm)
			})
		})
		b.Run("Decode/"+name+"/20ms", func(b *testing.B) {
			dec, _ := NewOpusDecoder(rate)
			defer dec.Close()
			i := 0
			benchLoop(b, func() {
				if _, err := dec.Decode(out, packets[i%len(packets)]); err != nil {
					b.Fatal(err)
				}
				i++
			})
		})
		b.Run("DecodeRawLibopus/"+name+"/20ms", func(b *testing.B) {
			dec, _ := NewOpusDecoder(rate)
			defer dec.Close()
			i := 0
			benchLoop(b, func() {
				rawOpusDecode(dec, out, packets[i%len(packets)])
				i++
			})
		})
		b.Run("ConcealPLC/"+name+"/20ms", func(b *testing.B) {
			dec, _ := NewOpusDecoder(rate)
			defer dec.Close()
			dec.Decode(out, packet[:n])
			benchLoop(b, func() {
				if _, err := dec.Conceal(out, nil); err != nil {
					b.Fatal(err)
				}
			})
		})
		b.Run("ConcealFEC/"+name+"/20ms", func(b *testing.B) {
			dec, _ := NewOpusDecoder(rate)
			defer dec.Close()
			dec.Decode(out, packets[10])
			benchLoop(b, func() {
				if _, err := dec.Conceal(out, packets[11]); err != nil {
					b.Fatal(err)
				}
			})
		})
	}
}
