package builtins

import (
	"sync"
	"time"

	"github.com/skein-dev/skein/agent"
	"github.com/skein-dev/skein/compact"
	"github.com/skein-dev/skein/llm"
	"github.com/skein-dev/skein/llm/openai"
)

// The option tables of the builtin families. Each drives its builtins'
// parsing, range checks, defaults and unknown-key errors, and the options
// reference in docs/builtins.md (optionTables lists them in reference
// order).

// callRows are the options agent_loop and llm_call share.
var callRows = []option{
	{Name: "provider", Kind: kindString, DefaultDoc: "the run's (`--provider`, `SKEIN_PROVIDER`, else from the model)",
		Doc: "The provider: `mock`, a named provider of docs/providers.md (`openai`, `openai_responses`, `anthropic`, `gemini`, `azure`, `ollama`, `openrouter`, ...), or any other name with a `base_url` (an OpenAI-compatible server)."},
	{Name: "model", Kind: kindString, DefaultDoc: "the run's (`--model`)", Doc: "The model name sent to the provider."},
	{Name: "base_url", Kind: kindString, DefaultDoc: "the provider's", Doc: "The server's base URL (an OpenAI-compatible server for an unknown provider name)."},
	{Name: "api_version", Kind: kindString, DefaultDoc: "`AZURE_OPENAI_API_VERSION`, else `" + openai.DefaultAzureAPIVersion + "`",
		Doc: "Azure OpenAI's `api-version` (`provider = \"azure\"` only; another provider refuses it)."},
	{Name: "session_id", Kind: kindString, Type: "string or None",
		Doc: "Run on this session (created when missing); None runs on an anonymous session that is discarded afterwards."},
	{Name: "tools", Kind: kindAny, Type: "list of tools", Doc: "The tools the model may call: `tool(...)` values or the built-in `tools.*`."},
	{Name: "llm_retries", Kind: kindInt, Min: 0, Default: llm.DefaultRetries, Doc: "Retries of a model call that failed with a transient error."},
	{Name: "llm_backoff_ms", Kind: kindInt, Min: 0, Default: int(llm.DefaultBackoff / time.Millisecond),
		Doc: "The first wait between retries, doubling after each (a provider's retry-after replaces it; at most 60 s)."},
	{Name: "fallback", Kind: kindAny, Type: "list of dicts",
		Doc: "Providers tried in order when a call still fails after its retries: `{provider, model, base_url, api_version}` each."},
	{Name: "temperature", Kind: kindFloat, DefaultDoc: "the provider's", Doc: "Sampling temperature."},
	{Name: "max_tokens", Kind: kindInt, Min: 1, DefaultDoc: "the provider's", Doc: "The most tokens a reply may have."},
	{Name: "stop", Kind: kindAny, Type: "string or list of strings", Doc: "Stop sequences."},
	{Name: "stream", Kind: kindBool, Default: true, Doc: "Stream replies (subscribers get `text_delta` events)."},
	{Name: "thinking", Kind: kindAny, Type: "dict", DefaultDoc: "None (the provider's default)",
		Doc: "Extended thinking: `{budget_tokens: N}` and/or `{effort: \"low\"|\"medium\"|\"high\"}` (the thinking options below)."},
	{Name: "cache", Kind: kindChoice, Choices: []string{"auto", "none"}, Default: "auto",
		Doc: "`auto` marks the stable prefix of the request for the provider's prompt cache; `none` sends no cache markers."},
	{Name: "timeout_s", Kind: kindSeconds, Default: 600 * time.Second,
		Doc: "Wall-clock limit of the loop (a loop that reaches it ends with status `timeout`; `llm_call` fails)."},
	{Name: "output_schema", Kind: kindAny, Type: "dict (a JSON Schema)", DefaultDoc: "None (a text reply)",
		Doc: "Structured output: the final reply must be a JSON value matching this schema, asked for in the provider's native form and validated locally; the result's `output` holds the parsed value (see docs/structured-output.md)."},
	{Name: "output_retries", Kind: kindInt, Min: 0, Default: agent.DefaultOutputRetries,
		Doc: "Repair turns for a reply that does not match `output_schema` (each quotes the violations); after them the call fails listing them."},
}

