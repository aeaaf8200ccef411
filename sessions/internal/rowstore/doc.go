// Package rowstore is what skein's SQL session backends (sessions/sqlite
// and sessions/postgres) share: the layout of a session's messages as a
// view over append-only rows, how the changes of one Write move that view
// and which rows they add, the stored forms of records, events and
// messages, and the parallel decoding of the JSON bodies a load reads.
//
// It holds no SQL: each backend writes its own statements, in its own
// dialect, around these pieces.
//
// # Messages are append-only; a session's messages are a view
//
// Each session appends its own messages at positions 0, 1, 2, ... and
// never rewrites or deletes one while the session exists. What the session
// currently holds is a View, four numbers kept in its session row:
//
//	messages = base[BaseFrom:BaseTo] ++ own rows from OwnFrom on
//
// where Base, if not 0, is a frozen view: a stored view with the same
// shape (a base of its own and an owner's rows from OwnFrom on), which
// nothing ever changes. So an append inserts rows at the next positions,
// a trim moves BaseFrom or OwnFrom, a reset or compaction starts the own
// part at the next free position, and a fork writes O(1) rows whatever
// the length: the child's row, whose Base is a new frozen copy of the
// source's view (none when the kept messages lie inside the source's own
// base, which the child then shares directly).
package rowstore
