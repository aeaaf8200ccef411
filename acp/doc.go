// Package acp speaks the Agent Client Protocol (ACP, version 1:
// JSON-RPC 2.0, one message per line) on both of its sides.
//
// As the agent (Serve, behind `skein acp AGENT`), it lets an editor use
// a skein agent: session/new opens a session in the run's store,
// session/prompt runs one turn of the agent on it and streams what the
// turn stores (text deltas, replies, tool calls and their results) as
// session/update notifications, session/cancel stops the turn (healed,
// stop reason "cancelled") and session/load replays a stored transcript.
//
// As the client (External, behind `skein serve --agent acp:NAME=...`), it
// runs an external ACP agent process per served session (or one shared
// by all) and stores the updates it streams as the session's messages
// (see collector): text chunks joined into one assistant message, tool
// calls as calls of assistant messages, their results as tool messages.
//
// The protocol types and the JSON-RPC connection come from
// github.com/coder/acp-go-sdk. What that library does not do is written
// here, each with its reason: answering malformed JSON-RPC with JSON-RPC
// errors (the library logs and drops such lines), and mapping skein's
// transcript to ACP updates and back.
//
// This package never imports Starlark: the agent it serves is a Handler
// (package vm's Handler is one).
package acp
