package builtins

// The tools a bound agent gets from its definition: load_skill (an agent
// with skills) and spawn_subagent (an agent with specialists).

import (
	"context"
	"fmt"
	"strings"

	"go.starlark.net/starlark"

	"github.com/skein-dev/skein/agent"
	"github.com/skein-dev/skein/llm"
	"github.com/skein-dev/skein/sessions"
	"github.com/skein-dev/skein/sessions/message"
	"github.com/skein-dev/skein/vm"
)

// skillTool is load_skill(name) of an agent with skills: the skill's
// body, and a skill_loaded event on the session.
type skillTool struct {
	def       *agent.Definition
	sessionID string
}

var _ Tool = (*skillTool)(nil)

func (t *skillTool) String() string        { return "<tool " + agent.ToolLoadSkill + ">" }
func (t *skillTool) Type() string          { return "tool" }
func (t *skillTool) Freeze()               {}
func (t *skillTool) Truth() starlark.Bool  { return true }
func (t *skillTool) Hash() (uint32, error) { return starlark.String(agent.ToolLoadSkill).Hash() }

// ToolSpec names the skills in its description.
func (t *skillTool) ToolSpec() llm.ToolSpec {
	names := make([]any, len(t.def.Skills))
	for i, s := range t.def.Skills {
		names[i] = s.Name
	}
	return llm.ToolSpec{Name: agent.ToolLoadSkill,
		Description: "Load a skill's full instructions by name (the skills are listed in the system prompt).",
		Parameters: map[string]any{"type": "object", "required": []any{"name"}, "additionalProperties": false,
			"properties": map[string]any{"name": map[string]any{"type": "string", "enum": names, "description": "The skill's name."}}}}
}

// Bind returns the tool as the loop runs it.
func (t *skillTool) Bind(thread *starlark.Thread) agent.Tool {
	return &boundSkill{tool: t, thread: thread}
}

type boundSkill struct {
	tool   *skillTool
	thread *starlark.Thread
}

func (b *boundSkill) Spec() llm.ToolSpec { return b.tool.ToolSpec() }

func (b *boundSkill) Run(ctx context.Context, call message.ToolCall) (string, error) {
	name, _ := call.Arguments["name"].(string)
	s, ok := b.tool.def.Skill(name)
	if !ok {
		names := make([]string, len(b.tool.def.Skills))
		for i, s := range b.tool.def.Skills {
			names[i] = s.Name
		}
		return "", fmt.Errorf("unknown skill '%s' (the agent's skills: %s)", name, strings.Join(names, ", "))
	}
	st, err := vm.StateOf(b.thread)
	if err != nil {
		return "", err
	}
	ev := sessions.NewEvent(agent.EventSkillLoaded, map[string]any{"name": s.Name})
	ev.CorrID = call.ID
	events, err := st.Store.Apply(ctx, b.tool.sessionID, &sessions.Change{Events: []sessions.Event{ev}})
	if err != nil {
		return "", err
	}
	if err := deliver(b.thread, st.Store, events); err != nil {
		return "", &agent.ToolError{Err: err, Fatal: true}
	}
	return s.Body, nil
}

// specialistTool is spawn_subagent(agent, task) of an agent with
// specialists: the specialist runs as a child session bound to it, with
// half the parent's remaining iterations.
type specialistTool struct{ def *agent.Definition }

var _ Tool = (*specialistTool)(nil)

func (t *specialistTool) String() string       { return "<tool " + agent.ToolSpawnSubagent + ">" }
func (t *specialistTool) Type() string         { return "tool" }
func (t *specialistTool) Freeze()              {}
func (t *specialistTool) Truth() starlark.Bool { return true }
func (t *specialistTool) Hash() (uint32, error) {
	return starlark.String(agent.ToolSpawnSubagent).Hash()
}

// ToolSpec lists the specialists and what each is for.
func (t *specialistTool) ToolSpec() llm.ToolSpec {
	names := make([]any, len(t.def.Specialists))
	var desc strings.Builder
	desc.WriteString("Hand a task to a specialist agent, which works on it in its own session and returns its answer. Specialists:")
	for i, s := range t.def.Specialists {
		names[i] = s.Name
		fmt.Fprintf(&desc, "\n- %s", s.Name)
		if s.Description != "" {
			desc.WriteString(": " + s.Description)
		}
	}
	return llm.ToolSpec{Name: agent.ToolSpawnSubagent, Description: desc.String(),
		Parameters: map[string]any{"type": "object", "required": []any{"agent", "task"}, "additionalProperties": false,
			"properties": map[string]any{
				"agent": map[string]any{"type": "string", "enum": names, "description": "The specialist's name."},
				"task":  map[string]any{"type": "string", "description": "What the specialist should do, with everything it needs to know."},
			}}}
}

// Bind returns the tool as the loop runs it.
func (t *specialistTool) Bind(thread *starlark.Thread) agent.Tool {
	return &boundSpecialist{tool: t, thread: thread}
}

type boundSpecialist struct {
	tool   *specialistTool
	thread *starlark.Thread
}

func (b *boundSpecialist) Spec() llm.ToolSpec { return b.tool.ToolSpec() }

