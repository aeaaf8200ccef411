// The skein transcript viewer: the session list (/), a session page
// (/sessions/{id}) with basic, verbose, debug and timeline views, live
// over SSE, the workflow runs (/runs, /runs/{id}) and the eval runs
// (/evals, /evals/{id}: the matrix, each case's session). It talks only to
// this server's API, authenticated by the cookie that signing in with
// ?token= set. No framework, no external requests. Nothing is ever
// rendered from a null or undefined value: el() skips them, and every
// optional field is tested before it is shown.
"use strict";

const VIEWS = ["basic", "verbose", "debug", "timeline"];
const PAGE = 20;
const LIVE_MS = 2000; // how often the lists and a running run are refreshed
const COLLAPSE_LINES = 12, COLLAPSE_CHARS = 1500; // longer texts start collapsed
const app = document.getElementById("app");

// el builds an element: el("p", {class: "x"}, "text", child, ...).
// Text is always set as text, never parsed as HTML.
function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
    else e.setAttribute(k, v === true ? "" : v);
  }
  for (const c of children.flat()) {
    if (c === null || c === undefined) continue;
    e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return e;
}

class APIError extends Error {
  constructor(status, code, message) { super(message); this.status = status; this.code = code; }
}

async function api(method, path, body) {
  const opts = { method, headers: {}, credentials: "same-origin" };
  if (body !== undefined) {
    opts.headers["Content-Type"] = "application/json";
    opts.body = JSON.stringify(body);
  }
  const resp = await fetch(path, opts);
  if (resp.status === 204) return null;
  const data = await resp.json().catch(() => ({}));
  if (!resp.ok) {
    const err = data.error || {};
    throw new APIError(resp.status, err.code || "error", err.message || resp.statusText);
  }
  return data;
}

function showError(err) {
  const box = el("div", { class: "notice error", role: "alert" });
  if (err.status === 401) {
    box.append("Not signed in. Open this page with ?token=TOKEN (the token skein serve printed or was given).");
  } else {
    box.append(err.message || String(err));
  }
  return box;
}

function fmtTime(s) {
  if (!s) return "";
  const d = new Date(s);
  return isNaN(d) ? s : d.toLocaleString();
}

function statusBadge(s) { return el("span", { class: "status " + s.status, "data-status": s.status }, s.status); }

// sessionHref is the viewer's page of a session (a workflow stage's id
// "RUN/NODE" is one path segment, its slash escaped).
function sessionHref(id) { return "/sessions/" + encodeURIComponent(id); }

function plural(n, one, many) { return `${n} ${n === 1 ? one : (many || one + "s")}`; }

function fmtMs(ms) {
  if (typeof ms !== "number") return "";
  if (ms < 1000) return ms + " ms";
  if (ms < 60000) return (ms / 1000).toFixed(ms < 10000 ? 2 : 1) + " s";
  return Math.floor(ms / 60000) + " min " + Math.round((ms % 60000) / 1000) + " s";
}

function fmtCost(usd) {
  if (typeof usd !== "number") return "";
  return "$" + (usd === 0 ? "0" : usd >= 0.0001 ? usd.toFixed(4) : usd.toPrecision(2));
}

function fmtTokens(i, o) {
  if (!i && !o) return "";
  return `${(i || 0).toLocaleString()} in · ${(o || 0).toLocaleString()} out`;
}

// textBlock shows text, the first lines of a long one with the rest
// behind a "show all" disclosure.
function textBlock(text, cls) {
  const lines = text.split("\n");
  if (lines.length <= COLLAPSE_LINES && text.length <= COLLAPSE_CHARS) return el("div", { class: cls || "text" }, text);
  let head = lines.slice(0, COLLAPSE_LINES).join("\n");
  if (head.length > COLLAPSE_CHARS) head = head.slice(0, COLLAPSE_CHARS);
  const box = el("div", { class: "collapsible" });
  const short = el("div", { class: (cls || "text") + " clipped" }, head + " …");
  const full = el("details", { class: "more" }, el("summary", {}, `show all (${plural(lines.length, "line")}, ${text.length.toLocaleString()} characters)`),
    el("div", { class: cls || "text" }, text));
  full.addEventListener("toggle", () => { short.hidden = full.open; });
  box.append(short, full);
  return box;
}

// poll calls fn every LIVE_MS while the page shows the same path: the
// live lists. fn's failures are shown by fn itself.
function poll(fn) {
  const path = location.pathname;
  const tick = async () => {
    if (location.pathname !== path) return;
    if (!document.hidden) await fn();
    setTimeout(tick, LIVE_MS);
  };
  setTimeout(tick, LIVE_MS);
}

// ---- the session list ----

