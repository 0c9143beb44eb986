// Package webrtc runs browser calls on pion/webrtc: a page joins a web call with a signed,
// single-use token, talks to the agent over Opus (or PCMU), sees the live transcript and sends
// text, keypad digits and hang-up; supervisors listen in on any live conversation (web or phone)
// and may take it over from the agent.
//
// It serves, from one http.Handler: the browser client as an ES module with no build step
// (/client/parley.js), a plain join page (/call/{id}, and /listen/{id} for listeners), and the
// signalling WebSocket (/call/{id}/signal, /listen/{id}/signal) that carries the token, the SDP
// offer and answer (JSEP, RFC 8829), trickle ICE (RFC 8838), ICE restarts (RFC 8445 §9) and
// heartbeats. Media goes through pion with only the enabled codecs registered (Opus, RFC 7587,
// with in-band FEC and DTX; PCMU, RFC 3551) and every ICE candidate on one UDP port (a UDP mux;
// a NAT 1:1 address can be announced instead of the local one). A data channel (RFC 8831)
// carries the transcript and events to the page and the page's requests back.
//
// The browser's audio is decoded and resampled to the engine's 16 kHz 20 ms frames as its
// packets arrive (they drive the playout schedule; one service-wide playout clock fills DTX
// silences and losses) and pushed into the session.Conversation; the engine's frames are
// Opus-encoded and sent on a local track. RTCP (RFC 3550 §6.4): Pion's interceptor sends the
// sender reports; the receive path keeps its own reception statistics for the receiver reports
// the peer sends. A page that goes unheard (no message, no heartbeat, no audio) for the grace
// period ends its call with network_lost.
//
// Listen-in is SFU-style: a listener of a web call in split mode gets the call's own RTP
// packets forwarded without transcoding; other listeners (mixed audio, phone calls) are fed from
// a session.Tap and get one Opus encoding per listener. A takeover page's microphone replaces
// the agent's voice through session.Takeover.
//
// What it must never do: start media (create a peer connection, start a conversation) for a
// token that is invalid, expired, already used or for another call; block or allocate on the
// per-packet and per-frame paths (the engine's pacer and the RTP readers), give a call a timer
// of its own for its playout, or queue without bound toward a slow page (its events are
// dropped and counted); keep a call going once its page has been unheard for the grace period;
// or put a token in a URL the server sees (the join page reads it from the fragment).
package webrtc
