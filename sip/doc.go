// Package sip is Parley's SIP trunk endpoint: it answers and places phone calls over SIP trunks
// (RFC 3261) with emiago/sipgo, negotiates audio by SDP offer/answer (RFC 3264, RFC 8866), moves
// the audio through the media package's RTP endpoint, and hands each call leg to a
// session.Conversation as its session.AudioPort.
//
// It covers what a carrier-facing gateway must get right:
//
//   - inbound INVITEs from allowed trunk sources only (others 403), with optional digest
//     authentication (RFC 3261 §22, RFC 7616 digests), every refusal carrying a Reason header
//     (RFC 3326) and a log line;
//   - early and late offers (an INVITE without SDP gets the offer in the 200 and the answer in
//     the ACK, RFC 3261 §13.2.1), re-INVITEs for hold, new addresses and codec changes, CANCEL
//     before the answer (487), BYE both ways, OPTIONS, session timers (RFC 4028);
//   - outbound calls through a trunk with digest authentication on 401/407, early media on 183,
//     a ring timeout ending in CANCEL, and one table that maps final answers to outcomes;
//   - DTMF both ways by RFC 4733 telephone-events and SIP INFO (application/dtmf-relay,
//     application/dtmf), symmetric RTP latching behind NAT, an RTP inactivity timeout;
//   - cold transfers by REFER (RFC 3515) following the NOTIFY sipfrag (RFC 3420), warm transfers
//     that brief a human on a second leg and then bridge both legs through the conversation's
//     takeover (still transcribed and recorded until either party hangs up), incoming REFERs
//     that move the agent to a new leg;
//   - answering-machine detection on outbound calls;
//   - draining: new INVITEs get 503 with Retry-After while calls in progress finish.
//
// What it must never do: block the media path (the per-frame paths allocate nothing and never
// wait on the network or a lock held across I/O), trust a request's source without checking it
// against the trunks, let a malformed message crash or stall the server, or end a call because
// the agent is quiet (only the caller's media going away, a BYE, or the conversation ending
// does).
package sip
