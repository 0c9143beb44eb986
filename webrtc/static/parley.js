// Parley browser client: join a Parley web call (or listen to a live call) from any page.
//
//   import { join } from "https://voice.example.com/client/parley.js";
//   const call = await join({ url, token });          // url and token from POST /v1/web-calls
//   call.addEventListener("transcript", (e) => console.log(e.detail.role, e.detail.text));
//
// No build step, no dependencies. Events (CustomEvent, data in e.detail):
//   state        {state}  new | connecting | connected | reconnecting | ended | failed
//   transcript   a transcript line {seq, role, text, start, end, interrupted, meta}
//   interim      {text}   what the caller is saying, before it is final
//   agent-saying {reply, text} a piece of the agent's reply as its audio starts to play; the
//                            complete (possibly cut) line follows as a transcript event
//   agent-state  {state}  listening | user_speaking | thinking | agent_speaking | human_takeover
//   track        {track, stream, index}  a remote audio track (listeners in split mode get two)
//   takeover     {on}     a takeover started or ended (takeover pages)
//   ended        {reason} the call is over (caller_hung_up, agent_ended, network_lost, ...)
//   error        {code, message}
//
// Protocol: a WebSocket at <url>/signal carries the token, the SDP offer and answer, trickle ICE
// and heartbeats; a data channel named "parley" carries the transcript and the page's text,
// DTMF and hang-up. See webrtc/README.md.

const STATES = ["new", "connecting", "connected", "reconnecting", "ended", "failed"];

export class ParleyCall extends EventTarget {
  // url: the call's URL (https://host/call/{id}) or a listen URL (https://host/listen/{id}).
  // token: the single-use token. tracks: "mixed" (default) or "split" for listeners.
  // microphone: a MediaStream to send instead of asking for the microphone.
  constructor({ url, token, tracks = "mixed", microphone = null, audioConstraints = true } = {}) {
    super();
    if (!url || !token) throw new TypeError("ParleyCall needs url and token");
    const u = new URL(url, globalThis.location ? globalThis.location.href : undefined);
    u.hash = "";
    u.search = "";
    u.pathname = u.pathname.replace(/\/+$/, "");
    this.url = u.toString();
    this.token = token;
    this.tracks = tracks;
    this.audioConstraints = audioConstraints;
    this.localStream = microphone;
    this._ownMic = !microphone;
    this.state = "new";
    this.role = null;
    this.welcome = null;
    this.pc = null;
    this.dc = null;
    this.ws = null;
    this.transcript = [];
    this.remoteStreams = [];
    this.remoteTracks = [];
    this.audioElements = [];
    this.muted = false;
    this._seqs = new Set();
    this._pending = [];
    this._hb = null;
    this._hbSeq = 0;
    this._makingOffer = false;
    this._restartWanted = false;
    this._lastHeard = Date.now();
    this._ended = false;
    this._onNetwork = () => this.restartIce();
    this._audio = null;
  }

  // start joins the call: signalling, microphone (callers and takeover pages), media.
  async start() {
    if (this.state !== "new") throw new Error("already started");
    this._setState("connecting");
    const welcome = await this._connect({ type: "join", token: this.token, tracks: this.tracks });
    this.welcome = welcome;
    this.role = welcome.role;
    this.conversationId = welcome.conversation_id;
    this.participantName = welcome.participant_name;
    this.agentName = welcome.agent_name || "";
    if (welcome.send && !this.localStream) {
      this.localStream = await navigator.mediaDevices.getUserMedia({ audio: this.audioConstraints });
    }
    this._createPeer(welcome);
    this._startHeartbeat(welcome.heartbeat_ms || 2000);
    globalThis.addEventListener?.("online", this._onNetwork);
    navigator.connection?.addEventListener?.("change", this._onNetwork);
    await this._offer(false);
    return this;
  }

  // sendText sends text the person typed; the agent takes it as what the caller said.
  sendText(text) {
    text = String(text ?? "").trim();
    if (text) this._app({ type: "text", text });
  }

