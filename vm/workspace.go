package vm

import (
	"go.starlark.net/starlark"

	"github.com/skein-dev/skein/workspace"
)

const workspaceKey = "skein.vm.workspace"

// WorkspaceOf returns the workspace policy that Starlark code running on
// thread is held to: the innermost one set by WithWorkspace (an agent
// loop given a narrowed policy), else the VM's.
func WorkspaceOf(thread *starlark.Thread) (*workspace.Policy, error) {
	if p, ok := thread.Local(workspaceKey).(*workspace.Policy); ok && p != nil {
		return p, nil
	}
	s, err := StateOf(thread)
	if err != nil {
		return nil, err
	}
	return s.Workspace, nil
}

// WithWorkspace makes p the thread's workspace policy until restore is
// called. The caller is responsible for p being no wider than the policy
// it replaces (workspace.Policy.Narrow).
func WithWorkspace(thread *starlark.Thread, p *workspace.Policy) (restore func()) {
	prev := thread.Local(workspaceKey)
	thread.SetLocal(workspaceKey, p)
	return func() { thread.SetLocal(workspaceKey, prev) }
}
