package acp

import (
	sdk "github.com/coder/acp-go-sdk"

	"github.com/skein-dev/skein/sessions"
)

// Permission option ids skein offers in session/request_permission.
const (
	optionAllow  = "allow"
	optionAlways = "allow_always"
	optionReject = "reject"
)

// Permissions asks the client whether a tool call may run, with
// session/request_permission: the approval callback of the VM that
// serves the agent (tools an agent lists in approve). Create one with
// NewPermissions, give its Approve to the VM and the value to Serve
// (AgentConfig.Permissions).
//
// Approve is told the tool and its arguments, not the session nor the
// call: it asks about the call that a running turn of this connection
// announced last (the loop publishes a tool_executing state event,
// which names the session and the call, right before it asks, on the
// same goroutine). Two turns starting the same tool at the same instant
// would be told apart only by that order.
type Permissions struct {
	side chan *agentSide // holds the connection once Serve runs
}

// NewPermissions returns a Permissions for one Serve.
func NewPermissions() *Permissions {
	return &Permissions{side: make(chan *agentSide, 1)}
}

// executing is the tool call a turn announced last.
type executing struct {
	callID, tool string
	seq          int64 // order of announcements over the connection
	asked        bool
}

// Approve asks the client about a call of tool with args, and reports
// whether it may run: the user allowed it once, or always for this tool
// in this session (asked no more after that). A refusal, a cancelled
// request, a cancelled turn and a call no running turn announced are
// false.
func (p *Permissions) Approve(tool string, args map[string]any) (bool, error) {
	var a *agentSide
	select {
	case a = <-p.side:
		p.side <- a
	default:
		return false, nil // no connection yet
	}
	a.mu.Lock()
	var s *agentSession
	for _, c := range a.sessions {
		if c.turn != nil && c.exec != nil && !c.exec.asked && c.exec.tool == tool && (s == nil || c.exec.seq > s.exec.seq) {
			s = c
		}
	}
	if s == nil {
		a.mu.Unlock()
		a.cfg.Logger.Warn("a tool needing approval ran outside any announced call: refused", "tool", tool)
		return false, nil
	}
	if s.always[tool] {
		a.mu.Unlock()
		return true, nil
	}
	s.exec.asked = true
	callID, ctx, id := s.exec.callID, s.turn.ctx, s.id
	a.mu.Unlock()

	kind := toolKind(tool)
	resp, err := a.peer().RequestPermission(ctx, sdk.RequestPermissionRequest{
		SessionId: sdk.SessionId(id),
		ToolCall: sdk.ToolCallUpdate{ToolCallId: sdk.ToolCallId(callID), Title: sdk.Ptr(tool), Kind: &kind,
			Status: sdk.Ptr(sdk.ToolCallStatusPending), RawInput: args},
		Options: []sdk.PermissionOption{
			{OptionId: optionAllow, Name: "Allow", Kind: sdk.PermissionOptionKindAllowOnce},
			{OptionId: optionAlways, Name: "Always allow " + tool, Kind: sdk.PermissionOptionKindAllowAlways},
			{OptionId: optionReject, Name: "Reject", Kind: sdk.PermissionOptionKindRejectOnce},
		},
	})
	if err != nil || resp.Outcome.Selected == nil {
		return false, nil // cancelled, or the client is gone
	}
	switch resp.Outcome.Selected.OptionId {
	case optionAlways:
		a.mu.Lock()
		s.always[tool] = true
		a.mu.Unlock()
		return true, nil
	case optionAllow:
		return true, nil
	}
	return false, nil
}

// noteExecuting records the tool call a turn of session id starts (from
// its tool_executing state event). It runs in the store's observer.
func (a *agentSide) noteExecuting(id string, e sessions.Event) {
	tool, _ := e.Data["tool"].(string)
	a.mu.Lock()
	defer a.mu.Unlock()
	if s := a.sessions[id]; s != nil {
		a.execSeq++
		s.exec = &executing{callID: e.CorrID, tool: tool, seq: a.execSeq}
	}
}
