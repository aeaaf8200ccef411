// Package serve is skein's session API over HTTP: the server behind
// `skein serve`.
//
// It serves the sessions of one session store as JSON resources under
// /api/sessions (create, list with filters and paging, get, prompt,
// messages, cancel, complete, delete), their event logs as Server-Sent Events, a
// health check, Prometheus metrics, an OpenAPI document and an embedded
// transcript viewer. Prompts run in the background on agents, which the
// server reaches through the Agent interface; it never imports Starlark
// (package vm's Handler implements Agent for .star files).
//
// Invariants:
//
//   - One turn at a time per session; at most Config.MaxRunning turns at
//     once in this process; at most Config.MaxSessions served sessions
//     active at once. The first and the last hold across every server
//     sharing the store (replicas): a turn holds its session's turn lock
//     (sessions.Locker, from the backend when it is shared), and the
//     active count is read from the store under a create lock.
//   - An SSE stream sees the events of every process writing the
//     session: those of this one as they are committed, those of others
//     from the store within Config.PollInterval.
//   - A prompt that starts a turn is acknowledged (202) only once its
//     user message is committed to the store. A prompt sent while a turn
//     of its session runs is queued in this process (up to MaxQueued) and
//     runs after it, in order; it is stored when its turn starts.
//   - A prompt past the session's turn cap is refused (409 turn_limit)
//     before anything is stored; the session stays as it was.
//   - Every turn ends with the session valid provider input: a cancelled
//     turn is healed by the agent loop, and the server heals again after
//     any turn that ends with tool calls left open.
//   - Event delivery never blocks a turn: each SSE client has a bounded
//     buffer, and a client that falls behind is disconnected (it resumes
//     with Last-Event-ID).
//   - The bearer token is compared in constant time and never logged.
package serve