  // sendDTMF sends keypad digits (0-9, *, #, A-D).
  sendDTMF(digits) {
    digits = String(digits ?? "").toUpperCase().replace(/[^0-9*#A-D]/g, "");
    if (digits) this._app({ type: "dtmf", digits });
  }

  // takeover starts (true) or ends (false) speaking instead of the agent (takeover pages).
  takeover(on = true) {
    this._app({ type: "takeover", on: !!on });
  }

  // setMuted stops or resumes sending the microphone.
  setMuted(muted) {
    this.muted = !!muted;
    for (const t of this.localStream?.getAudioTracks() ?? []) t.enabled = !this.muted;
  }

  // hangup ends the call. It resolves once the service confirmed (or after 2 s).
  async hangup() {
    if (this._ended) return;
    this._app({ type: "hangup" });
    await new Promise((resolve) => {
      const t = setTimeout(resolve, 2000);
      this.addEventListener("ended", () => { clearTimeout(t); resolve(); }, { once: true });
    });
    this._end("caller_hung_up");
  }

  // inputLevel and outputLevel return the RMS level (0..1) of the microphone and of what is
  // heard, for a level meter.
  inputLevel() { return this._level(this._audioGraph()?.input); }
  outputLevel() { return this._level(this._audioGraph()?.output); }

  // outputAnalyser returns the AnalyserNode of what is heard (for spectra).
  outputAnalyser() { return this._audioGraph()?.output ?? null; }

  // --- internals ---

  _setState(s) {
    if (!STATES.includes(s) || this.state === s) return;
    this.state = s;
    this._emit("state", { state: s });
  }

  _emit(type, detail) { this.dispatchEvent(new CustomEvent(type, { detail })); }

  _wsURL() {
    const u = new URL(this.url);
    u.protocol = u.protocol === "https:" ? "wss:" : "ws:";
    u.pathname += "/signal";
    return u.toString();
  }

  // _connect opens the signalling socket with a first message and resolves with the welcome.
  _connect(first) {
    return new Promise((resolve, reject) => {
      const ws = new WebSocket(this._wsURL());
      let welcomed = false;
      ws.onopen = () => ws.send(JSON.stringify(first));
      ws.onmessage = (ev) => {
        let m;
        try { m = JSON.parse(ev.data); } catch { return; }
        this._lastHeard = Date.now();
        if (!welcomed) {
          if (m.type === "welcome") {
            welcomed = true;
            this.ws = ws;
            resolve(m.welcome);
          } else if (m.type === "error") {
            this._emit("error", { code: m.code, message: m.message });
            const e = new Error(m.message);
            e.code = m.code;
            reject(e);
          }
          return;
        }
        this._onSignal(m);
      };
      ws.onerror = () => { if (!welcomed) reject(new Error("cannot reach the voice service")); };
      ws.onclose = (ev) => {
        if (!welcomed) {
          if (ev.code >= 4000) return; // the error message said why
          reject(new Error("the voice service closed the connection"));
          return;
        }
        if (this.ws !== ws) return; // an older socket, already replaced
        this.ws = null;
        if (!this._ended) this._reconnect();
      };
    });
  }

  // _reconnect reopens the socket with the session's secret until the grace period is over.
  async _reconnect() {
    if (this._reconnecting || this._ended) return;
    this._reconnecting = true;
    this._setState("reconnecting");
    const grace = this.welcome?.grace_ms ?? 10000;
    const until = Date.now() + grace;
    while (!this._ended && Date.now() < until) {
      try {
        await this._connect({ type: "resume", session: this.welcome.session, secret: this.welcome.secret });
        this._reconnecting = false;
        if (this.pc?.connectionState === "connected") this._setState("connected");
        if (this._restartWanted) this.restartIce();
        return;
      } catch (e) {
        if (e.code) { this._end("network_lost"); return; }
        await new Promise((r) => setTimeout(r, 1000));
      }
    }
    this._reconnecting = false;
    if (!this._ended) this._end("network_lost");
  }

  _send(m) {
    if (this.ws && this.ws.readyState === WebSocket.OPEN) {
      this.ws.send(JSON.stringify(m));
      return true;
    }
    return false;
  }

  // _app sends a page request on the data channel (or the socket while it is not open).
  _app(m) {
    if (this.dc && this.dc.readyState === "open") {
      this.dc.send(JSON.stringify(m));
      return;
    }
    this._send(m);
  }

  _createPeer(w) {
    const pc = new RTCPeerConnection({ iceServers: w.ice_servers || [] });
    this.pc = pc;
    let recv = w.receive || 1;
    if (w.send && this.localStream) {
      const track = this.localStream.getAudioTracks()[0];
      pc.addTrack(track, this.localStream);
      recv--;
    }
    for (let i = 0; i < recv; i++) pc.addTransceiver("audio", { direction: "recvonly" });
    const dc = pc.createDataChannel("parley", { ordered: true });
    this.dc = dc;
    dc.onmessage = (ev) => {
      let m;
      try { m = JSON.parse(ev.data); } catch { return; }
      this._lastHeard = Date.now();
      this._onEvent(m);
    };
    pc.onicecandidate = (ev) => this._send({ type: "candidate", candidate: ev.candidate ? ev.candidate.toJSON() : null });
    pc.ontrack = (ev) => {
      const stream = ev.streams[0] || new MediaStream([ev.track]);
      const index = this.remoteStreams.length;
      this.remoteStreams.push(stream);
      this.remoteTracks.push(ev.track);
      const el = new Audio();
      el.autoplay = true;
      el.srcObject = new MediaStream([ev.track]);
      el.play().catch(() => {});
      this.audioElements.push(el);
      this._graphAdd(ev.track);
      this._emit("track", { track: ev.track, stream, index });
    };
    pc.onconnectionstatechange = () => {
      switch (pc.connectionState) {
        case "connected":
          this._restartWanted = false;
          if (!this._reconnecting) this._setState("connected");
          break;
        case "disconnected":
        case "failed":
          this._setState("reconnecting");
          this.restartIce();
          break;
      }
    };
  }

  // _offer sends an offer; iceRestart gathers new ICE credentials (RFC 8445 §9).
  async _offer(iceRestart) {
    if (this._makingOffer) { this._restartWanted = true; return; }
    this._makingOffer = true;
    try {
      const offer = await this.pc.createOffer({ iceRestart });
      await this.pc.setLocalDescription(offer);
      if (!this._send({ type: "offer", sdp: this.pc.localDescription.sdp })) this._restartWanted = true;
    } finally {
      this._makingOffer = false;
    }
  }

  // restartIce renegotiates ICE after a network change or a lost connection.
  restartIce() {
    if (this._ended || !this.pc) return;
    if (!this.ws) { this._restartWanted = true; return; }
    this._offer(true).catch((e) => this._emit("error", { code: "ice_restart", message: String(e) }));
  }

  async _onSignal(m) {
    switch (m.type) {
      case "answer":
        await this.pc.setRemoteDescription({ type: "answer", sdp: m.sdp });
        for (const c of this._pending.splice(0)) await this.pc.addIceCandidate(c).catch(() => {});
        this.answers = (this.answers || 0) + 1;
        if (this._restartWanted && this.pc.connectionState !== "connected") {
          this._restartWanted = false;
          this.restartIce();
        }
        break;
      case "candidate": {
        const c = m.candidate || null;
        if (!c) break;
        if (this.pc.remoteDescription) await this.pc.addIceCandidate(c).catch(() => {});
        else this._pending.push(c);
        break;
      }
      case "restart":
        this.restartIce();
        break;
      case "bye":
        this._end(m.reason || "completed");
        break;
      case "error":
        this._emit("error", { code: m.code, message: m.message });
        break;
      case "pong":
        break;
      default:
        this._onEvent(m);
    }
  }

  _onEvent(m) {
    switch (m.type) {
      case "line":
        if (m.line && !this._seqs.has(m.line.seq)) {
          this._seqs.add(m.line.seq);
          this.transcript.push(m.line);
          this.transcript.sort((a, b) => a.seq - b.seq);
          this._emit("transcript", m.line);
        }
        break;
      case "interim":
        this._emit("interim", { text: m.text });
        break;
      case "agent_saying":
        this._emit("agent-saying", { reply: m.reply, text: m.text });
        break;
      case "state":
        this._emit("agent-state", { state: m.state });
        break;
      case "takeover":
        this._emit("takeover", { on: !!m.on });
        break;
      case "ended":
        this._end(m.reason || "completed");
        break;
      case "error":
        this._emit("error", { code: m.code, message: m.message });
        break;
    }
  }

  _startHeartbeat(ms) {
    this._hb = setInterval(() => {
      const m = { type: "ping", seq: ++this._hbSeq };
      this._send(m);
      if (this.dc && this.dc.readyState === "open") this.dc.send(JSON.stringify(m));
    }, ms);
  }

  _end(reason) {
    if (this._ended) return;
    this._ended = true;
    clearInterval(this._hb);
    globalThis.removeEventListener?.("online", this._onNetwork);
    navigator.connection?.removeEventListener?.("change", this._onNetwork);
    try { this.dc?.close(); } catch {}
    try { this.pc?.close(); } catch {}
    try { this.ws?.close(1000); } catch {}
    if (this._ownMic) for (const t of this.localStream?.getTracks() ?? []) t.stop();
    for (const el of this.audioElements) el.srcObject = null;
    this._audio?.ctx.close().catch(() => {});
    this.endReason = reason;
    this._setState("ended");
    this._emit("ended", { reason });
  }

  _audioGraph() {
    if (this._audio) return this._audio;
    const AC = globalThis.AudioContext || globalThis.webkitAudioContext;
    if (!AC) return null;
    const ctx = new AC();
    const output = ctx.createAnalyser();
    output.fftSize = 2048;
    let input = null;
    if (this.localStream) {
      input = ctx.createAnalyser();
      input.fftSize = 2048;
      ctx.createMediaStreamSource(this.localStream).connect(input);
    }
    this._audio = { ctx, input, output };
    for (const t of this.remoteTracks) ctx.createMediaStreamSource(new MediaStream([t])).connect(output);
    return this._audio;
  }

  _graphAdd(track) {
    if (this._audio) this._audio.ctx.createMediaStreamSource(new MediaStream([track])).connect(this._audio.output);
  }

  _level(an) {
    if (!an) return 0;
    if (an.context.state === "suspended") an.context.resume().catch(() => {});
    const buf = new Float32Array(an.fftSize);
    an.getFloatTimeDomainData(buf);
    let sum = 0;
    for (const v of buf) sum += v * v;
    return Math.sqrt(sum / buf.length);
  }
}

// join creates a call and starts it.
export async function join(options) {
  const call = new ParleyCall(options);
  await call.start();
  return call;
}