// loopRows are the options only agent_loop has.
var loopRows = []option{
	{Name: "max_iterations", Kind: kindInt, Min: 1, Default: agent.DefaultMaxIterations,
		Doc: "The most model calls of this loop; reaching it ends the loop with status `budget_exhausted`."},
	{Name: "max_cost_usd", Kind: kindFloat, DefaultDoc: "None (no cap)",
		Doc: "Cap in US dollars on what this loop's model calls cost, checked before each call; reaching it ends the loop with status `budget_exhausted` and a `cost_limit` event."},
	{Name: "persistent", Kind: kindBool, Default: false,
		Doc: "Keep going until a reply contains `##DONE##`: a text-only reply without it gets a nudge."},
	{Name: "max_nudges", Kind: kindInt, Min: 0, Default: agent.DefaultMaxNudges,
		Doc: "Persistent mode: nudges before the loop ends with status `stuck`."},
	{Name: "max_turns", Kind: kindInt, Min: 1, DefaultDoc: "the session's cap, else `--max-turns` (50)",
		Doc: "The session's turn cap for this loop; a session at its cap fails with `turn_limit`."},
	{Name: "tool_errors", Kind: kindChoice, Choices: []string{string(agent.ToolErrorsRaise), string(agent.ToolErrorsReport)}, Default: string(agent.ToolErrorsReport),
		Doc: "`report`: a failing tool's error becomes a result the model sees; `raise`: it stops the loop with the error."},
	{Name: "post_turn_callback", Kind: kindCallable, Params: []string{"info"},
		Doc: "`fn(info)` after every turn; returns None, a bool (stop), a string (feedback) or `{stop, feedback}`."},
	{Name: "workspace", Kind: kindAny, Type: "workspace_policy", DefaultDoc: "the run's",
		Doc: "A narrower workspace (`workspace_policy(...)`) for the loop's tools and callbacks."},
	{Name: "compaction", Kind: kindAny, Type: "string or dict", Default: "auto",
		Doc: "`auto`, `none`, a strategy name, or a dict of compaction options (below)."},
	{Name: "compact_threshold", Kind: kindInt, Min: 1, Default: agent.DefaultCompactThreshold,
		Doc: "The estimated tokens that trigger compaction before a model call (65% of the model's window when it is known and smaller)."},
	{Name: "tool_output_max_chars", Kind: kindInt, Min: 0, Default: agent.DefaultToolOutputMaxChars,
		Doc: "Longer tool results are shortened (`microcompact`) before they are stored; 0: never."},
	{Name: "context_budget", Kind: kindInt, Min: 1, DefaultDoc: "None (the whole session)",
		Doc: "Send only the newest messages that fit this many tokens; the session keeps everything."},
	{Name: "compress_callback", Kind: kindCallable, Params: []string{"tool", "output", "max_chars"},
		Doc: "`fn(tool, output, max_chars)` replaces `microcompact` for long tool results; returns a string."},
}

// The tables are built on first use, not in package initialisation,
// which every skein command pays at start.
var (
	callTable = sync.OnceValue(func() *optionTable {
		return newOptionTable("llm_call", "Options of `llm_call`, as a dict or keywords.", nil, callRows)
	})
	loopTable = sync.OnceValue(func() *optionTable {
		return newOptionTable("agent_loop", "Options of `agent_loop`, as a dict or keywords: those of `llm_call` and these.", callTable(), loopRows)
	})
)

