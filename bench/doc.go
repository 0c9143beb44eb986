// Package bench is Parley's benchmark harness: it acts as a crowd of callers and measures what
// they hear.
//
// It drives a running Parley from outside, as real callers and operators do: SIP user agents
// (emiago/sipgo signalling, RTP through the media package's endpoint, G.711 µ-law) call an
// inbound agent's number; Pion WebRTC clients with Opus join browser calls made with
// POST /v1/web-calls; the /v1 HTTP API creates the agent and reads each conversation's
// per-turn metrics back. It starts `parley fakes` (the vendors' protocols with fixed latencies,
// jambonz's load-test mock latencies by default) and, unless given a running process, `parley
// serve` itself.
//
// Every caller plays utterances (espeak-ng speech made at start, or a speech-like signal) with
// pauses, detects the agent's audio by energy, and timestamps everything against one monotonic
// clock (time.Now's monotonic reading). From that it reports per turn the latency from the end
// of the caller's speech to the first agent audio it hears and Parley's own share of it; per
// call the setup time, greeting latency, loss, jitter and failures; per load level Parley's CPU
// and memory from /proc, as cores and MB per call; and its own CPU use and clock lag, flagging
// a run where the load generator was saturated as invalid.
//
// What it must never do: reach anything but 127.0.0.1, run an unbounded loop (every wait has a
// deadline, every scenario a call budget), import Parley's internals to measure them (numbers
// come from the wire, /proc and the public API), or report a number it did not measure.
package bench
