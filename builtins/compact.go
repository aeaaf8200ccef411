package builtins

// Compaction builtins.
//
//	agent_session_compact(id, opts=None, **kwargs) -> int
//	agent_session_viewport(id, token_budget, keep_first=0) -> [message]
//	estimate_tokens(messages) -> int
//	microcompact(text, max_chars=20000) -> str

import (
	"context"
	"fmt"

	"go.starlark.net/starlark"

	"github.com/skein-dev/skein/agent"
	"github.com/skein-dev/skein/compact"
	"github.com/skein-dev/skein/llm"
	"github.com/skein-dev/skein/sessions/message"
	"github.com/skein-dev/skein/vm"
)

func compactSpecs() []Spec {
	const area = "Compaction"
	return []Spec{
		{"agent_session_compact", "(id, opts=None, **kwargs) -> int",
			"Compact the session now (the compaction options); returns the message count afterwards.", area, sessionCompact},
		{"agent_session_viewport", "(id, token_budget, keep_first=0) -> list",
			"The first keep_first messages (pinned), then the newest messages that fit what is left of token_budget (whole tool pairs, the running summary first); the session is unchanged.", area, sessionViewport},
		{"estimate_tokens", "(messages) -> int", "Estimated tokens of a message list (or of one string).", area, estimateTokens},
		{"microcompact", "(text, max_chars=20000) -> str",
			"Shorten one long tool output, keeping its head, tail and diagnostic lines.", area, microcompactBuiltin},
	}
}

// compactOptions turns checked options into the engine's options. The
// callbacks run on thread. Provider and model of the llm strategy come
// from the options, else from defaultProvider and defaultModel (the
// loop's, or the session's last model).
func compactOptions(thread *starlark.Thread, st *vm.State, o *options, defaultProvider, defaultModel string) (compact.Options, error) {
	opts := compact.DefaultOptions()
	opts.KeepFirst, opts.KeepLast = o.int("keep_first"), o.int("keep_last")
	opts.TokenThreshold, opts.HardLimitTokens = o.int("token_threshold"), o.int("hard_limit_tokens")
	opts.Strategy, opts.HardLimitStrategy = o.string("compact_strategy"), o.string("hard_limit_strategy")
	opts.ToolOutputMaxChars, opts.SummarizePrompt = o.int("tool_output_max_chars"), o.string("summarize_prompt")
	custom, mask := o.callable("custom_compactor"), o.callable("mask_callback")
	if compress := o.callable("compress_callback"); compress != nil {
		opts.Compress = compressFunc(thread, o.fn, compress)
	}
	if custom != nil {
		opts.Custom = compact.CompactorFunc(func(ctx context.Context, archived []message.Message) (string, error) {
			return callCustomCompactor(thread, o.fn, custom, archived)
		})
	}
	if mask != nil {
		opts.Mask = func(archived []message.Message) ([]*string, error) {
			return callMask(thread, o.fn, mask, archived)
		}
	}
	for _, s := range []string{opts.Strategy, opts.HardLimitStrategy} {
		if s == compact.StrategyCustom && custom == nil {
			return opts, fmt.Errorf("%s: the custom strategy needs a custom_compactor", o.fn)
		}
	}
	provider, model := o.string("provider"), o.string("model")
	if opts.Strategy == compact.StrategyLLM || opts.HardLimitTokens > 0 && opts.HardLimitStrategy == compact.StrategyLLM {
		if provider == "" {
			provider = defaultProvider
		}
		if model == "" {
			model = defaultModel
		}
		targets, err := chain(st, &callOptions{targets: []llm.TargetSpec{{Provider: provider, Model: model}}})
		if err != nil {
			return opts, fail(o.fn, err)
		}
		opts.Provider = &llm.Retrying{Chain: targets, Policy: llm.DefaultRetry()}
		opts.Model = model
		if opts.Model == "" {
			opts.Model = st.LLM.Model
		}
	}
	if err := opts.Validate(); err != nil {
		return opts, fail(o.fn, err)
	}
	return opts, nil
}

// compressFunc adapts compress_callback(tool, output, max_chars), which
// returns the shortened output.
func compressFunc(thread *starlark.Thread, fn string, cb starlark.Callable) compact.CompressFunc {
	return func(tool, output string, maxChars int) (string, error) {
		v, err := starlark.Call(thread, cb, starlark.Tuple{starlark.String(tool), starlark.String(output), starlark.MakeInt(maxChars)}, nil)
		if err != nil {
			return "", err
		}
		s, ok := v.(starlark.String)
		if !ok {
			return "", fmt.Errorf("%s: compress_callback returned %s, want string", fn, v.Type())
		}
		return string(s), nil
	}
}

// callCustomCompactor adapts custom_compactor(messages): a string or
// {summary: str} is the summary; None declines (nothing is compacted).
func callCustomCompactor(thread *starlark.Thread, fn string, cb starlark.Callable, archived []message.Message) (string, error) {
	v, err := starlark.Call(thread, cb, starlark.Tuple{messagesToStarlark(archived)}, nil)
	if err != nil {
		return "", err
	}
	switch v := v.(type) {
	case starlark.String:
		return string(v), nil
	case starlark.NoneType:
		return "", compact.ErrNoSummary
	case *starlark.Dict:
		o, err := unpackOptions(summaryTable(), fn+": custom_compactor result", v, nil)
		if err != nil {
			return "", err
		}
		if !o.has("summary") {
			return "", fmt.Errorf("%s: custom_compactor returned a dict without 'summary'", fn)
		}
		return o.string("summary"), nil
	}
	return "", fmt.Errorf("%s: custom_compactor returned %s, want a string, {summary: str} or None", fn, v.Type())
}