async function listPage() {
  document.title = "skein sessions";
  const q = new URLSearchParams(location.search);
  const state = { status: q.get("status") || "", agent: q.get("agent") || "", q: q.get("q") || "", offset: Number(q.get("offset") || 0) };
  let agents = [];
  try { agents = (await api("GET", "/api/agents")).agents.map(a => a.name); } catch (e) { app.replaceChildren(showError(e)); return; }

  const status = el("select", { id: "f-status", name: "status" },
    el("option", { value: "" }, "any"), ["active", "completed", "cancelled", "error"].map(s => el("option", { value: s }, s)));
  status.value = state.status;
  const agent = el("select", { id: "f-agent", name: "agent" }, el("option", { value: "" }, "any"), agents.map(a => el("option", { value: a }, a)));
  agent.value = state.agent;
  const text = el("input", { id: "f-q", name: "q", type: "search", placeholder: "id or title", value: state.q });
  const body = el("tbody");
  const summary = el("span", { class: "muted", "aria-live": "polite" });
  const prev = el("button", { type: "button", class: "secondary", id: "prev" }, "← Newer");
  const next = el("button", { type: "button", class: "secondary", id: "next" }, "Older →");
  const newAgent = el("select", { id: "new-agent", "aria-label": "agent of the new session" }, agents.map(a => el("option", { value: a }, a)));
  const create = el("button", { type: "button", id: "new-session" }, "New session");

  async function load() {
    const p = new URLSearchParams();
    for (const k of ["status", "agent", "q"]) if (state[k]) p.set(k, state[k]);
    if (state.offset) p.set("offset", state.offset);
    history.replaceState(null, "", "/" + (p.toString() ? "?" + p : ""));
    p.set("limit", PAGE);
    let data;
    try { data = await api("GET", "/api/sessions?" + p); } catch (e) { body.replaceChildren(el("tr", {}, el("td", { colspan: 6 }, showError(e)))); return; }
    // A tree: a session whose parent is on the page is listed under it.
    const onPage = new Set(data.sessions.map(s => s.id));
    const kids = new Map();
    for (const s of data.sessions) {
      if (s.parentId && onPage.has(s.parentId)) {
        if (!kids.has(s.parentId)) kids.set(s.parentId, []);
        kids.get(s.parentId).push(s);
      }
    }
    const rows = [];
    const row = (s, depth) => {
      rows.push(el("tr", { "data-id": s.id, "data-depth": depth, class: depth ? "child" : null },
        el("td", { style: depth ? `padding-left: ${0.6 + depth * 1.4}rem` : null },
          depth ? el("span", { class: "muted", "aria-hidden": "true" }, "↳ ") : null,
          el("a", { href: sessionHref(s.id) }, s.title || s.id),
          s.parentId && !depth ? el("div", { class: "meta" }, "from ", el("a", { href: sessionHref(s.parentId) }, s.parentId)) : null,
          s.childCount ? el("div", { class: "meta" }, plural(s.childCount, "child", "children")) : null),
        el("td", {}, statusBadge(s), s.running ? el("span", { class: "muted" }, " running") : null),
        el("td", {}, s.agent || ""),
        el("td", {}, s.repoId || ""),
        el("td", {}, String(s.messageCount)),
        el("td", {}, fmtTime(s.updatedAt))));
      for (const k of kids.get(s.id) || []) row(k, depth + 1);
    };
    for (const s of data.sessions) if (!(s.parentId && onPage.has(s.parentId))) row(s, 0);
    body.replaceChildren(...rows);
    if (data.sessions.length === 0) body.append(el("tr", {}, el("td", { colspan: 6, class: "muted" }, "No sessions.")));
    const last = Math.min(data.offset + data.sessions.length, data.total);
    summary.textContent = data.total ? `${data.offset + 1}–${last} of ${data.total}` : "0 sessions";
    prev.disabled = data.offset === 0;
    next.disabled = last >= data.total;
  }
  const refilter = () => { state.status = status.value; state.agent = agent.value; state.q = text.value.trim(); state.offset = 0; load(); };
  status.addEventListener("change", refilter);
  agent.addEventListener("change", refilter);
  let timer;
  text.addEventListener("input", () => { clearTimeout(timer); timer = setTimeout(refilter, 250); });
  prev.addEventListener("click", () => { state.offset = Math.max(0, state.offset - PAGE); load(); });
  next.addEventListener("click", () => { state.offset += PAGE; load(); });
  create.addEventListener("click", async () => {
    try {
      const s = await api("POST", "/api/sessions", { agent: newAgent.value });
      location.assign("/sessions/" + encodeURIComponent(s.id));
    } catch (e) { app.prepend(showError(e)); }
  });

  app.replaceChildren(
    el("h1", {}, "Sessions"),
    el("div", { class: "filters", role: "search" },
      el("label", { for: "f-status" }, "Status", status),
      el("label", { for: "f-agent" }, "Agent", agent),
      el("label", { for: "f-q" }, "Search", text),
      el("span", { class: "spacer" }),
      el("label", { for: "new-agent" }, "Agent", newAgent), create),
    el("table", {},
      el("caption", { class: "sr-only" }, "Sessions, newest first"),
      el("thead", {}, el("tr", {}, ["Title", "Status", "Agent", "Repo", "Messages", "Updated"].map(h => el("th", { scope: "col" }, h)))),
      body),
    el("div", { class: "pager" }, prev, next, summary));
  await load();
  poll(load); // the list is live
}

// ---- a session ----

function contentText(c) {
  if (typeof c === "string") return c;
  if (Array.isArray(c)) return c.filter(b => b.type === "text").map(b => b.text).join("\n");
  return "";
}

function thinkingText(c) {
  return Array.isArray(c) ? c.filter(b => b.type === "thinking").map(b => b.thinking).join("\n") : "";
}

