// The join page's script (/call/{id} and /listen/{id}): a start button, level meters, the live
// transcript, text, keypad, takeover and hang-up, on top of parley.js.
import { ParleyCall } from "./parley.js";

const $ = (id) => document.getElementById(id);
const listen = location.pathname.startsWith("/listen/");
const params = new URLSearchParams(location.hash.slice(1) || location.search.slice(1));
let token = params.get("token") || "";
if (!token) $("token-row").hidden = false;
if (listen) {
  $("title").textContent = "Listening to a Parley call";
  $("mic-row").hidden = true;
  $("text-form").hidden = true;
}
const names = { user: "Caller", agent: "Agent", system: "", note: "Note", tool: "Tool" };
for (const d of ["1","2","3","4","5","6","7","8","9","*","0","#"]) {
  const b = document.createElement("button");
  b.textContent = d;
  b.disabled = true;
  b.onclick = () => window.parley?.sendDTMF(d);
  $("keypad").append(b);
}
if (listen) $("keypad").hidden = true;

// endText says for a person why the call ended (issue 22 item 13).
const endTexts = {
  caller_hung_up: "You hung up.",
  completed: "The call is over.",
  agent_ended: "The agent ended the call.",
  transferred: "You were transferred.",
  network_lost: "The connection was lost.",
  media_timeout: "No sound came through for too long, so the call ended.",
  silence_timeout: "The call ended after a long silence.",
  max_duration: "The call reached its time limit.",
  ended_by_api: "The call was ended by the service.",
  no_answer: "Nobody joined in time.",
  provider_error: "The agent could not go on because of a technical problem.",
  credit_exhausted: "The call ended: its account is out of credit.",
  shutdown: "The service restarted, so the call ended.",
  failed: "The call failed.",
};
function endText(reason) { return endTexts[reason] || "The call ended."; }

// The agent's replies as they are spoken: one line per reply that grows chunk by chunk,
// replaced by the complete line when it comes. The next reply may start to play before the
// line of the last one comes (audio is queued ahead), so they are kept in order of reply.
const saying = new Map();
function agentSaying(d) {
  let li = saying.get(d.reply);
  if (!li) {
    li = document.createElement("li");
    li.className = "agent speaking";
    li.dataset.reply = d.reply;
    const who = document.createElement("span");
    who.className = "who";
    who.textContent = window.parley?.agentName || names.agent;
    li.append(who, document.createTextNode(""));
    $("transcript").append(li);
    saying.set(d.reply, li);
  }
  const t = li.lastChild;
  t.textContent = (t.textContent ? t.textContent + " " : "") + d.text;
  $("transcript").scrollTop = $("transcript").scrollHeight;
}
// doneSaying takes away the oldest reply shown as spoken: its line came.
function doneSaying() {
  const first = saying.keys().next();
  if (first.done) return null;
  const li = saying.get(first.value);
  saying.delete(first.value);
  return li;
}

function setState(s, label) {
  $("state").dataset.state = s;
  $("state").textContent = label || s;
}

function addLine(l) {
  const live = l.role === "agent" && !(l.meta && l.meta.human) ? doneSaying() : null;
  const li = document.createElement("li");
  li.className = l.role;
  li.dataset.seq = l.seq;
  const who = document.createElement("span");
  who.className = "who";
  const human = l.meta && l.meta.human;
  who.textContent = l.role === "user" ? (window.parley?.participantName || names.user) : human ? "Human agent" : l.role === "agent" ? (window.parley?.agentName || names.agent) : (names[l.role] ?? l.role);
  li.append(who, document.createTextNode(l.text + (l.interrupted ? " …" : "")));
  if (live) live.replaceWith(li); else $("transcript").append(li);
  $("transcript").scrollTop = $("transcript").scrollHeight;
}

function meters() {
  const call = window.parley;
  if (!call || call.state === "ended") return;
  $("mic-level").style.width = Math.min(100, call.inputLevel() * 400) + "%";
  $("out-level").style.width = Math.min(100, call.outputLevel() * 400) + "%";
  requestAnimationFrame(meters);
}

$("start").onclick = async () => {
  token = token || $("token").value.trim();
  if (!token) { $("error").textContent = "A token is needed to join."; return; }
  $("start").disabled = true;
  $("start").textContent = "Connecting…";
  $("error").textContent = "";
  const call = new ParleyCall({ url: location.origin + location.pathname, token });
  window.parley = call;
  call.addEventListener("state", (e) => setState(e.detail.state));
  call.addEventListener("transcript", (e) => addLine(e.detail));
  call.addEventListener("interim", (e) => { $("interim").textContent = e.detail.text; });
  call.addEventListener("agent-saying", (e) => agentSaying(e.detail));
  call.addEventListener("agent-state", (e) => { if (e.detail.state !== "user_speaking") $("interim").textContent = ""; });
  call.addEventListener("error", (e) => { $("error").textContent = e.detail.message || e.detail.code; });
  call.addEventListener("takeover", (e) => {
    $("takeover").textContent = e.detail.on ? "Hand back" : "Take over";
    $("takeover").dataset.on = e.detail.on ? "1" : "";
  });
  call.addEventListener("ended", (e) => {
    setState("ended", endText(e.detail.reason));
    $("start").textContent = "Ended";
    for (const li of saying.values()) li.classList.remove("speaking");
    saying.clear();
    for (const b of document.querySelectorAll("button")) b.disabled = true;
    $("text").disabled = true;
  });
  try {
    await call.start();
  } catch (e) {
    setState("failed");
    $("error").textContent = e.message;
    $("start").textContent = "Start";
    $("start").disabled = false;
    return;
  }
  $("start").textContent = "Connected";
  if (call.agentName && !listen) {
    document.title = "Call with " + call.agentName;
    $("title").textContent = "Call with " + call.agentName;
  }
  $("hangup").disabled = false;
  $("mute").disabled = call.role === "listener";
  $("text").disabled = $("send").disabled = call.role !== "caller";
  for (const b of $("keypad").querySelectorAll("button")) b.disabled = call.role !== "caller";
  if (call.role === "takeover") { $("takeover").hidden = false; $("takeover").disabled = false; $("mic-row").hidden = false; }
  requestAnimationFrame(meters);
};
$("hangup").onclick = () => window.parley?.hangup();
$("mute").onclick = () => {
  const call = window.parley;
  call.setMuted(!call.muted);
  $("mute").textContent = call.muted ? "Unmute" : "Mute";
};
$("takeover").onclick = () => window.parley?.takeover(!$("takeover").dataset.on);
$("text-form").onsubmit = (e) => {
  e.preventDefault();
  window.parley?.sendText($("text").value);
  $("text").value = "";
};