// spawnTable is the agent_loop options agent_spawn passes through to the
// child's loop (its own parameters replace session_id, tools and
// max_iterations).
var spawnTable = sync.OnceValue(func() *optionTable {
	return loopTable().without("agent_spawn", "Options of `agent_spawn`, as keywords: those of `agent_loop` except `session_id`, `tools` and `max_iterations`, passed to the child's loop.",
		"session_id", "tools", "max_iterations")
})

// compactTable is the options of agent_session_compact and of
// agent_loop's compaction dict.
var compactTable = sync.OnceValue(func() *optionTable {
	return newOptionTable("compaction",
		"Options of `agent_session_compact` and of `agent_loop`'s `compaction` dict.", nil, []option{
			{Name: "compact_strategy", Kind: kindChoice, Choices: compact.Strategies, Default: compact.DefaultOptions().Strategy,
				Doc: "How archived messages are reduced: `observation_mask`, `truncate`, `llm` (a model summarises) or `custom`."},
			{Name: "keep_first", Kind: kindInt, Min: 0, Default: compact.DefaultOptions().KeepFirst, Doc: "Messages at the start kept verbatim."},
			{Name: "keep_last", Kind: kindInt, Min: 0, Default: compact.DefaultOptions().KeepLast,
				Doc: "Messages at the end kept verbatim (more when a tool pair would be split)."},
			{Name: "token_threshold", Kind: kindInt, Min: 0, Default: compact.DefaultOptions().TokenThreshold,
				Doc: "Compact only when the estimate reaches this (0: always); in `agent_loop` it replaces `compact_threshold`."},
			{Name: "hard_limit_tokens", Kind: kindInt, Min: 0, Default: compact.DefaultOptions().HardLimitTokens,
				Doc: "When the estimate after compacting is still above this, `hard_limit_strategy` runs too (0: never)."},
			{Name: "hard_limit_strategy", Kind: kindChoice, Choices: compact.Strategies, Default: compact.DefaultOptions().HardLimitStrategy,
				Doc: "The second strategy, for `hard_limit_tokens`."},
			{Name: "tool_output_max_chars", Kind: kindInt, Min: 0, Default: compact.DefaultOptions().ToolOutputMaxChars,
				Doc: "Archived tool results longer than this are shortened before the `llm` and `custom` strategies see them (0: off)."},
			{Name: "summarize_prompt", Kind: kindString, DefaultDoc: "a built-in prompt", Doc: "The system prompt of the `llm` strategy's call."},
			{Name: "custom_compactor", Kind: kindCallable, Params: []string{"messages"},
				Doc: "`fn(messages)` for the `custom` strategy: returns the summary (a string or `{summary}`) or None to decline."},
			{Name: "mask_callback", Kind: kindCallable, Params: []string{"messages"},
				Doc: "`fn(messages)` overrides observation masking: one string (the masked text) or None (default) per message."},
			{Name: "compress_callback", Kind: kindCallable, Params: []string{"tool", "output", "max_chars"},
				Doc: "`fn(tool, output, max_chars)` replaces `microcompact` where `tool_output_max_chars` shortens an archived tool result; returns a string."},
			{Name: "provider", Kind: kindString, DefaultDoc: "the loop's, else the run's", Doc: "The provider of the `llm` strategy's call."},
			{Name: "model", Kind: kindString, DefaultDoc: "the loop's, else the session's last", Doc: "The model of the `llm` strategy's call."},
		})
})

// thinkingTable is the thinking option's dict.
var thinkingTable = sync.OnceValue(func() *optionTable {
	return newOptionTable("thinking", "Keys of the `thinking` option's dict; it needs one of them.", nil, []option{
		{Name: "budget_tokens", Kind: kindInt, Min: 1, DefaultDoc: "None", Doc: "The most tokens the model may think (Anthropic, Gemini)."},
		{Name: "effort", Kind: kindChoice, Choices: []string{llm.EffortHigh, llm.EffortLow, llm.EffortMedium}, DefaultDoc: "None",
			Doc: "Reasoning effort (OpenAI reasoning models)."},
	})
})

