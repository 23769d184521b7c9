// callagent console: keeps the live list current from /api/events, and marks messages handled.
// The server sends a snapshot of the calls that are up, then each event as it happens (see
// agent/console/events.py); this applies them as the hub does and redraws the changed call.
"use strict";

const calls = new Map();  // id -> call, as the hub's snapshot has it
let lastSeq = 0;
// What appeared on the page and when, for whoever measures it (the browser test reads these).
window.consoleShown = [];  // {call, who, turn, text, at: agent's ms, shown: ms}
window.consoleGone = {};   // call id -> ms it left the list
const shownKeys = new Set();

function h(tag, attrs, ...kids) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) el.setAttribute(k, v);
  for (const kid of kids) el.append(kid);
  return el;
}

function duration(since) {
  if (!since) return "";
  const s = Math.max(0, Math.round(Date.now() / 1000 - since));
  return `${Math.floor(s / 60)}:${String(s % 60).padStart(2, "0")}`;
}

function line(call, ln) {
  const key = `${call.id}/${ln.turn}/${ln.who}/${ln.final}/${ln.text}`;
  if (!shownKeys.has(key)) {
    shownKeys.add(key);
    window.consoleShown.push({call: call.id, who: ln.who, turn: ln.turn, text: ln.text,
                              final: ln.final, at: ln.at * 1000, shown: Date.now()});
  }
  return h("li", {class: ln.who + (ln.final ? "" : " partial"), "data-turn": ln.turn},
           h("span", {class: "who"}, ln.who === "caller" ? "Caller" : "Agent"), ln.text);
}

function card(call) {
  const link = h("a", {href: `/calls/${encodeURIComponent(call.id)}`}, call.id);
  const head = h("div", {class: "head"}, link, ` ${call.caller || "unknown caller"} to `
    + `${call.extension || "?"} (${call.profile || "?"}${call.worker ? ", " + call.worker : ""}) `,
    h("span", {class: "state"}, call.state), " ",
    h("span", {class: "dur", "data-since": call.answered_at || ""}, duration(call.answered_at)),
    ` · ${call.turns} turns`
    + (call.voice_to_voice_s != null ? ` · last reply after ${Math.round(call.voice_to_voice_s * 1000)} ms` : ""));
  const conv = h("ol", {class: "conv"}, ...call.lines.map((ln) => line(call, ln)));
  return h("div", {class: "call", id: `call-${call.id}`, "data-call": call.id}, head, conv);
}

function box() { return document.getElementById("live"); }

function shown(call) {
  const only = box() && box().dataset.only;
  return !only || only === call.id;
}

function draw(id) {
  const root = box();
  if (!root) return;
  const old = document.getElementById(`call-${id}`);
  const call = calls.get(id);
  if (call && shown(call)) {
    const fresh = card(call);
    if (old) old.replaceWith(fresh); else root.append(fresh);
  } else if (old) {
    old.remove();
    window.consoleGone[id] = Date.now();
  }
  const empty = root.querySelector(".empty");
  const any = root.querySelector(".call");
  if (!any && !empty) root.append(h("p", {class: "empty"}, "No calls are up."));
  if (any && empty) empty.remove();
}

function setLine(call, turn, who, d, at) {
  const i = call.lines.findIndex((l) => l.turn === turn && l.who === who);
  if (d.dropped) { if (i >= 0) call.lines.splice(i, 1); return; }
  const ln = {turn, who, text: d.text || "", at, final: who === "caller" ? true : !!d.final};
  if (i >= 0) call.lines[i] = ln; else call.lines.push(ln);
}

function apply(ev) {
  if (ev.seq && ev.seq <= lastSeq) return;
  lastSeq = ev.seq || lastSeq;
  const d = ev.data || {};
  const gone = ev.kind === "call.ended" || ev.kind === "call.gone"
    || (ev.kind === "state" && d.state === "ended");
  if (gone) { calls.delete(ev.call_id); draw(ev.call_id); return; }
  let call = calls.get(ev.call_id);
  if (!call) {
    call = {id: ev.call_id, caller: "", extension: "", profile: "", worker: "", state: "ringing",
            answered_at: null, turns: 0, voice_to_voice_s: null, lines: []};
    calls.set(ev.call_id, call);
  }
  if (ev.kind === "call.started") Object.assign(call, {caller: d.caller, extension: d.extension,
    profile: d.profile, worker: d.worker, answered_at: d.answered_at});
  else if (ev.kind === "state") call.state = d.state;
  else if (ev.kind === "heard") setLine(call, d.turn, "caller", d, ev.at);
  else if (ev.kind === "reply") setLine(call, d.turn, "agent", d, ev.at);
  else if (ev.kind === "turn") {
    call.turns = d.index + 1;
    if (!d.unanswered && d.voice_to_voice_s != null) call.voice_to_voice_s = d.voice_to_voice_s;
  } else return;
  draw(call.id);
}

function snapshot(snap) {
  const before = new Set(calls.keys());
  calls.clear();
  for (const c of snap.calls) calls.set(c.id, c);
  lastSeq = snap.seq;
  for (const id of new Set([...before, ...calls.keys()])) draw(id);
  if (!calls.size) draw("");
}

function connect() {
  const status = document.getElementById("stream");
  const es = new EventSource("/api/events");
  es.onopen = () => { if (status) status.textContent = "live"; };
  es.onerror = () => { if (status) status.textContent = "reconnecting..."; };
  es.onmessage = (m) => {
    const ev = JSON.parse(m.data);
    if (ev.kind === "snapshot") snapshot(ev); else apply(ev);
  };
}

function markHandled(button) {
  button.disabled = true;
  fetch(`/api/messages/${button.dataset.id}/handled`, {method: "POST", body: "{}"})
    .then((r) => r.ok ? r.json() : Promise.reject(r.status))
    .then((d) => { button.replaceWith(`handled ${d.handled_at.slice(0, 19).replace("T", " ")}`); })
    .catch(() => { button.disabled = false; });
}

document.addEventListener("DOMContentLoaded", () => {
  const boot = document.getElementById("boot");
  if (box()) {
    if (boot) snapshot(JSON.parse(boot.textContent));
    connect();
    setInterval(() => document.querySelectorAll(".dur").forEach((el) => {
      el.textContent = duration(parseFloat(el.dataset.since));
    }), 1000);
  }
  document.querySelectorAll("button.handle").forEach((b) => {
    b.addEventListener("click", () => markHandled(b));
  });
});