// renderMessage returns the element of a message in a view, or null when
// the view hides it.
function renderMessage(m, view) {
  const text = contentText(m.content);
  if (view === "basic") {
    if (m.role !== "user" && m.role !== "assistant") return null;
    if (!text) return null; // an assistant message that only calls tools
  }
  const box = el("article", { class: "msg " + m.role + (m.isError ? " is-error" : ""), "data-seq": m.seq, "data-role": m.role });
  let who = m.role;
  if (m.role === "tool") who = "tool result" + (m.name ? " · " + m.name : "") + (m.isError ? " · error" : "");
  if (view === "debug") who += ` · seq ${m.seq} · ${fmtTime(m.createdAt)}` + (m.model ? " · " + m.model : "");
  box.append(el("div", { class: "who" }, who));
  if (view !== "basic") {
    const thinking = thinkingText(m.content);
    if (thinking) box.append(el("details", {}, el("summary", {}, "thinking"), el("div", { class: "text" }, thinking)));
  }
  if (text) box.append(textBlock(text));
  if (view !== "basic") {
    for (const c of m.toolCalls || []) {
      box.append(el("div", { class: "call" }, "→ " + c.name + " " + JSON.stringify(c.arguments)));
    }
  }
  if (view === "debug") {
    const raw = Object.assign({}, m);
    box.append(el("details", {}, el("summary", {}, "raw"), el("pre", {}, JSON.stringify(raw, null, 2))));
    if (m.usage) box.append(el("div", { class: "meta" }, "usage " + JSON.stringify(m.usage)));
  }
  return box;
}

function renderEvent(e) {
  const rest = Object.assign({}, e);
  for (const k of ["type", "seq", "session_id", "timestamp"]) delete rest[k];
  const box = el("div", { class: "msg event", "data-event": e.type, "data-seq": e.seq },
    el("div", { class: "who" }, `event ${e.type} · seq ${e.seq}`));
  if (e.type === "turn_start" && (e.system !== undefined || e.tools !== undefined || e.estimated_tokens !== undefined)) {
    // What the model was sent this turn (seed 004's debug view).
    box.classList.add("request");
    const parts = [];
    if (typeof e.estimated_tokens === "number") parts.push(`~${e.estimated_tokens.toLocaleString()} tokens estimated`);
    if (Array.isArray(e.tools)) parts.push(plural(e.tools.length, "tool"));
    box.append(el("div", { class: "meta" }, `request of turn ${e.iteration}` + (parts.length ? " · " + parts.join(" · ") : "")));
    if (typeof e.system === "string") {
      box.append(el("details", { class: "system-prompt" }, el("summary", {}, `system prompt (${e.system.length.toLocaleString()} characters)`),
        el("pre", {}, e.system || "(empty)")));
    }
    if (Array.isArray(e.tools) && e.tools.length) {
      box.append(el("details", { class: "tool-schemas" }, el("summary", {}, "tool schemas"),
        el("pre", {}, JSON.stringify(e.tools, null, 2))));
    }
    return box;
  }
  box.append(textBlock(JSON.stringify(rest), "pre"));
  return box;
}

// renderTimeline shows a session's timeline (GET .../timeline): totals,
// then each turn with its model calls, tool calls and sub-agents.
function renderTimeline(t) {
  const tot = t.totals;
  const cost = tot.costKnown ? fmtCost(tot.costUsd) : (tot.costUsd ? fmtCost(tot.costUsd) + " + unpriced calls" : "unknown (no price)");
  const totals = el("dl", { class: "totals", id: "totals" },
    el("div", {}, el("dt", {}, "turns"), el("dd", { "data-total": "turns" }, String(tot.turns))),
    el("div", {}, el("dt", {}, "model calls"), el("dd", { "data-total": "modelCalls" }, String(tot.modelCalls))),
    el("div", {}, el("dt", {}, "tool calls"), el("dd", { "data-total": "toolCalls" }, String(tot.toolCalls) + (tot.toolErrors ? ` (${tot.toolErrors} failed)` : ""))),
    el("div", {}, el("dt", {}, "input tokens"), el("dd", { "data-total": "inputTokens" }, tot.inputTokens.toLocaleString())),
    el("div", {}, el("dt", {}, "output tokens"), el("dd", { "data-total": "outputTokens" }, tot.outputTokens.toLocaleString())),
    el("div", {}, el("dt", {}, "cost"), el("dd", { "data-total": "cost" }, cost)),
    el("div", {}, el("dt", {}, "time in model"), el("dd", {}, fmtMs(tot.modelMs))),
    el("div", {}, el("dt", {}, "time in tools"), el("dd", {}, fmtMs(tot.toolMs))));
  const out = [totals];
  if (t.turns.length === 0) out.push(el("p", { class: "muted" }, "No model or tool calls yet."));
  const longest = Math.max(1, ...t.turns.flatMap(tr => tr.items.map(i => i.durationMs || 0)));
  for (const tr of t.turns) {
    const head = tr.iteration ? `turn ${tr.iteration}` : "outside a loop";
    const rows = tr.items.map(i => {
      let name = i.name || i.kind;
      if (i.kind === "subagent") name = el("span", {}, "sub-agent ", el("a", { href: sessionHref(i.childId) }, i.childId), i.name ? ": " + i.name : "");
      const bar = el("span", { class: "bar " + i.kind, style: `width: ${Math.max(2, Math.round(100 * (i.durationMs || 0) / longest))}%` });
      return el("tr", { class: "item " + i.kind, "data-kind": i.kind, "data-seq": i.seq },
        el("td", {}, i.kind),
        el("td", {}, name, i.provider ? el("span", { class: "muted" }, " · " + i.provider) : null,
          i.detail ? el("div", { class: "meta" }, i.detail) : null),
        el("td", { class: "num" }, fmtMs(i.durationMs), el("div", { class: "track" }, bar)),
        el("td", { class: "num" }, fmtTokens(i.inputTokens, i.outputTokens)),
        el("td", { class: "num" }, typeof i.costUsd === "number" ? fmtCost(i.costUsd) : ""),
        el("td", {}, i.status ? el("span", { class: "status " + (i.status === "ok" || i.status === "done" ? "completed" : i.status === "error" || i.status === "failed" || i.status === "deny" ? "error" : "") }, i.status) : ""));
    });
    const section = el("section", { class: "turn", "data-iteration": tr.iteration },
      el("h3", {}, head, el("span", { class: "muted" }, ` · ${fmtTime(tr.start)}` + (tr.open ? " · not finished" : ` · ${fmtMs(tr.durationMs)}`)
        + (typeof tr.estimatedTokens === "number" && tr.estimatedTokens ? ` · ~${tr.estimatedTokens.toLocaleString()} tokens sent` : ""))),
      el("table", { class: "timeline" },
        el("thead", {}, el("tr", {}, ["kind", "what", "duration", "tokens", "cost", "status"].map(h => el("th", { scope: "col" }, h)))),
        el("tbody", {}, rows)));
    out.push(section);
  }
  return out;
}

