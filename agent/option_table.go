package agent

import (
	"sync"
	"time"

	"github.com/skein-dev/skein/compact"
	"github.com/skein-dev/skein/llm"
	"github.com/skein-dev/skein/llm/openai"
)

// The one option model of agent loops: every option of agent_loop and
// llm_call, with its type, default, range and doc. The builtins unpack
// Starlark values against these tables, workflow nodes, agent files and
// agent_spawn check their data against them, Configure reads them into a
// Config, and docs/builtins.md is generated from them. A new option is a
// row here plus reading it in Configure.

// callRows are the options agent_loop and llm_call share.
var callRows = []Option{
	{Name: "provider", Kind: KindString, DefaultDoc: "the run's (`--provider`, `SKEIN_PROVIDER`, else from the model)",
		Doc: "The provider: `mock`, a named provider of docs/providers.md (`openai`, `openai_responses`, `anthropic`, `gemini`, `azure`, `ollama`, `openrouter`, ...), or any other name with a `base_url` (an OpenAI-compatible server)."},
	{Name: "model", Kind: KindString, DefaultDoc: "the run's (`--model`)", Doc: "The model name sent to the provider."},
	{Name: "base_url", Kind: KindString, DefaultDoc: "the provider's", Doc: "The server's base URL (an OpenAI-compatible server for an unknown provider name)."},
	{Name: "api_version", Kind: KindString, DefaultDoc: "`AZURE_OPENAI_API_VERSION`, else `" + openai.DefaultAzureAPIVersion + "`",
		Doc: "Azure OpenAI's `api-version` (`provider = \"azure\"` only; another provider refuses it)."},
	{Name: "session_id", Kind: KindString, Type: "string or None", Script: true,
		Doc: "Run on this session (created when missing); None runs on an anonymous session that is discarded afterwards."},
	{Name: "tools", Kind: KindHost, Type: "list of tools", Script: true, Doc: "The tools the model may call: `tool(...)` values or the built-in `tools.*`."},
	{Name: "llm_retries", Kind: KindInt, Min: 0, Default: llm.DefaultRetries, Doc: "Retries of a model call that failed with a transient error."},
	{Name: "llm_backoff_ms", Kind: KindInt, Min: 0, Default: int(llm.DefaultBackoff / time.Millisecond),
		Doc: "The first wait between retries, doubling after each (a provider's retry-after replaces it; at most 60 s)."},
	{Name: "fallback", Kind: KindDicts,
		Doc: "Providers tried in order when a call still fails after its retries: `{provider, model, base_url, api_version}` each."},
	{Name: "temperature", Kind: KindFloat, DefaultDoc: "the provider's", Doc: "Sampling temperature."},
	{Name: "max_tokens", Kind: KindInt, Min: 1, DefaultDoc: "the provider's", Doc: "The most tokens a reply may have."},
	{Name: "stop", Kind: KindStrings, Doc: "Stop sequences."},
	{Name: "stream", Kind: KindBool, Default: true, Doc: "Stream replies (subscribers get `text_delta` events)."},
	{Name: "thinking", Kind: KindDict, DefaultDoc: "None (the provider's default)",
		Doc: "Extended thinking: `{budget_tokens: N}` and/or `{effort: \"low\"|\"medium\"|\"high\"}` (the thinking options below)."},
	{Name: "cache", Kind: KindChoice, Choices: []string{"auto", "none"}, Default: "auto",
		Doc: "`auto` marks the stable prefix of the request for the provider's prompt cache; `none` sends no cache markers."},
	{Name: "timeout_s", Kind: KindSeconds, Default: 600 * time.Second,
		Doc: "Wall-clock limit of the loop (a loop that reaches it ends with status `timeout`; `llm_call` fails)."},
	{Name: "output_schema", Kind: KindDict, Type: "dict (a JSON Schema)", DefaultDoc: "None (a text reply)",
		Doc: "Structured output: the final reply must be a JSON value matching this schema, asked for in the provider's native form and validated locally; the result's `output` holds the parsed value (see docs/structured-output.md)."},
	{Name: "output_retries", Kind: KindInt, Min: 0, Default: DefaultOutputRetries,
		Doc: "Repair turns for a reply that does not match `output_schema` (each quotes the violations); after them the call fails listing them."},
}

