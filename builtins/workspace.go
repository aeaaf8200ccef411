package builtins

// Workspace builtins: the policy that the fs, exec and http modules and
// the built-in agent tools obey (package workspace does the checking).
//
//	workspace_policy(root=None, fs_scope=None, allow_cmd=None, allow_net=None) -> workspace_policy
//
// The policy of a run comes from the command line (--workspace,
// --fs-scope, --allow-cmd, --allow-net). A script can only narrow it:
// workspace_policy(...) returns a narrower copy, which
// agent_loop(workspace=...) applies to everything that loop runs. The
// modules are in fs.go, exec.go and http.go, secret() in secret.go and
// the tools in workspace_tools.go.

import (
	"fmt"
	"math"
	"time"

	"go.starlark.net/starlark"

	"github.com/skein-dev/skein/vm"
	"github.com/skein-dev/skein/workspace"
)

func workspaceSpecs() []Spec {
	const area = "Workspace"
	specs := []Spec{
		{"workspace_policy", "(root=None, fs_scope=None, allow_cmd=None, allow_net=None) -> workspace_policy",
			"The workspace policy in force, or a narrower copy for agent_loop(workspace=...); widening fails.", area, workspacePolicyBuiltin},
		{"secret", "(name) -> secret",
			"An environment variable as an opaque secret: usable in http headers and exec env only, shown as <secret NAME>.", area, secretBuiltin},
	}
	for _, more := range [][]Spec{fsSpecs(), execSpecs(), httpSpecs()} {
		specs = append(specs, more...)
	}
	return specs
}

// policyOf returns the policy code on thread is held to (the innermost
// agent loop's, else the run's), with fn's name on the error.
func policyOf(thread *starlark.Thread, fn string) (*workspace.Policy, error) {
	p, err := vm.WorkspaceOf(thread)
	if err != nil {
		return nil, fail(fn, err)
	}
	return p, nil
}

// policyValue is a workspace policy as a Starlark value: what
// workspace_policy returns and agent_loop(workspace=...) takes.
type policyValue struct{ p *workspace.Policy }

var (
	_ starlark.Value    = (*policyValue)(nil)
	_ starlark.HasAttrs = (*policyValue)(nil)
)

func (v *policyValue) String() string       { return "<workspace_policy " + v.p.String() + ">" }
func (v *policyValue) Type() string         { return "workspace_policy" }
func (v *policyValue) Freeze()              {}
func (v *policyValue) Truth() starlark.Bool { return true }
func (v *policyValue) Hash() (uint32, error) {
	return 0, fmt.Errorf("unhashable type: workspace_policy")
}

// Attr exposes what the policy allows.
func (v *policyValue) Attr(name string) (starlark.Value, error) {
	switch name {
	case "root":
		return starlark.String(v.p.Root()), nil
	case "fs_scope":
		return starlark.String(v.p.Tier().String()), nil
	case "git_root":
		return optionalString(v.p.GitRoot()), nil
	case "read_root":
		return starlark.String(v.p.ReadRoot()), nil
	case "write_root":
		return starlark.String(v.p.WriteRoot()), nil
	case "allow_cmd":
		return vm.ToStarlark(v.p.AllowCmds()), nil
	case "allow_net":
		return vm.ToStarlark(v.p.AllowNet()), nil
	}
	return nil, nil
}

// AttrNames lists the attributes.
func (v *policyValue) AttrNames() []string {
	return []string{"allow_cmd", "allow_net", "fs_scope", "git_root", "read_root", "root", "write_root"}
}

func workspacePolicyBuiltin(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var root, scope string
	var cmds, hosts starlark.Value = starlark.None, starlark.None
	if err := starlark.UnpackArgs(b.Name(), args, kwargs,
		"root??", &root, "fs_scope??", &scope, "allow_cmd??", &cmds, "allow_net??", &hosts); err != nil {
		return nil, err
	}
	current, err := policyOf(thread, b.Name())
	if err != nil {
		return nil, err
	}
	n := workspace.Narrowing{Root: root}
	if scope != "" {
		if n.Tier, err = workspace.ParseTier(scope); err != nil {
			return nil, fail(b.Name(), err)
		}
	}
	if n.AllowCmds, err = optionalStrings(b.Name(), "allow_cmd", cmds); err != nil {
		return nil, err
	}
	if n.AllowNet, err = optionalStrings(b.Name(), "allow_net", hosts); err != nil {
		return nil, err
	}
	if n == (workspace.Narrowing{}) {
		return &policyValue{current}, nil
	}
	p, err := current.Narrow(n)
	if err != nil {
		return nil, fail(b.Name(), err)
	}
	return &policyValue{p}, nil
}