async function sessionPage(id) {
  const q = new URLSearchParams(location.search);
  let view = VIEWS.includes(q.get("view")) ? q.get("view") : "basic";
  let session, messages = [], events = [], live = null, source = null, state = null, timeline = null, children = [];
  const childStates = {}; // child id -> its latest child_state event (not idle)

  const title = el("h1", {});
  const meta = el("div", { class: "meta", id: "session-meta" });
  const badge = el("span", {});
  const lineage = el("div", { class: "lineage", id: "lineage" });
  const ended = el("div", { id: "ended" });
  const transcript = el("section", { class: "transcript", id: "transcript", "aria-live": "polite", "aria-label": "transcript" });
  const viewGroup = el("div", { class: "views", role: "radiogroup", "aria-label": "view" },
    VIEWS.map(v => el("label", {}, el("input", { type: "radio", name: "view", value: v, id: "view-" + v }), el("span", {}, v))));
  const input = el("textarea", { id: "prompt", name: "text", placeholder: "Send a prompt (Ctrl+Enter)", "aria-label": "prompt" });
  const send = el("button", { type: "submit", id: "send" }, "Send");
  const cancel = el("button", { type: "button", id: "cancel", class: "danger" }, "Cancel turn");
  const notice = el("div", { "aria-live": "assertive" });
  const form = el("form", { class: "prompt", id: "prompt-form" }, notice, input,
    el("div", { class: "row" }, send, cancel, el("span", { class: "muted" }, el("kbd", {}, "Ctrl"), "+", el("kbd", {}, "Enter"), " sends · ", el("kbd", {}, "v"), " switches the view")));

  function setView(v) {
    view = v;
    for (const r of viewGroup.querySelectorAll("input")) r.checked = r.value === v;
    const p = new URLSearchParams(location.search);
    p.set("view", v);
    history.replaceState(null, "", location.pathname + "?" + p);
    renderTranscript();
    if (v === "timeline") loadTimeline(); // fresh on every visit
  }
  viewGroup.addEventListener("change", e => setView(e.target.value));

  // What a running loop is doing, from its latest session_state (or a
  // child's child_state) event.
  function stateText(s = state) {
    if (s && s.state === "llm_generating") return "generating…";
    if (s && s.state === "tool_executing") return `running tool ${s.tool || ""}…`;
    return "running…";
  }

  function renderHead() {
    document.title = (session.title || session.id) + " · skein";
    title.textContent = session.title || session.id;
    badge.replaceChildren(...[statusBadge(session), session.running ? el("span", { class: "muted", id: "running" }, " " + stateText()) : null,
      session.queued > 0 ? el("span", { class: "queued", id: "queued", title: "prompts waiting for the running turn; each runs as a turn of its own, in order" }, ` ${session.queued} queued`) : null].filter(Boolean));
    meta.replaceChildren(`id ${session.id}`, session.agent ? ` · agent ${session.agent}` : "", session.repoId ? ` · repo ${session.repoId}` : "",
      ` · ${plural(session.messageCount, "message")} · ${plural(session.turns, "turn")} · updated ${fmtTime(session.updatedAt)}`);
    renderLineage();
    renderEnded();
    const open = session.status === "active" || session.status === "error";
    // A prompt sent while a turn runs is queued (it runs after it).
    input.disabled = send.disabled = !open;
    send.textContent = session.running ? "Queue" : "Send";
    cancel.disabled = !session.running;
  }

  // The parent (a fork's source, a sub-agent's or a stage's run) and the
  // children, which the event stream keeps current.
  function renderLineage() {
    const parts = [];
    if (session.parentId) parts.push(el("div", { id: "parent" }, "parent ", el("a", { href: sessionHref(session.parentId), rel: "up" }, session.parentId)));
    const run = session.id.includes("/") ? session.id.slice(0, session.id.indexOf("/")) : "";
    if (run) parts.push(el("div", { id: "run" }, "stage ", el("strong", {}, session.id.slice(run.length + 1)), " of workflow run ", el("a", { href: "/runs/" + encodeURIComponent(run) }, run)));
    if (children.length) {
      parts.push(el("div", { id: "children" }, plural(children.length, "child", "children") + ": ",
        el("ul", { class: "kids" }, children.map(c => el("li", { "data-id": c.id }, el("a", { href: sessionHref(c.id) }, c.title || c.id), " ", statusBadge(c),
          childStates[c.id] ? el("span", { class: "muted child-state" }, " " + stateText(childStates[c.id])) :
            c.running ? el("span", { class: "muted" }, " running") : null)))));
    }
    lineage.replaceChildren(...parts);
  }

  function renderEnded() {
    const e = timeline && timeline.ended;
    if (!e) { ended.replaceChildren(); return; }
    const what = session.status === "active" ? "last loop ended" : "ended";
    ended.replaceChildren(el("div", { class: "notice ended " + (session.status === "error" || e.status === "error" ? "error" : ""), role: "status" },
      el("strong", {}, `${what}: ${e.status}`), " — ", e.reason));
  }

  async function loadChildren() {
    try {
      const data = await api("GET", "/api/sessions?limit=100&parentId=" + encodeURIComponent(id));
      children = data.sessions;
      if (session) renderLineage();
    } catch (e) { notice.replaceChildren(showError(e)); }
  }

  async function loadTimeline() {
    try {
      timeline = await api("GET", `/api/sessions/${encodeURIComponent(id)}/timeline`);
      if (session) renderEnded();
      if (view === "timeline") renderTranscript();
    } catch (e) { notice.replaceChildren(showError(e)); }
  }

  function renderTranscript() {
    const items = [];
    if (view === "timeline") {
      transcript.replaceChildren(...(timeline ? renderTimeline(timeline) : [el("p", { class: "muted" }, "Loading the timeline…")]));
      return;
    }
    if (view === "debug") {
      // Messages and events in log order.
      const all = messages.map(m => ({ seq: m.seq, node: renderMessage(m, view) }))
        .concat(events.filter(e => e.type !== "message").map(e => ({ seq: e.seq, node: renderEvent(e) })));
      all.sort((a, b) => a.seq - b.seq);
      for (const x of all) if (x.node) items.push(x.node);
    } else {
      for (const m of messages) { const n = renderMessage(m, view); if (n) items.push(n); }
    }
    if (live) items.push(el("article", { class: "msg assistant live", id: "live" }, el("div", { class: "who" }, "assistant · streaming"), el("div", { class: "text" }, live)));
    if (items.length === 0) items.push(el("p", { class: "muted" }, "No messages yet."));
    transcript.replaceChildren(...items);
  }

  async function refresh() {
    session = await api("GET", "/api/sessions/" + encodeURIComponent(id));
    messages = session.messages;
    renderHead();
    renderTranscript();
    loadTimeline();
    if (session.childCount !== children.length) loadChildren();
  }

  let pending = null;
  function refreshSoon() {
    if (pending) return;
    pending = setTimeout(async () => { pending = null; try { await refresh(); } catch (e) { notice.replaceChildren(showError(e)); } }, 30);
  }

  function connect() {
    const last = events.length ? events[events.length - 1].seq : 0;
    source = new EventSource(`/api/sessions/${encodeURIComponent(id)}/events?lastEventId=${last}`);
    source.onmessage = msg => {
      const e = JSON.parse(msg.data);
      if (e.type === "text_delta") {
        live = (live || "") + e.text;
        renderTranscript();
        return;
      }
      if (e.type === "session_state") { // live only, never stored
        state = e.state === "idle" ? null : e;
        if (session) renderHead();
        return;
      }
      if (e.type === "queue") { // live only: the prompts waiting now
        if (session) { session.queued = e.queued; renderHead(); }
        if (e.queued === 0) notice.querySelector("#queued-notice")?.remove();
        return;
      }
      if (e.type === "child_state") { // a sub-agent's state, live only
        if (e.state === "idle") delete childStates[e.child_id]; else childStates[e.child_id] = e;
        if (!children.some(c => c.id === e.child_id)) loadChildren();
        else if (session) renderLineage();
        return;
      }
      if (events.length && e.seq <= events[events.length - 1].seq) return;
      events.push(e);
      if (e.type === "message" && e.role === "assistant") live = null;
      if (e.type === "fork" || e.type === "subagent_start" || e.type === "subagent_end") loadChildren(); // a child appears live
      if (e.type === "message" || e.type === "turn_end" || e.type === "status" || e.type === "healed" || e.type === "info" ||
          e.type === "error" || e.type === "cancelled" || e.type === "subagent_end") refreshSoon();
      else if (view === "debug") renderTranscript();
      else if (view === "timeline") loadTimeline();
    };
    source.onerror = () => {
      // The browser reconnects by itself with Last-Event-ID; a stream the
      // server ended (a slow client) is reopened from the last event.
      if (source.readyState === EventSource.CLOSED) setTimeout(connect, 1000);
    };
  }

  form.addEventListener("submit", async e => {
    e.preventDefault();
    const text = input.value.trim();
    if (!text) return;
    send.disabled = true;
    notice.replaceChildren();
    try {
      const r = await api("POST", `/api/sessions/${encodeURIComponent(id)}/prompt`, { text });
      input.value = "";
      session.running = true;
      if (r.queued) {
        session.queued = Math.max(session.queued || 0, r.position);
        notice.replaceChildren(el("div", { class: "notice", id: "queued-notice", role: "status" },
          `Queued (position ${r.position}): it runs as its own turn after the running one.`));
      }
      renderHead();
      refreshSoon();
    } catch (err) {
      notice.replaceChildren(showError(err));
      send.disabled = false;
    }
  });
  input.addEventListener("keydown", e => {
    if (e.key === "Enter" && (e.ctrlKey || e.metaKey)) { e.preventDefault(); form.requestSubmit(); }
  });
  cancel.addEventListener("click", async () => {
    try { await api("POST", `/api/sessions/${encodeURIComponent(id)}/cancel`); } catch (err) { notice.replaceChildren(showError(err)); }
    refreshSoon();
  });
  document.addEventListener("keydown", e => {
    const t = e.target;
    if (e.key !== "v" || e.ctrlKey || e.metaKey || e.altKey || t.tagName === "TEXTAREA" || t.tagName === "INPUT" && t.type !== "radio") return;
    setView(VIEWS[(VIEWS.indexOf(view) + 1) % VIEWS.length]);
  });

  app.replaceChildren(
    el("p", {}, el("a", { href: "/" }, "← All sessions")),
    el("div", { class: "session-head" }, el("div", {}, title, badge, meta, lineage), viewGroup),
    ended, transcript, form);
  try {
    await refresh();
    await loadChildren();
    // children of children, and sessions created elsewhere, stay current
    poll(loadChildren);
  } catch (e) {
    app.replaceChildren(el("p", {}, el("a", { href: "/" }, "← All sessions")), showError(e));
    return;
  }
  setView(view);
  connect();
}