func (b *boundSpecialist) Run(ctx context.Context, call message.ToolCall) (string, error) {
	name, _ := call.Arguments["agent"].(string)
	task, _ := call.Arguments["task"].(string)
	s := b.tool.def.Specialist(name)
	if s == nil {
		return "", fmt.Errorf("unknown specialist '%s'", name)
	}
	if strings.TrimSpace(task) == "" {
		return "", fmt.Errorf("the task is empty")
	}
	parent := currentLoop(b.thread)
	if parent == nil {
		return "", fmt.Errorf("%s: no current loop", agent.ToolSpawnSubagent)
	}
	if _, err := loopDepth(b.thread, agent.ToolSpawnSubagent); err != nil {
		return "", err
	}
	budget, err := childBudget(agent.ToolSpawnSubagent, parent, 0)
	if err != nil {
		return "", err
	}
	res, err := spawnAgent(b.thread, agent.ToolSpawnSubagent, parent, s, task, "reset", budget, nil)
	if err != nil {
		return "", &agent.ToolError{Err: err, Fatal: isCancelled(ctx)}
	}
	if res.VisibleText == "" {
		return fmt.Sprintf("(%s ended with status %s and no answer)", s.Name, res.Status), nil
	}
	return res.VisibleText, nil
}

// isCancelled reports whether the run was cancelled: a child that failed
// because of it stops the parent too.
func isCancelled(ctx context.Context) bool { return ctx.Err() != nil }

// spawnAgent runs def as a child of the parent loop: a child session
// (carry: reset, fork or compact) bound to def with the parent's
// context, whose system prompt is def's prompt, then its expertise (its
// description), then the task. o holds the caller's options for the
// child's loop (nil: none; they may only narrow def's limits). The
// parent's log gets subagent_start and subagent_end.
func spawnAgent(thread *starlark.Thread, fn string, parent *loopFrame, def *agent.Definition, task, carry string, budget int, o *options) (*loopResult, error) {
	st, err := stateOf(thread, fn)
	if err != nil {
		return nil, err
	}
	if carry == "inherit" {
		return nil, fmt.Errorf("%s: carry 'inherit' cannot run another agent on the parent's own session (a session cannot change its agent)", fn)
	}
	ctx := vm.ContextOf(thread)
	var sc agent.SessionContext
	if parent.bound != nil {
		sc = parent.bound.ctx
	}
	child, err := childSession(thread, st, fn, parent, carry, startedData(def, &sc))
	if err != nil {
		return nil, err
	}
	meta := bindMetadata(def, &sc)
	if _, err := st.Store.Apply(ctx, child, &sessions.Change{SetMetadata: true,
		Metadata: sessions.MergeMetadata(mustMetadata(ctx, st, child), meta)}); err != nil {
		return nil, fail(fn, err)
	}
	logParent := func(typ string, data map[string]any) error {
		events, err := parent.store.Apply(ctx, parent.sessionID, &sessions.Change{Events: []sessions.Event{sessions.NewEvent(typ, data)}})
		if err != nil {
			return fail(fn, err)
		}
		return deliver(thread, parent.store, events)
	}
	start := map[string]any{"child_id": child, "task": task, "carry": carry, "role": fn, "agent": def.Name}
	if def.Model != "" {
		start["model"] = def.Model
	}
	if err := logParent(eventSubagentStart, start); err != nil {
		return nil, err
	}
	if o == nil {
		o = &options{fn: fn, vals: spawnTable().Empty(), raw: map[string]starlark.Value{}}
	}
	budget = min(budget, def.Options.Int("max_iterations"))
	lo, err := childOptions(o, &loopFrame{}, child, budget, starlark.None)
	if err != nil {
		return nil, err
	}
	b := &binding{def: def, ctx: sc}
	bo, err := boundOptions(thread, st, lo, b, child)
	if err != nil {
		return nil, err
	}
	system, err := def.SystemPrompt(sc)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", fn, err)
	}
	if def.Description != "" {
		system += "\n\n## Expertise\n\n" + def.Description
	}
	system += "\n\n## Task\n\n" + task
	res, err := runLoopWith(thread, st, task, starlark.String(strings.TrimLeft(system, "\n")), bo, b)
	if err != nil {
		_ = logParent(eventSubagentEnd, map[string]any{"child_id": child, "role": fn, "agent": def.Name, "status": "failed", "error": err.Error()})
		return nil, err
	}
	end := map[string]any{"child_id": child, "role": fn, "agent": def.Name, "status": string(res.Status), "output": res.VisibleText,
		"input_tokens": int64(res.Usage.InputTokens), "output_tokens": int64(res.Usage.OutputTokens)}
	if answered := answeredModel(res.Messages); answered != "" {
		end["model"] = answered
	}
	if err := logParent(eventSubagentEnd, end); err != nil {
		return nil, err
	}
	return res, nil
}

// mustMetadata is a session's metadata, nil when it cannot be read (the
// write that follows reports the problem).
func mustMetadata(ctx context.Context, st *vm.State, id string) map[string]any {
	md, _ := st.Store.Metadata(ctx, id)
	return md
}
