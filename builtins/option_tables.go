package builtins

import (
	"sync"

	"github.com/skein-dev/skein/agent"
)

// The option tables of the builtins that are not agent options (those
// are package agent's: agent.CallOptions, agent.LoopOptions and their
// dicts). Each drives its builtins' parsing, range checks, defaults and
// unknown-key errors, and the options reference in docs/builtins.md
// (optionTables lists every table in reference order).

// spawnTable is the agent_loop options agent_spawn passes through to the
// child's loop (its own parameters replace session_id, tools and
// max_iterations).
var spawnTable = sync.OnceValue(func() *agent.Table {
	return agent.LoopOptions().Without("agent_spawn", "Options of `agent_spawn`, as keywords: those of `agent_loop` except `session_id`, `tools` and `max_iterations`, passed to the child's loop.",
		"session_id", "tools", "max_iterations")
})

// postTurnTable is the dict a post_turn_callback may return.
var postTurnTable = sync.OnceValue(func() *agent.Table {
	return agent.NewTable("post_turn_callback results", "Keys of the dict a `post_turn_callback` may return.", nil, []agent.Option{
		{Name: "stop", Kind: agent.KindBool, Default: false, Doc: "End the loop after this turn (status `done`)."},
		{Name: "feedback", Kind: agent.KindString, Doc: "A user message queued for the next turn."},
	})
})

// summaryTable is the dict a custom_compactor may return.
var summaryTable = sync.OnceValue(func() *agent.Table {
	return agent.NewTable("custom_compactor results", "Keys of the dict a `custom_compactor` may return.", nil, []agent.Option{
		{Name: "summary", Kind: agent.KindString, Doc: "The summary that replaces the archived messages (required)."},
	})
})

// mockTable is llm_mock's parameters (the keys of a mock fixture's
// response, mock.Keys), checked by mock.ParseResponse.
var mockTable = sync.OnceValue(func() *agent.Table {
	return agent.NewTable("llm_mock", "Parameters of `llm_mock` (or keys of its dict argument, or of a `--llm-replay` fixture response).", nil, []agent.Option{
		{Name: "text", Kind: agent.KindAny, Type: "string", Doc: "The reply text."},
		{Name: "tool_calls", Kind: agent.KindAny, Type: "list of dicts", Doc: "Tool calls of the reply: `{name, arguments}` each; ids are `mock_call_1..n` per response."},
		{Name: "match", Kind: agent.KindAny, Type: "string", Doc: "A glob (`*`, `?`) matched against all message text of a request. Responses without one answer first, in order; then the first matching one answers."},
		{Name: "consume_match", Kind: agent.KindAny, Type: "bool", Default: false, Doc: "A `match` response answers once (by default it answers every request it matches)."},
		{Name: "error", Kind: agent.KindAny, Type: "dict", Doc: "Fail the call instead: `{category, message, retry_after_ms}`; transient categories `rate_limit`, `overloaded`, `server_error`, `timeout`, `network` are retried, terminal ones `auth`, `invalid_request`, `context_length` are not."},
		{Name: "input_tokens", Kind: agent.KindAny, Type: "int", DefaultDoc: "estimated", Doc: "Reported input tokens."},
		{Name: "output_tokens", Kind: agent.KindAny, Type: "int", DefaultDoc: "estimated", Doc: "Reported output tokens."},
		{Name: "thinking", Kind: agent.KindAny, Type: "string", Doc: "Reasoning text of the reply."},
		{Name: "model", Kind: agent.KindAny, Type: "string", DefaultDoc: "the request's", Doc: "The model the reply names."},
		{Name: "delay_ms", Kind: agent.KindAny, Type: "int", Default: 0, Doc: "Wait this long before answering (honours cancellation)."},
	})
})

// optionTables lists every option table in reference order.
func optionTables() []*agent.Table {
	return []*agent.Table{agent.CallOptions(), agent.LoopOptions(), spawnTable(), agent.FileOptions(), agent.CompactionOptions(), agent.ThinkingOptions(), agent.FallbackOptions(), postTurnTable(), summaryTable(), mockTable()}
}