// ---- workflow runs ----

function runBadge(status) { return el("span", { class: "status run-" + status, "data-status": status }, status); }

async function runsPage() {
  document.title = "skein runs";
  const body = el("tbody");
  const summary = el("span", { class: "muted", "aria-live": "polite" });
  const problem = el("div");
  async function load() {
    let data;
    try { data = await api("GET", "/api/runs?limit=100"); } catch (e) { problem.replaceChildren(showError(e)); return; }
    problem.replaceChildren();
    body.replaceChildren(...data.runs.map(r => el("tr", { "data-id": r.id },
      // an eval run (workflow "eval:<file>") has its own page
      el("td", {}, el("a", { href: (r.workflow.startsWith("eval:") ? "/evals/" : "/runs/") + encodeURIComponent(r.id) }, r.workflow || r.id), el("div", { class: "meta" }, r.id)),
      el("td", {}, runBadge(r.status)),
      el("td", {}, String(r.steps)),
      el("td", {}, fmtTime(r.createdAt)),
      el("td", {}, fmtTime(r.updatedAt)))));
    if (data.runs.length === 0) body.append(el("tr", {}, el("td", { colspan: 5, class: "muted" }, "No workflow runs in this store.")));
    summary.textContent = plural(data.total, "run");
  }
  app.replaceChildren(el("h1", {}, "Workflow runs"), problem,
    el("table", {},
      el("caption", { class: "sr-only" }, "Workflow runs, newest first"),
      el("thead", {}, el("tr", {}, ["Workflow", "Status", "Steps", "Started", "Updated"].map(h => el("th", { scope: "col" }, h)))),
      body),
    el("div", { class: "pager" }, summary));
  await load();
  poll(load);
}

