// Package mediatest holds test helpers for audio, in the manner of net/http/httptest: tone
// generators and a Goertzel tone detector, white and pink noise, mixing at a target
// signal-to-noise ratio, an SNR meter that aligns the signal with its reference first, WAV
// reading and writing, a resampler, speech fixtures made with espeak-ng at test time, and a
// manual clock with timers for timing code.
//
// Levels are in dBFS after AES17: a full-scale sine (amplitude 32767) is 0 dBFS, whether it is
// measured by RMS (LevelDBFS) or as a tone (DetectTone).
//
// It must never be imported by non-test code, and it does not import package media (so that
// media's own tests can use it).
package mediatest
