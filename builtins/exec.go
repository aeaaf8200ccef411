package builtins

// The exec module: allowlisted commands.
//
//	exec.run(argv, stdin=None, timeout_s=60, env=None, cwd=None)
//	    -> {code, stdout, stderr, timed_out, truncated}
//
// argv is a list of strings run without a shell; argv[0] must be on the
// command allowlist (--allow-cmd). The command runs in the workspace root
// (or cwd, a directory in write scope) with a minimal environment plus
// env, whose values are strings or secrets. stdout and stderr are each
// capped at 1 MiB (truncated reports a cut). A nonzero exit is a result,
// and so is the timeout: the whole process group is killed, timed_out is
// True and code is -1. Cancellation of the run (Ctrl-C, --timeout, an
// agent loop's timeout_s) kills it too and is an error.

import (
	"context"
	"fmt"

	"go.starlark.net/starlark"

	"github.com/skein-dev/skein/vm"
	"github.com/skein-dev/skein/workspace"
)

func execSpecs() []Spec {
	const area = "Workspace"
	return []Spec{
		{"exec.run", "(argv, stdin=None, timeout_s=60, env=None, cwd=None) -> dict",
			"Run an allowlisted command, no shell: {code, stdout, stderr, timed_out, truncated}; a nonzero exit or a timeout is a result.", area, execRun},
	}
}

// execRequest is an unpacked command: what exec.run and
// tools.run_command pass to Policy.Run.
type execRequest struct {
	argv []string
	opts workspace.RunOptions
}

// runCommand runs r under the policy in force on thread, honouring the
// thread's context. Cancellation is an error naming its cause.
func runCommand(thread *starlark.Thread, p *workspace.Policy, r execRequest) (*workspace.RunResult, error) {
	ctx := vm.ContextOf(thread)
	res, err := p.Run(ctx, r.argv, r.opts)
	if err != nil && ctx.Err() != nil {
		return nil, fmt.Errorf("%q cancelled: %w", r.argv[0], context.Cause(ctx))
	}
	return res, err
}

func execRun(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var argv, timeout, env starlark.Value = nil, starlark.None, starlark.None
	var stdin, cwd string
	if err := starlark.UnpackArgs(b.Name(), args, kwargs,
		"argv", &argv, "stdin??", &stdin, "timeout_s??", &timeout, "env??", &env, "cwd??", &cwd); err != nil {
		return nil, err
	}
	var r execRequest
	var err error
	if r.argv, err = stringsOf(argv); err != nil {
		return nil, fmt.Errorf("%s: for parameter argv: %w", b.Name(), err)
	}
	if len(r.argv) == 0 {
		return nil, fmt.Errorf("%s: argv must not be empty", b.Name())
	}
	if r.opts.Timeout, err = seconds(b.Name(), "timeout_s", timeout, workspace.DefaultTimeout); err != nil {
		return nil, err
	}
	if r.opts.Env, r.opts.SecretEnv, err = secretMap(b.Name(), "env", env); err != nil {
		return nil, err
	}
	r.opts.Stdin, r.opts.Dir = stdin, cwd
	p, err := policyOf(thread, b.Name())
	if err != nil {
		return nil, err
	}
	res, err := runCommand(thread, p, r)
	if err != nil {
		return nil, fail(b.Name(), err)
	}
	redact := redactorOf(thread)
	res.Stdout, res.Stderr = redact.Redact(res.Stdout), redact.Redact(res.Stderr)
	d := starlark.NewDict(5)
	_ = d.SetKey(starlark.String("code"), starlark.MakeInt(res.Code))
	_ = d.SetKey(starlark.String("stdout"), starlark.String(res.Stdout))
	_ = d.SetKey(starlark.String("stderr"), starlark.String(res.Stderr))
	_ = d.SetKey(starlark.String("timed_out"), starlark.Bool(res.TimedOut))
	_ = d.SetKey(starlark.String("truncated"), starlark.Bool(res.Truncated))
	return d, nil
}
