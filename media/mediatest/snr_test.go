package mediatest

import (
	"math"
	"testing"
)

func TestSNRAlignsDelayAndGain(t *testing.T) {
	ref := PinkNoise(8000, -20, 11)
	delayed := make([]int16, len(ref)+40)
	for i, v := range ref {
		delayed[i+37] = v / 2
	}
	snr, d := SNR(delayed, ref, 50)
	if d != 37 || snr < 40 {
		t.Errorf("delayed half-gain copy: SNR %.1f dB at delay %d, want >40 dB at 37", snr, d)
	}
	if snr, _ := SNR(ref, ref, 0); !math.IsInf(snr, 1) {
		t.Errorf("identical: SNR %v, want +Inf", snr)
	}
	noisy, _ := MixAtSNR(ref, WhiteNoise(len(ref), -20, 12), 16000, 15)
	if snr, d := SNR(noisy, ref, 10); d != 0 || math.Abs(snr-15) > 1 {
		t.Errorf("15 dB mix: SNR %.2f at delay %d", snr, d)
	}
}
