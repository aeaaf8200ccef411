// Package sessions is skein's session store.
//
// A session owns an ordered transcript of immutable messages (the
// transcript model is package sessions/message), an append-only event
// log, an optional running summary, metadata and lineage (parent,
// children, branch point). The Store keeps live sessions in an LRU
// in front of a Backend that gives durability; every write goes through to
// the backend before the call that made it returns.
//
// Free-form data (metadata, usage, tool arguments, event fields) holds
// the JSON values of internal/jsonvalue. The formats a session is
// exported in, and imported from, are package sessions/export.
//
// This package never imports Starlark: the Starlark surface lives in
// package builtins, one layer up.
package sessions
