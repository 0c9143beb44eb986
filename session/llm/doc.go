// Package llm streams chat completions from large-language-model vendors over their real wire
// protocols: the OpenAI-compatible Chat Completions API (OpenAI, Groq, vLLM, Ollama, llama.cpp
// server) and the Anthropic Messages API. Both answer as Server-Sent Events (WHATWG HTML Living
// Standard, "Server-sent events", §9.2.6 "Interpreting an event stream"), which this package parses
// itself so that each delta reaches the caller the moment its line arrives.
//
// A conversation engine sees one small [Client] interface: it sends a [Request] and reads [Event]s
// (text deltas, completed tool calls, then Done with usage) from a [Stream]. Failures are [*Error]
// values that classify themselves: whether a retry may help, and whether it happened before any
// part of the reply reached the caller. [WithRetry] retries only those early failures, so a retry
// can never make the agent say something twice.
//
// This package must never buffer a reply until it is complete, start goroutines of its own on the
// path between the end of a user's turn and the request leaving, retry after output has been
// delivered, or log secrets (API keys are only ever written into request headers).
package llm