async function runPage(id) {
  document.title = "run " + id + " · skein";
  const head = el("div", {});
  const graph = el("div", { class: "graph", id: "graph", role: "list", "aria-label": "the path of the run" });
  const steps = el("tbody");
  const out = el("div", {});
  async function load() {
    let r;
    try { r = await api("GET", "/api/runs/" + encodeURIComponent(id)); } catch (e) { app.replaceChildren(el("p", {}, el("a", { href: "/runs" }, "← All runs")), showError(e)); return false; }
    document.title = (r.workflow || r.id) + " · run · skein";
    const total = r.stepList.reduce((a, s) => a + s.durationMs, 0);
    const tin = r.stepList.reduce((a, s) => a + s.inputTokens, 0), tout = r.stepList.reduce((a, s) => a + s.outputTokens, 0);
    head.replaceChildren(el("h1", {}, r.workflow || r.id), runBadge(r.status),
      el("div", { class: "meta" }, `run ${r.id} · ${plural(r.steps, "step")} · ${fmtMs(total)} in stages` + (tin || tout ? ` · ${fmtTokens(tin, tout)} tokens` : "")
        + ` · started ${fmtTime(r.createdAt)} · updated ${fmtTime(r.updatedAt)}`),
      ...[r.task ? el("div", { class: "task" }, el("strong", {}, "task "), textBlock(r.task)) : null,
        r.error ? el("div", { class: "notice error", role: "status" }, r.error) : null].filter(Boolean));
    // The graph of the path taken: each node once, in first-visit order,
    // with the transitions between them.
    graph.replaceChildren(...r.graph.nodes.map(n => {
      const outgoing = r.graph.edges.filter(e => e.from === n.name);
      return el("div", { class: "node " + n.status, role: "listitem", "data-node": n.name, "data-status": n.status },
        el("div", { class: "name" }, n.name),
        el("div", { class: "meta" }, n.status === "next" ? "runs next" : `${n.status}` + (n.visits > 1 ? ` · ${n.visits} visits` : "")),
        outgoing.length ? el("div", { class: "edges" }, outgoing.map(e => el("span", { class: "edge" }, "→ " + e.to + (e.count > 1 ? ` ×${e.count}` : "")))) : null);
    }));
    steps.replaceChildren(...r.stepList.map((s, i) => el("tr", { "data-node": s.node, "data-status": s.status },
      el("td", {}, String(i + 1)),
      el("td", {}, s.node),
      el("td", {}, runBadge(s.status), s.error ? el("div", { class: "meta error-text" }, s.error) : null),
      el("td", {}, fmtTime(s.startedAt)),
      el("td", { class: "num" }, fmtMs(s.durationMs)),
      el("td", { class: "num" }, fmtTokens(s.inputTokens, s.outputTokens)),
      el("td", {}, s.sessionId ? el("a", { href: sessionHref(s.sessionId) }, s.sessionId) : el("span", { class: "muted" }, "no session")),
      el("td", {}, s.output ? textBlock(s.output) : ""))));
    if (r.stepList.length === 0) steps.append(el("tr", {}, el("td", { colspan: 8, class: "muted" }, "No stage has run yet.")));
    out.replaceChildren(...(r.output ? [el("h2", {}, "Output"), textBlock(r.output)] : []));
    return r.status === "running";
  }
  app.replaceChildren(el("p", {}, el("a", { href: "/runs" }, "← All runs")), head,
    el("h2", {}, "Graph"), graph,
    el("h2", {}, "Stages"),
    el("table", { class: "steps" },
      el("thead", {}, el("tr", {}, ["#", "Node", "Status", "Started", "Duration", "Tokens", "Session", "Output"].map(h => el("th", { scope: "col" }, h)))),
      steps),
    out);
  if (await load()) poll(load);
}

