// Package compact is skein's compaction engine: it replaces the older part
// of a transcript by one summary message so a conversation fits a model's
// context, and it estimates tokens, shortens long tool outputs
// (Microcompact) and cuts token-budget viewports. It is pure Go: the
// Starlark builtins (agent_session_compact, agent_session_viewport,
// estimate_tokens, microcompact) and the agent loop call it.
//
// Sizes called "chars" in this package are bytes of UTF-8 text (what
// Starlark's len counts); cuts never split a UTF-8 sequence, so a cut text
// may be up to three bytes shorter than its limit.
//
// # The split rule
//
// Compact keeps the first KeepFirst and the last KeepLast messages and
// archives the ones in between. The exact cut:
//
//  1. The kept prefix is msgs[:KeepFirst], extended over any tool results
//     that follow it, so it never ends inside a tool pair (an assistant
//     message that calls tools and the results of those calls).
//  2. A cut (the index where the kept suffix starts) is only placed at a
//     turn start: a message that is not a tool result, or the very end of
//     the transcript when no tool call is open there. A pair is therefore
//     never separated, and the summary message never follows an
//     unanswered call.
//  3. The plain cut is len-KeepLast. When it is not after the prefix,
//     nothing is compacted. With KeepLast 0 and a turn start at the end,
//     everything after the prefix is archived.
//  4. Otherwise the cut snaps back (keeping more messages) to the latest
//     user message after the prefix and at or before the plain cut.
//  5. Without such a user message (a tool-heavy transcript whose only user
//     message is first or inside the prefix), it snaps back to the latest
//     turn start after the prefix and at or before the plain cut: usually
//     the assistant message that starts the pair the plain cut fell into.
//  6. Without one either (the pair the plain cut falls into starts where
//     the prefix ends), it moves forward to the first turn start after the
//     plain cut, or to the end, keeping fewer than KeepLast messages.
//  7. When the transcript has at most KeepFirst+KeepLast messages, or no
//     cut exists after the prefix, nothing is compacted.
//
// Examples, with KeepFirst 0 and KeepLast 2 (U user, A assistant, A* an
// assistant message calling tools, T the result of one of its calls, | the
// cut, [...] the archived messages when a prefix is kept):
//
//	U A U A A A          ->  U A | U A A A      rule 4: the suffix starts at the last U before the plain cut
//	U A* T A* T T A      ->  U A* T | A* T T A  rule 5: the plain cut falls in the pair A* T T: back to A*
//	U A* T T T           ->  U | A* T T T       rule 5 (A* calls three tools in parallel)
//	U A                  ->  nothing            rule 7
//
// and with KeepFirst 1:
//
//	U A* T T T T A       ->  U [A* T T T T] | A rule 6: the pair is archived, the suffix keeps 1
//
// # Strategies
//
// The archived messages become the body of the summary message. Every
// rendering starts an entry with a label: "[system]", "[user]",
// "[assistant]", "[tool NAME]" ("[tool]" without a name, "[tool NAME
// error]" for a failed call) or "[summary]" for an earlier summary message.
// A message's body is its text (text blocks joined by newlines, an image
// block as "[image MEDIA_TYPE]", thinking left out) and, for an assistant
// message that calls tools, " called NAME(k=v, ...)" with the calls
// separated by ", ", arguments in sorted key order, values as compact JSON
// cut to 200 chars ("..." marks a cut). For example:
//
//	[assistant] Let me look. called read_file(path="main.go"), grep(pattern="TODO")
//	[tool read_file] package main
//
// truncate: one line per archived message, "LABEL BODY" with the body's
// whitespace runs turned into single spaces and cut to 500 chars ("..."
// marks a cut), at most 15 lines, then "... and N more".
//
// observation_mask: one entry per archived message, separated by newlines.
// Assistant messages are kept in full. Any other message is kept in full
// unless it is long (more than 3 lines or more than 200 chars); then it is
// masked to its first non-blank line (cut to 200 chars) and "[L lines, C
// chars masked]", L and C counting the whole text. Options.Mask can
// override the text of any message (the label stays). An earlier summary
// message is carried over verbatim, without a label: it is already
// compacted.
//
// llm: one call through Options.Provider with Options.Model, system prompt
// Options.SummarizePrompt or DefaultSummarizePrompt, and one user message:
// "Summarize these N archived messages." followed by the entries ("LABEL
// BODY", bodies in full, separated by blank lines). The reply's trimmed
// text is the summary; an empty reply or a failed call is an error.
//
// custom: Options.Custom returns the summary; ErrNoSummary declines.
//
// With Options.ToolOutputMaxChars > 0, llm and custom see long archived
// tool results shortened by Microcompact, or by Options.Compress when set.
//
// # The summary message
//
// The summary is one user message placed at the cut, right after the kept
// prefix:
//
//	[auto-compacted N older messages via STRATEGY]
//	BODY
//
// N counts the original messages it stands for: each archived message
// counts one, except an earlier summary message, which counts its own N.
// A user message of this shape is recognised as a summary message
// (ParseSummary). Consecutive user messages are valid provider input, so
// the summary may be followed by a user message or follow a system
// message; the result of Compact always passes message.Validate when its
// input does.
//
// # The running summary
//
// The running summary of a transcript (RunningSummary, Result.Summary,
// what the session stores as its summary) is derived from it: the bodies
// of its summary messages, in order, separated by blank lines. After a
// compaction that is normally just the new body, because an earlier
// summary message is the first archived message and the new summary
// subsumes it (observation_mask carries it over verbatim, truncate cuts it
// like any entry, llm folds it in, custom sees it among the archived
// messages). Only when an earlier summary message is still kept (KeepFirst
// grew since) does the running summary hold both bodies. Tier 1 does
// nothing when the only message it would archive is an earlier summary
// message.
//
// # Tier 2
//
// When HardLimitTokens > 0 and the estimate after tier 1 (or of the input,
// when tier 1 had nothing to do) is above it, HardLimitStrategy runs once
// over the tier-1 result with the same KeepFirst and KeepLast but without
// the user-message snap (rule 4): it archives the tier-1 summary message
// together with the kept messages before the plain cut (moved back to a
// turn start so pairs stay whole). When tier 1 kept exactly KeepLast
// messages, tier 2 thus re-summarises the tier-1 summary alone. Tier 2
// does not repeat: Result.TokensAfter may still be above the limit.
//
// # Viewport
//
// Viewport is the read-only counterpart for agent_loop's context_budget and
// agent_session_viewport: the newest whole units (a tool pair, or one
// message) that fit a token budget, preceded by the running summary of the
// messages it leaves out, as a "[auto-compacted N older messages via
// viewport]" message, when there is one and it fits beside the newest unit.
//
// # Token estimates
//
// EstimateText, EstimateMessage and EstimateTokens give fast, additive,
// allocation-free estimates: about 4 bytes per token for prose and 2 for
// JSON, code and tool output, plus a per-message overhead. ContextWindow
// and EffectiveThreshold adapt compaction thresholds to known models.
package compact
