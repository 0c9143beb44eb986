// Package fakes holds local servers that speak the real wire protocols of the paid vendors
// Parley uses — Deepgram live streaming, OpenAI chat completions, transcription and speech,
// Anthropic Messages and ElevenLabs streaming — with latencies that can be set, scripted
// replies and injectable faults.
//
// The tests, the benchmark harness and the keyless demo (`parley fakes`) run the real adapters
// against them. The fakes validate requests as the vendors do and record them so that tests can
// check protocol conformance. This package must never be used to answer real callers.
package fakes
