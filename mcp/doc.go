// Package mcp connects skein to the Model Context Protocol.
//
// Connect starts an MCP server program over stdio or reaches a Streamable
// HTTP endpoint, under the run's workspace policy, runs the initialize
// handshake, lists the server's tools and calls them. Its Tools are agent
// tools: Spec, ArgsSchema, Run and RunContent have the shapes the agent
// loop takes, so a loop, a workflow stage, an agent file or an ACP session
// can use them without this package importing the engine.
//
// # Policy
//
// Everything is checked before a process starts or a connection opens: a
// stdio server's program must be on the command allowlist (--allow-cmd),
// a URL's host on the network allowlist (--allow-net, and every address
// it resolves to is checked when dialling, as for http.get). A stdio
// server gets only PATH, HOME and the variables of skein's environment
// that the environment allowlist (--allow-env) names, plus those of
// Spec.Env and Spec.SecretEnv, whose names must be on that allowlist too;
// the variables that make a loader or interpreter run other code are
// never passed, whatever the allowlist says. Secret values
// (workspace.Secret) are revealed only in the child's environment and in
// HTTP headers; they are never part of an error, a Spec's String or a
// result.
//
// # Results
//
// A tool result is mapped to content blocks in order: text content as
// text blocks, images as image blocks, audio, resource links and embedded
// resources as text naming them (an embedded text resource with its
// text). structuredContent is returned as data (and as JSON text when
// the server sent no text). isError makes the call an error whose text is
// the result's text.
//
// # Lifetime and failures
//
// A Server is one process (or one HTTP session). Close ends it: stdin is
// closed, then the process group gets SIGTERM and, 5 s later, SIGKILL.
// A server that dies makes every later call fail with an error naming it,
// its exit status and the tail of its stderr. Every request has a time
// limit (Spec.Timeout); cancelling a call's context sends
// notifications/cancelled to the server and returns at once.
//
// The protocol itself (versions, framing, the handshake, cancellation)
// is the official Go SDK's, github.com/modelcontextprotocol/go-sdk.
package mcp
