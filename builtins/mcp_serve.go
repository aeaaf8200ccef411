package builtins

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"go.starlark.net/starlark"

	"github.com/skein-dev/skein/mcp"
	"github.com/skein-dev/skein/sessions/message"
	"github.com/skein-dev/skein/vm"
)

// ScriptTools returns what `skein mcp FILE.star` serves: the top-level
// functions of a script's globals that have a docstring and a name not
// starting with "_", in name order, each a tool as agent_loop would see
// it (name, the docstring's first paragraph, the schema inferred from the
// parameters and the Args: section). Each call runs on a new thread of
// st, cancelled when its context is done, and bounded by timeout (0:
// none) besides the VM's step limit.
func ScriptTools(st *vm.State, globals starlark.StringDict, timeout time.Duration) ([]mcp.ServedTool, error) {
	names := make([]string, 0, len(globals))
	for name, v := range globals {
		if fn, ok := v.(*starlark.Function); ok && fn.Doc() != "" && !strings.HasPrefix(name, "_") {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	tools := make([]mcp.ServedTool, 0, len(names))
	for _, name := range names {
		fn := globals[name].(*starlark.Function)
		if err := checkToolName(name); err != nil {
			return nil, err
		}
		spec := inferSpec(fn)
		spec.Name = name // a function bound to another global name is served by that name
		t, err := newStarlarkTool(fn, spec)
		if err != nil {
			return nil, fmt.Errorf("function %s: %v", name, err)
		}
		tools = append(tools, mcp.ServedTool{Spec: spec, Call: func(ctx context.Context, args map[string]any) (string, error) {
			return callScriptTool(st, t, ctx, args, timeout)
		}})
	}
	return tools, nil
}

// callScriptTool runs one call of a served function on its own thread.
func callScriptTool(st *vm.State, t *starlarkTool, ctx context.Context, args map[string]any, timeout time.Duration) (string, error) {
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeoutCause(ctx, timeout, fmt.Errorf("timeout: the call exceeded --timeout %v", timeout))
		defer cancel()
	}
	thread := st.NewThread(t.spec.Name)
	defer st.Release(thread)
	stop := context.AfterFunc(ctx, func() {
		reason := "cancelled"
		if cause := context.Cause(ctx); cause != nil {
			reason = cause.Error()
		}
		thread.Cancel(reason)
	})
	defer stop()
	out, err := t.Bind(thread).Run(ctx, message.ToolCall{Name: t.spec.Name, Arguments: args})
	if err != nil {
		return "", fmt.Errorf("%s", st.Store.Redactor().Redact(vm.FormatError(err)))
	}
	return st.Store.Redactor().Redact(out), nil
}