// callMask adapts mask_callback(messages): one string (the masked text) or
// None (default masking) per archived message.
func callMask(thread *starlark.Thread, fn string, cb starlark.Callable, archived []message.Message) ([]*string, error) {
	v, err := starlark.Call(thread, cb, starlark.Tuple{messagesToStarlark(archived)}, nil)
	if err != nil {
		return nil, err
	}
	list, ok := v.(*starlark.List)
	if !ok || list.Len() != len(archived) {
		return nil, fmt.Errorf("%s: mask_callback must return a list of %d strings or None, got %s", fn, len(archived), describeLen(v))
	}
	out := make([]*string, len(archived))
	for i := range out {
		switch x := list.Index(i).(type) {
		case starlark.String:
			s := string(x)
			out[i] = &s
		case starlark.NoneType:
		default:
			return nil, fmt.Errorf("%s: mask_callback result [%d]: got %s, want string or None", fn, i, x.Type())
		}
	}
	return out, nil
}

func describeLen(v starlark.Value) string {
	if l, ok := v.(*starlark.List); ok {
		return fmt.Sprintf("a list of %d", l.Len())
	}
	return v.Type()
}

// lastModel is the model of the session's newest assistant message.
func lastModel(msgs []message.Message) string {
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role == message.RoleAssistant && msgs[i].Model != "" {
			return msgs[i].Model
		}
	}
	return ""
}

func sessionCompact(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var id string
	var positional starlark.Value = starlark.None
	named, rest := splitKwargs(kwargs, "id", "opts")
	if err := starlark.UnpackArgs(b.Name(), args, named, "id", &id, "opts?", &positional); err != nil {
		return nil, err
	}
	o, err := unpackOptions(agent.CompactionOptions(), b.Name(), positional, rest)
	if err != nil {
		return nil, err
	}
	st, err := stateOf(thread, b.Name())
	if err != nil {
		return nil, err
	}
	ctx := vm.ContextOf(thread)
	model := ""
	if o.has("compact_strategy") || o.has("hard_limit_strategy") {
		// the llm strategy defaults to the session's last model; a read
		// that does not refresh recency (the compaction itself will)
		if msgs, err := st.Store.ReadMessages(ctx, id); err == nil {
			model = lastModel(msgs)
		}
	}
	opts, err := compactOptions(thread, st, o, "", model)
	if err != nil {
		return nil, err
	}
	if _, events, err := agent.CompactSession(ctx, st.Store, id, opts, agent.TriggerManual); err != nil {
		return nil, fail(b.Name(), err)
	} else if err := deliver(thread, st.Store, events); err != nil {
		return nil, err
	}
	n, err := st.Store.Length(ctx, id)
	if err != nil {
		return nil, fail(b.Name(), err)
	}
	return starlark.MakeInt(n), nil
}

func sessionViewport(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var id string
	var budget, keepFirst int
	if err := starlark.UnpackArgs(b.Name(), args, kwargs, "id", &id, "token_budget", &budget, "keep_first?", &keepFirst); err != nil {
		return nil, err
	}
	if err := nonNegative(b.Name(), "token_budget", budget); err != nil {
		return nil, err
	}
	if err := nonNegative(b.Name(), "keep_first", keepFirst); err != nil {
		return nil, err
	}
	st, err := stateOf(thread, b.Name())
	if err != nil {
		return nil, err
	}
	msgs, err := st.Store.ReadMessages(vm.ContextOf(thread), id)
	if err != nil {
		return nil, fail(b.Name(), err)
	}
	view, err := compact.PinnedViewport(msgs, keepFirst, budget)
	if err != nil {
		return nil, fail(b.Name(), err)
	}
	return messagesToStarlark(view), nil
}

func estimateTokens(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var v starlark.Value
	if err := starlark.UnpackArgs(b.Name(), args, kwargs, "messages", &v); err != nil {
		return nil, err
	}
	if s, ok := v.(starlark.String); ok {
		return starlark.MakeInt(compact.EstimateText(string(s))), nil
	}
	list, ok := v.(starlark.Indexable)
	if !ok {
		return nil, fmt.Errorf("%s: for parameter messages: got %s, want a list of messages or a string", b.Name(), v.Type())
	}
	msgs := make([]message.Message, list.Len())
	for i := range msgs {
		m, err := messageFromStarlark(fmt.Sprintf("%s: messages[%d]", b.Name(), i), list.Index(i))
		if err != nil {
			return nil, err
		}
		msgs[i] = m
	}
	return starlark.MakeInt(compact.EstimateTokens(msgs)), nil
}

func microcompactBuiltin(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var text string
	maxChars := 20000
	if err := starlark.UnpackArgs(b.Name(), args, kwargs, "text", &text, "max_chars?", &maxChars); err != nil {
		return nil, err
	}
	if maxChars < 1 {
		return nil, fmt.Errorf("%s: 'max_chars' must be >= 1", b.Name())
	}
	return starlark.String(compact.Microcompact(text, maxChars)), nil
}