// ---- eval runs ----

function evalHref(id) { return "/evals/" + encodeURIComponent(id); }

function fmtScore(x) { return typeof x === "number" ? x.toFixed(2) : ""; }

function fmtPct(x) { return typeof x === "number" ? Math.round(x * 100) + "%" : ""; }

function fmtDelta(x) { return typeof x === "number" ? (x >= 0 ? "+" : "−") + Math.abs(x).toFixed(2) : ""; }

// evalTitle is an eval's short name: its file's base name.
function evalTitle(e) { return (e.file || e.name || e.id).split("/").pop(); }

// fmtEvalCost is a cost, "?" when a model call was not priced.
function fmtEvalCost(usd, known) { return known ? fmtCost(usd) : "?"; }

// jsonText shows a task's output: a string as is, anything else as JSON.
function jsonText(v) {
  if (v === null || v === undefined) return "None";
  return typeof v === "string" ? v : JSON.stringify(v, null, 1).replace(/\n\s*/g, " ");
}

async function evalsPage() {
  document.title = "skein evals";
  const body = el("tbody");
  const summary = el("span", { class: "muted", "aria-live": "polite" });
  const problem = el("div");
  async function load() {
    let data;
    try { data = await api("GET", "/api/evals?limit=100"); } catch (e) { problem.replaceChildren(showError(e)); return; }
    problem.replaceChildren();
    body.replaceChildren(...data.evals.map(e => el("tr", { "data-id": e.id },
      el("td", {}, el("a", { href: evalHref(e.id) }, evalTitle(e)), el("div", { class: "meta" }, e.id)),
      el("td", {}, fmtTime(e.startedAt), el("div", { class: "meta" }, fmtMs(e.durationMs))),
      el("td", {}, `${e.cases} × ${plural(e.variants.length, "variant")} × ${e.repeat}`, el("div", { class: "meta" }, e.variants.join(", "))),
      el("td", { class: "num" }, fmtScore(e.mean)),
      el("td", { class: "num" }, fmtPct(e.passRate), e.errors ? el("div", { class: "meta error-text" }, plural(e.errors, "failed task")) : null),
      el("td", { class: "num" }, fmtEvalCost(e.costUsd, e.costKnown)),
      el("td", {}, e.baseline
        ? [el("span", { class: e.regressions ? "error-text" : "" }, e.regressions ? plural(e.regressions, "regression") : "no regression"),
          el("div", { class: "meta" }, "vs ", el("a", { href: evalHref(e.baseline) }, e.baseline))]
        : el("span", { class: "muted" }, "no baseline")))));
    if (data.evals.length === 0) body.append(el("tr", {}, el("td", { colspan: 7, class: "muted" }, "No eval runs in this store: run skein eval FILE.star with this store.")));
    summary.textContent = plural(data.total, "eval run");
  }
  app.replaceChildren(el("h1", {}, "Eval runs"), problem,
    el("table", { class: "evals" },
      el("caption", { class: "sr-only" }, "Eval runs, newest first"),
      el("thead", {}, el("tr", {}, ["Eval", "Started", "Cases × variants × repeats", "Mean", "Pass rate", "Cost", "Against baseline"].map(h => el("th", { scope: "col" }, h)))),
      body),
    el("div", { class: "pager" }, summary));
  await load();
  poll(load);
}

