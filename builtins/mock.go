package builtins

// Mock provider builtins.
//
//	llm_mock(text=None, tool_calls=None, match=None, consume_match=False, error=None,
//	         input_tokens=None, output_tokens=None, thinking=None, model=None, delay_ms=None) -> None
//	llm_mock_calls() -> [{provider, model, system, messages, tools}]
//	  (a message dict is frozen and shared by every request that sent it)
//	llm_mock_clear() -> None

import (
	"fmt"

	"go.starlark.net/starlark"

	"github.com/skein-dev/skein/llm/mock"
	"github.com/skein-dev/skein/sessions/message"
	"github.com/skein-dev/skein/vm"
)

func mockSpecs() []Spec {
	const area = "Mock provider"
	return []Spec{
		{"llm_mock", "(text=None, tool_calls=None, match=None, consume_match=False, error=None, input_tokens=None, output_tokens=None, thinking=None, model=None, delay_ms=None) -> None",
			"Queue a mock response (a dict positional argument works too); it answers the next matching call of any provider (under skein serve, of the prompt's session only).", area, llmMock},
		{"llm_mock_calls", "() -> list", "Every model request seen: [{provider, model, system, messages, tools}].", area, llmMockCalls},
		{"llm_mock_clear", "() -> None", "Empty the mock queue and the request log.", area, llmMockClear},
	}
}

func llmMock(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	if len(args) > 1 {
		return nil, fmt.Errorf("%s: got %d positional arguments, want at most 1 (a dict)", b.Name(), len(args))
	}
	var positional starlark.Value = starlark.None
	if len(args) == 1 {
		positional = args[0]
	}
	opts, err := unpackOptions(mockTable(), b.Name(), positional, kwargs)
	if err != nil {
		return nil, err
	}
	fields := map[string]any{}
	for k, v := range opts.raw {
		x, err := vm.FromStarlark(v, k)
		if err != nil {
			return nil, fail(b.Name(), err)
		}
		fields[k] = x
	}
	resp, err := mock.ParseResponse(fields)
	if err != nil {
		return nil, fail(b.Name(), err)
	}
	st, err := stateOf(thread, b.Name())
	if err != nil {
		return nil, err
	}
	st.Mock.QueueOf(vm.ContextOf(thread)).Queue(resp)
	return starlark.None, nil
}

func llmMockCalls(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	if err := starlark.UnpackArgs(b.Name(), args, kwargs); err != nil {
		return nil, err
	}
	st, err := stateOf(thread, b.Name())
	if err != nil {
		return nil, err
	}
	calls := st.Mock.QueueOf(vm.ContextOf(thread)).Calls()
	out := make([]starlark.Value, len(calls))
	// The requests of one loop share their transcript's messages: each is
	// converted once, frozen, and shared by every request that holds it,
	// so a loop of N turns costs O(N) conversions, not O(N²).
	seen := map[*message.Message]starlark.Value{}
	for i, c := range calls {
		msgs := make([]starlark.Value, len(c.Req.Messages))
		for j := range c.Req.Messages {
			m := &c.Req.Messages[j]
			v, ok := seen[m]
			if !ok {
				v = messageToStarlark(m)
				v.Freeze()
				seen[m] = v
			}
			msgs[j] = v
		}
		d := starlark.NewDict(5)
		_ = d.SetKey(starlark.String("provider"), starlark.String(c.Provider))
		_ = d.SetKey(starlark.String("model"), starlark.String(c.Req.Model))
		_ = d.SetKey(starlark.String("system"), optionalString(c.Req.System))
		_ = d.SetKey(starlark.String("messages"), starlark.NewList(msgs))
		tools := make([]starlark.Value, len(c.Req.Tools))
		for j, t := range c.Req.Tools {
			tools[j] = vm.ToStarlark(map[string]any{"name": t.Name, "description": t.Description, "parameters": t.Parameters})
		}
		_ = d.SetKey(starlark.String("tools"), starlark.NewList(tools))
		out[i] = d
	}
	return starlark.NewList(out), nil
}

func llmMockClear(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	if err := starlark.UnpackArgs(b.Name(), args, kwargs); err != nil {
		return nil, err
	}
	st, err := stateOf(thread, b.Name())
	if err != nil {
		return nil, err
	}
	st.Mock.QueueOf(vm.ContextOf(thread)).Clear()
	return starlark.None, nil
}