// fallbackTable is one entry of the fallback option.
var fallbackTable = sync.OnceValue(func() *optionTable {
	return newOptionTable("fallback entries", "Keys of each dict in the `fallback` list; it needs a provider or a model.", nil, []option{
		{Name: "provider", Kind: kindString, DefaultDoc: "resolved from the model", Doc: "The provider to fall back to."},
		{Name: "model", Kind: kindString, DefaultDoc: "the provider's default", Doc: "Its model."},
		{Name: "base_url", Kind: kindString, DefaultDoc: "the provider's", Doc: "Its base URL."},
		{Name: "api_version", Kind: kindString, DefaultDoc: "`AZURE_OPENAI_API_VERSION`, else `" + openai.DefaultAzureAPIVersion + "`",
			Doc: "Its Azure OpenAI `api-version` (Azure only)."},
	})
})

// postTurnTable is the dict a post_turn_callback may return.
var postTurnTable = sync.OnceValue(func() *optionTable {
	return newOptionTable("post_turn_callback results", "Keys of the dict a `post_turn_callback` may return.", nil, []option{
		{Name: "stop", Kind: kindBool, Default: false, Doc: "End the loop after this turn (status `done`)."},
		{Name: "feedback", Kind: kindString, Doc: "A user message queued for the next turn."},
	})
})

// summaryTable is the dict a custom_compactor may return.
var summaryTable = sync.OnceValue(func() *optionTable {
	return newOptionTable("custom_compactor results", "Keys of the dict a `custom_compactor` may return.", nil, []option{
		{Name: "summary", Kind: kindString, Doc: "The summary that replaces the archived messages (required)."},
	})
})

// mockTable is llm_mock's parameters (the keys of a mock fixture's
// response, mock.Keys), checked by mock.ParseResponse.
var mockTable = sync.OnceValue(func() *optionTable {
	return newOptionTable("llm_mock", "Parameters of `llm_mock` (or keys of its dict argument, or of a `--llm-replay` fixture response).", nil, []option{
		{Name: "text", Kind: kindAny, Type: "string", Doc: "The reply text."},
		{Name: "tool_calls", Kind: kindAny, Type: "list of dicts", Doc: "Tool calls of the reply: `{name, arguments}` each; ids are `mock_call_1..n` per response."},
		{Name: "match", Kind: kindAny, Type: "string", Doc: "A glob (`*`, `?`) matched against all message text of a request. Responses without one answer first, in order; then the first matching one answers."},
		{Name: "consume_match", Kind: kindAny, Type: "bool", Default: false, Doc: "A `match` response answers once (by default it answers every request it matches)."},
		{Name: "error", Kind: kindAny, Type: "dict", Doc: "Fail the call instead: `{category, message, retry_after_ms}`; transient categories `rate_limit`, `overloaded`, `server_error`, `timeout`, `network` are retried, terminal ones `auth`, `invalid_request`, `context_length` are not."},
		{Name: "input_tokens", Kind: kindAny, Type: "int", DefaultDoc: "estimated", Doc: "Reported input tokens."},
		{Name: "output_tokens", Kind: kindAny, Type: "int", DefaultDoc: "estimated", Doc: "Reported output tokens."},
		{Name: "thinking", Kind: kindAny, Type: "string", Doc: "Reasoning text of the reply."},
		{Name: "model", Kind: kindAny, Type: "string", DefaultDoc: "the request's", Doc: "The model the reply names."},
		{Name: "delay_ms", Kind: kindAny, Type: "int", Default: 0, Doc: "Wait this long before answering (honours cancellation)."},
	})
})

// optionTables lists every option table in reference order.
func optionTables() []*optionTable {
	return []*optionTable{callTable(), loopTable(), spawnTable(), compactTable(), thinkingTable(), fallbackTable(), postTurnTable(), summaryTable(), mockTable()}
}
