// The skein transcript viewer: the session list (/) and a session page
// (/sessions/{id}) with basic, verbose and debug views, live over SSE.
// It talks only to this server's API, authenticated by the cookie that
// signing in with ?token= set. No framework, no external requests.
"use strict";

const VIEWS = ["basic", "verbose", "debug"];
const PAGE = 20;
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
    body.replaceChildren(...data.sessions.map(s => el("tr", { "data-id": s.id },
      el("td", {}, el("a", { href: "/sessions/" + encodeURIComponent(s.id) }, s.title || s.id)),
      el("td", {}, statusBadge(s), s.running ? el("span", { class: "muted" }, " running") : null),
      el("td", {}, s.agent || ""),
      el("td", {}, s.repoId || ""),
      el("td", {}, String(s.messageCount)),
      el("td", {}, fmtTime(s.updatedAt)))));
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
  if (text) box.append(el("div", { class: "text" }, text));
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
  return el("div", { class: "msg event", "data-event": e.type, "data-seq": e.seq },
    el("div", { class: "who" }, `event ${e.type} · seq ${e.seq}`), el("pre", {}, JSON.stringify(rest)));
}

async function sessionPage(id) {
  const q = new URLSearchParams(location.search);
  let view = VIEWS.includes(q.get("view")) ? q.get("view") : "basic";
  let session, messages = [], events = [], live = null, source = null, state = null;

  const title = el("h1", {});
  const meta = el("div", { class: "meta" });
  const badge = el("span", {});
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
  }
  viewGroup.addEventListener("change", e => setView(e.target.value));

  // What the running loop is doing, from its latest state event.
  function stateText() {
    if (state && state.state === "llm_generating") return "generating…";
    if (state && state.state === "tool_executing") return `running tool ${state.tool || ""}…`;
    return "running…";
  }

  function renderHead() {
    document.title = (session.title || session.id) + " · skein";
    title.textContent = session.title || session.id;
    badge.replaceChildren(statusBadge(session), session.running ? el("span", { class: "muted", id: "running" }, " " + stateText()) : null);
    meta.replaceChildren(`id ${session.id}`, session.agent ? ` · agent ${session.agent}` : "", session.repoId ? ` · repo ${session.repoId}` : "",
      ` · ${session.messageCount} messages · ${session.turns} turns · updated ${fmtTime(session.updatedAt)}`,
      session.metadata && session.metadata.reason ? ` · ended: ${session.metadata.reason}` : "");
    const open = session.status === "active";
    input.disabled = send.disabled = !open || session.running;
    cancel.disabled = !session.running;
  }

  function renderTranscript() {
    const items = [];
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
      if (e.type === "state") { // live only, never stored
        state = e.state === "idle" ? null : e;
        if (session) renderHead();
        return;
      }
      if (events.length && e.seq <= events[events.length - 1].seq) return;
      events.push(e);
      if (e.type === "message" && e.role === "assistant") live = null;
      if (e.type === "message" || e.type === "turn_end" || e.type === "status" || e.type === "healed" || e.type === "info") refreshSoon();
      else if (view === "debug") renderTranscript();
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
      await api("POST", `/api/sessions/${encodeURIComponent(id)}/prompt`, { text });
      input.value = "";
      session.running = true;
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
    el("div", { class: "session-head" }, el("div", {}, title, badge, meta), viewGroup),
    transcript, form);
  try {
    await refresh();
  } catch (e) {
    app.replaceChildren(el("p", {}, el("a", { href: "/" }, "← All sessions")), showError(e));
    return;
  }
  setView(view);
  connect();
}

const m = location.pathname.match(/^\/sessions\/([^/]+)$/);
if (m) sessionPage(decodeURIComponent(m[1])); else listPage();