async function evalPage(id) {
  document.title = "eval " + id + " · skein";
  const back = el("p", {}, el("a", { href: "/evals" }, "← All eval runs"));
  let ev;
  try { ev = await api("GET", "/api/evals/" + encodeURIComponent(id)); } catch (e) { app.replaceChildren(back, showError(e)); return; }
  document.title = evalTitle(ev) + " · eval · skein";
  const head = el("div", {}, el("h1", {}, evalTitle(ev)),
    el("div", { class: "meta" }, `run ${ev.id} · ${ev.cases} cases × ${plural(ev.variantList.length, "variant")} × ${plural(ev.repeat, "repeat")} = ${plural(ev.runs, "run")}`
      + ` · ${fmtMs(ev.durationMs)} · ${ev.parallel} at once · started ${fmtTime(ev.startedAt)}`),
    el("div", { class: "meta" }, ev.name),
    ev.baseline ? el("div", { class: "meta" }, "compared with ", el("a", { href: evalHref(ev.baseline) }, ev.baseline)) : null);
  const totals = el("dl", { class: "totals", id: "eval-totals" },
    [["mean score", fmtScore(ev.mean)], ["pass rate", fmtPct(ev.passRate)], ["failed tasks", String(ev.errors)],
      ["cost", fmtEvalCost(ev.costUsd, ev.costKnown)], ["regressions", ev.baseline ? String(ev.regressions) : "no baseline"]]
      .map(([k, v]) => el("div", {}, el("dt", {}, k), el("dd", {}, v))));

  // The matrix: a row per variant, a column per scorer (mean with its
  // 95% interval, pass rate, the delta against the baseline), then the
  // variant's cost, latency and failed tasks.
  const cellOf = (v, s) => ev.matrix.find(c => c.variant === v && c.scorer === s);
  const matrix = el("table", { class: "matrix", id: "matrix" },
    el("caption", { class: "sr-only" }, "Mean score and pass rate per variant and scorer"),
    el("thead", {}, el("tr", {}, el("th", { scope: "col" }, "Variant"), ev.scorers.map(s => el("th", { scope: "col" }, s)),
      ["Cost", "p50", "p95", "Failed tasks"].map(h => el("th", { scope: "col" }, h)))),
    el("tbody", {}, ev.variantList.map(v => {
      const cells = ev.scorers.map(s => cellOf(v.name, s)).filter(Boolean);
      const any = cells[0];
      const opts = Object.entries(v.options).map(([k, x]) => `${k}=${jsonText(x)}`).join(", ");
      return el("tr", { "data-variant": v.name },
        el("th", { scope: "row" }, v.name, opts ? el("div", { class: "meta" }, opts) : null),
        ev.scorers.map(s => {
          const c = cellOf(v.name, s);
          if (!c) return el("td", { class: "muted" }, "–");
          return el("td", { class: "num cell" + (c.regression ? " regression" : ""), "data-scorer": s, "data-regression": c.regression ? "true" : null },
            el("div", { class: "score" }, fmtScore(c.mean), el("span", { class: "meta" }, ` [${fmtScore(c.ciLow)}, ${fmtScore(c.ciHigh)}]`)),
            el("div", { class: "track", title: `pass rate ${fmtPct(c.passRate)}` }, el("span", { class: "bar", "data-w": c.passRate })),
            el("div", { class: "meta" }, `${fmtPct(c.passRate)} pass · n ${c.n}`),
            c.hasBaseline ? el("div", { class: "meta delta" + (c.regression ? " error-text" : "") },
              `${fmtDelta(c.deltaMean)} vs ${fmtScore(c.baselineMean)}` + (c.regression ? " · regression" : "")) : null);
        }),
        el("td", { class: "num" }, any ? fmtEvalCost(any.costUsd, any.costKnown) : ""),
        el("td", { class: "num" }, any ? fmtMs(Math.round(any.p50Ms)) : ""),
        el("td", { class: "num" }, any ? fmtMs(Math.round(any.p95Ms)) : ""),
        el("td", { class: "num" + (any && any.errors ? " error-text" : "") }, any ? String(any.errors) : ""));
    })));
  // the pass-rate bars: widths set from script (the CSP forbids inline styles in markup)
  for (const b of matrix.querySelectorAll(".bar[data-w]")) b.style.width = (Number(b.dataset.w) * 100).toFixed(1) + "%";

  const failing = ev.newlyFailing.length
    ? el("div", { class: "notice error newly-failing", id: "newly-failing" }, el("strong", {}, `Newly failing (${ev.newlyFailing.length}): `),
      ev.newlyFailing.join("; "))
    : null;

  // The cases: every result, failures first when asked; each links to
  // its case's session.
  const onlyFailing = el("input", { type: "checkbox", id: "only-failing" });
  const rows = el("tbody");
  const showRepeat = ev.repeat > 1;
  function renderCases() {
    const list = ev.results.filter(r => !onlyFailing.checked || !r.pass);
    rows.replaceChildren(...list.map(r => el("tr", { class: r.pass ? "pass" : "fail", "data-case": r.case, "data-variant": r.variant },
      el("td", {}, r.case, showRepeat ? el("div", { class: "meta" }, "repeat " + (r.repeat + 1)) : null),
      el("td", {}, r.variant),
      el("td", {}, r.error ? el("div", { class: "error-text" }, "task failed: " + r.error) : null,
        r.scores.map(s => el("div", { class: "scoreline " + (s.pass ? "pass" : "fail") },
          el("span", { class: "mark", "aria-label": s.pass ? "passed" : "failed" }, s.pass ? "✓" : "✗"), ` ${s.scorer} ${fmtScore(s.score)}`,
          s.reason && !r.error ? el("span", { class: "meta" }, " · " + s.reason) : null))),
      el("td", {}, r.error ? "" : textBlock(jsonText(r.output))),
      el("td", { class: "num" }, fmtMs(Math.round(r.latencyMs)), r.calls ? el("div", { class: "meta" }, plural(r.calls, "call") + (r.cachedCalls ? `, ${r.cachedCalls} cached` : "")) : null),
      el("td", { class: "num" }, r.calls ? fmtEvalCost(r.costUsd, r.costKnown) : ""),
      el("td", {}, r.sessionId ? el("a", { href: sessionHref(r.sessionId), class: "case-session" }, r.sessionId) : el("span", { class: "muted" }, "no session")))));
    if (list.length === 0) rows.append(el("tr", {}, el("td", { colspan: 7, class: "muted" }, "Every case passed.")));
  }
  onlyFailing.addEventListener("change", renderCases);
  renderCases();

  app.replaceChildren(back, head, totals,
    el("h2", {}, "Matrix"), matrix, failing,
    el("h2", {}, "Cases"),
    el("div", { class: "filters" }, el("label", { class: "inline" }, onlyFailing, " only cases that did not pass")),
    el("table", { class: "cases", id: "cases" },
      el("thead", {}, el("tr", {}, ["Case", "Variant", "Scores", "Output", "Latency", "Cost", "Session"].map(h => el("th", { scope: "col" }, h)))),
      rows));
}

const route = location.pathname;
let m;
if ((m = route.match(/^\/sessions\/([^/]+)$/))) sessionPage(decodeURIComponent(m[1]));
else if ((m = route.match(/^\/runs\/([^/]+)$/))) runPage(decodeURIComponent(m[1]));
else if (route === "/runs") runsPage();
else if ((m = route.match(/^\/evals\/([^/]+)$/))) evalPage(decodeURIComponent(m[1]));
else if (route === "/evals") evalsPage();
else listPage();