// loopRows are the options only agent_loop has.
var loopRows = []Option{
	{Name: "max_iterations", Kind: KindInt, Min: 1, Default: DefaultMaxIterations,
		Doc: "The most model calls of this loop; reaching it ends the loop with status `budget_exhausted`."},
	{Name: "max_cost_usd", Kind: KindFloat, Positive: true, DefaultDoc: "None (no cap)",
		Doc: "Cap in US dollars on what this loop's model calls cost, checked before each call; reaching it ends the loop with status `budget_exhausted` and a `cost_limit` event."},
	{Name: "persistent", Kind: KindBool, Default: false,
		Doc: "Keep going until a reply contains `##DONE##`: a text-only reply without it gets a nudge."},
	{Name: "max_nudges", Kind: KindInt, Min: 0, Default: DefaultMaxNudges,
		Doc: "Persistent mode: nudges before the loop ends with status `stuck`."},
	{Name: "max_turns", Kind: KindInt, Min: 1, DefaultDoc: "the session's cap, else `--max-turns` (50)",
		Doc: "The session's turn cap for this loop; a session at its cap fails with `turn_limit`."},
	{Name: "tool_errors", Kind: KindChoice, Choices: []string{string(ToolErrorsRaise), string(ToolErrorsReport)}, Default: string(ToolErrorsReport),
		Doc: "`report`: a failing tool's error becomes a result the model sees; `raise`: it stops the loop with the error."},
	{Name: "post_turn_callback", Kind: KindCallable, Script: true, Params: []string{"info"},
		Doc: "`fn(info)` after every turn; returns None, a bool (stop), a string (feedback) or `{stop, feedback}`."},
	{Name: "approve", Kind: KindCallable, Script: true, Params: []string{"tool", "args"}, DefaultDoc: "the run's (`--approve`; refuse)",
		Doc: "`fn(tool, args) -> bool` decides each call of a tool a bound agent lists in `approve`; a refusal is the tool error \"the call was not approved\"."},
	{Name: "workspace", Kind: KindHost, Type: "workspace_policy", Script: true, DefaultDoc: "the run's",
		Doc: "A narrower workspace (`workspace_policy(...)`) for the loop's tools and callbacks."},
	{Name: "compaction", Kind: KindStringOrDict, Default: "auto",
		Doc: "`auto`, `none`, a strategy name, or a dict of compaction options (below)."},
	{Name: "compact_threshold", Kind: KindInt, Min: 1, Default: DefaultCompactThreshold,
		Doc: "The estimated tokens that trigger compaction before a model call (65% of the model's window when it is known and smaller)."},
	{Name: "tool_output_max_chars", Kind: KindInt, Min: 0, Default: DefaultToolOutputMaxChars,
		Doc: "Longer tool results are shortened (`microcompact`) before they are stored; 0: never."},
	{Name: "context_budget", Kind: KindInt, Min: 1, DefaultDoc: "None (the whole session)",
		Doc: "Send only the newest messages that fit this many tokens; the session keeps everything."},
	{Name: "compress_callback", Kind: KindCallable, Script: true, Params: []string{"tool", "output", "max_chars"},
		Doc: "`fn(tool, output, max_chars)` replaces `microcompact` for long tool results; returns a string."},
}

// The tables are built on first use, not in package initialisation,
// which every skein command pays at start.
var (
	// CallOptions is llm_call's options (agent_loop has them too).
	CallOptions = sync.OnceValue(func() *Table {
		return NewTable("llm_call", "Options of `llm_call`, as a dict or keywords.", nil, callRows)
	})
	// LoopOptions is agent_loop's options: CallOptions' and its own.
	LoopOptions = sync.OnceValue(func() *Table {
		return NewTable("agent_loop", "Options of `agent_loop`, as a dict or keywords: those of `llm_call` and these.", CallOptions(), loopRows)
	})
)

