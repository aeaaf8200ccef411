// Package serve is skein's session API over HTTP: the server behind
// `skein serve`.
//
// It serves the sessions of one session store as JSON resources under
// /api/sessions (create, list with filters and paging, get, prompt,
// messages, cancel, delete), their event logs as Server-Sent Events, a
// health check, Prometheus metrics, an OpenAPI document and an embedded
// transcript viewer. Prompts run in the background on agents, which the
// server reaches through the Agent interface; it never imports Starlark
// (package vm's Handler implements Agent for .star files).
//
// Invariants:
//
//   - One turn at a time per session; at most Config.MaxRunning turns at
//     once; at most Config.MaxSessions served sessions active at once.
//   - A prompt is acknowledged (202) only once its user message is
//     committed to the store.
//   - Every turn ends with the session valid provider input: a cancelled
//     turn is healed by the agent loop, and the server heals again after
//     any turn that ends with tool calls left open.
//   - Event delivery never blocks a turn: each SSE client has a bounded
//     buffer, and a client that falls behind is disconnected (it resumes
//     with Last-Event-ID).
//   - The bearer token is compared in constant time and never logged.
package serve