// optionalStrings converts a parameter that is None (nil: keep) or a list
// or tuple of strings (a pointer to them, empty included).
func optionalStrings(fn, param string, v starlark.Value) (*[]string, error) {
	if v == starlark.None {
		return nil, nil
	}
	list, err := stringsOf(v)
	if err != nil {
		return nil, fmt.Errorf("%s: for parameter %s: %w", fn, param, err)
	}
	return &list, nil
}

// stringsOf converts a list or tuple of strings.
func stringsOf(v starlark.Value) ([]string, error) {
	seq, ok := v.(starlark.Indexable)
	if _, isStr := v.(starlark.String); isStr || !ok {
		return nil, fmt.Errorf("got %s, want list of strings", v.Type())
	}
	out := make([]string, seq.Len())
	for i := range out {
		s, ok := seq.Index(i).(starlark.String)
		if !ok {
			return nil, fmt.Errorf("item %d: got %s, want string", i, seq.Index(i).Type())
		}
		out[i] = string(s)
	}
	return out, nil
}

// loopWorkspace converts agent_loop's workspace option: a policy no wider
// than the one in force on thread. A policy made before an enclosing loop
// narrowed further is checked again against the narrower one, so a
// nested loop can never get back what an outer loop took away.
func loopWorkspace(thread *starlark.Thread, o *options) (*workspace.Policy, error) {
	v, ok := o.get("workspace")
	if !ok {
		return nil, nil
	}
	pv, ok := v.(*policyValue)
	if !ok {
		return nil, o.typeErr("workspace", v)
	}
	current, err := policyOf(thread, o.fn)
	if err != nil {
		return nil, err
	}
	if pv.p == current {
		return current, nil
	}
	cmds, hosts := pv.p.AllowCmds(), pv.p.AllowNet()
	p, err := current.Narrow(workspace.Narrowing{Root: pv.p.Root(), Tier: pv.p.Tier(), AllowCmds: &cmds, AllowNet: &hosts})
	if err != nil {
		return nil, fmt.Errorf("%s: option 'workspace': %w", o.fn, err)
	}
	return p, nil
}

// seconds converts a timeout_s parameter: None gives dflt, else an int or
// float > 0.
func seconds(fn, param string, v starlark.Value, dflt time.Duration) (time.Duration, error) {
	if v == nil || v == starlark.None {
		return dflt, nil
	}
	f, ok := starlark.AsFloat(v)
	if _, isBool := v.(starlark.Bool); isBool || !ok {
		return 0, fmt.Errorf("%s: for parameter %s: got %s, want int or float", fn, param, v.Type())
	}
	if err := checkSeconds(fn, param, f, false); err != nil {
		return 0, err
	}
	return time.Duration(f * float64(time.Second)), nil
}

// maxSeconds bounds every duration a script gives in seconds: beyond it
// (about 31 years) the conversion to a time.Duration would overflow.
const maxSeconds = 1e9

// checkSeconds checks a duration in seconds: finite (NaN and the
// infinities would wrap around in a time.Duration), at most maxSeconds,
// and > 0 (>= 0 if zero is allowed).
func checkSeconds(fn, param string, f float64, zero bool) error {
	switch {
	case math.IsNaN(f) || math.IsInf(f, 0):
		return fmt.Errorf("%s: '%s' must be a finite number, got %s", fn, param, starlark.Float(f))
	case zero && f < 0:
		return fmt.Errorf("%s: '%s' must be >= 0", fn, param)
	case !zero && f <= 0:
		return fmt.Errorf("%s: '%s' must be > 0", fn, param)
	case f > maxSeconds:
		return fmt.Errorf("%s: '%s' is too large", fn, param)
	}
	return nil
}