// CompactionOptions is the options of agent_session_compact and of
// agent_loop's compaction dict.
var CompactionOptions = sync.OnceValue(func() *Table {
	return NewTable("compaction",
		"Options of `agent_session_compact` and of `agent_loop`'s `compaction` dict.", nil, []Option{
			{Name: "compact_strategy", Kind: KindChoice, Choices: compact.Strategies, Default: compact.DefaultOptions().Strategy,
				Doc: "How archived messages are reduced: `observation_mask`, `truncate`, `llm` (a model summarises) or `custom`."},
			{Name: "keep_first", Kind: KindInt, Min: 0, Default: compact.DefaultOptions().KeepFirst, Doc: "Messages at the start kept verbatim."},
			{Name: "keep_last", Kind: KindInt, Min: 0, Default: compact.DefaultOptions().KeepLast,
				Doc: "Messages at the end kept verbatim (more when a tool pair would be split)."},
			{Name: "token_threshold", Kind: KindInt, Min: 0, Default: compact.DefaultOptions().TokenThreshold,
				Doc: "Compact only when the estimate reaches this (0: always); in `agent_loop` it replaces `compact_threshold`."},
			{Name: "hard_limit_tokens", Kind: KindInt, Min: 0, Default: compact.DefaultOptions().HardLimitTokens,
				Doc: "When the estimate after compacting is still above this, `hard_limit_strategy` runs too (0: never)."},
			{Name: "hard_limit_strategy", Kind: KindChoice, Choices: compact.Strategies, Default: compact.DefaultOptions().HardLimitStrategy,
				Doc: "The second strategy, for `hard_limit_tokens`."},
			{Name: "tool_output_max_chars", Kind: KindInt, Min: 0, Default: compact.DefaultOptions().ToolOutputMaxChars,
				Doc: "Archived tool results longer than this are shortened before the `llm` and `custom` strategies see them (0: off)."},
			{Name: "summarize_prompt", Kind: KindString, DefaultDoc: "a built-in prompt", Doc: "The system prompt of the `llm` strategy's call."},
			{Name: "custom_compactor", Kind: KindCallable, Params: []string{"messages"},
				Doc: "`fn(messages)` for the `custom` strategy: returns the summary (a string or `{summary}`) or None to decline."},
			{Name: "mask_callback", Kind: KindCallable, Params: []string{"messages"},
				Doc: "`fn(messages)` overrides observation masking: one string (the masked text) or None (default) per message."},
			{Name: "compress_callback", Kind: KindCallable, Params: []string{"tool", "output", "max_chars"},
				Doc: "`fn(tool, output, max_chars)` replaces `microcompact` where `tool_output_max_chars` shortens an archived tool result; returns a string."},
			{Name: "provider", Kind: KindString, DefaultDoc: "the loop's, else the run's", Doc: "The provider of the `llm` strategy's call."},
			{Name: "model", Kind: KindString, DefaultDoc: "the loop's, else the session's last", Doc: "The model of the `llm` strategy's call."},
		})
})

// ThinkingOptions is the thinking option's dict.
var ThinkingOptions = sync.OnceValue(func() *Table {
	return NewTable("thinking", "Keys of the `thinking` option's dict; it needs one of them.", nil, []Option{
		{Name: "budget_tokens", Kind: KindInt, Min: 1, DefaultDoc: "None", Doc: "The most tokens the model may think (Anthropic, Gemini)."},
		{Name: "effort", Kind: KindChoice, Choices: []string{llm.EffortHigh, llm.EffortLow, llm.EffortMedium}, DefaultDoc: "None",
			Doc: "Reasoning effort (OpenAI reasoning models)."},
	})
})

// FallbackOptions is one entry of the fallback option.
var FallbackOptions = sync.OnceValue(func() *Table {
	return NewTable("fallback entries", "Keys of each dict in the `fallback` list; it needs a provider or a model.", nil, []Option{
		{Name: "provider", Kind: KindString, DefaultDoc: "resolved from the model", Doc: "The provider to fall back to."},
		{Name: "model", Kind: KindString, DefaultDoc: "the provider's default", Doc: "Its model."},
		{Name: "base_url", Kind: KindString, DefaultDoc: "the provider's", Doc: "Its base URL."},
		{Name: "api_version", Kind: KindString, DefaultDoc: "`AZURE_OPENAI_API_VERSION`, else `" + openai.DefaultAzureAPIVersion + "`",
			Doc: "Its Azure OpenAI `api-version` (Azure only)."},
	})
})
