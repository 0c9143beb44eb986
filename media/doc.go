// Package media is Parley's audio plumbing. It knows nothing of SIP, WebRTC or HTTP: it moves
// 16-bit mono PCM in 20 ms frames (Frame, FramePool) between the network and the conversation
// engine.
//
// It holds the RTP endpoint (UDP port allocation, RTP/RTCP per RFC 3550, symmetric-RTP
// latching), the adaptive jitter buffer (JitterBuffer, RFC 3550 §6.4.1 and Appendix A.8), the
// voice-activity detector (VAD), the output pacer that puts one frame on the wire every 20 ms and
// sends the first frame of new audio at once (Pacer), the clip-safe mixer (Mixer) and the call
// recorder that streams a call to disk as WAV or Ogg/Opus (Recorder).
//
// What it must never do: block the media path or allocate per frame in steady state. Every queue
// is bounded; when a consumer falls behind, audio is dropped and counted, never queued without
// limit. Disk and network I/O happen on goroutines of their own, never on the caller's frame
// path. Bad input is an error or a counted drop, never a panic.
package media
