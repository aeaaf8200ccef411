package agent

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/skein-dev/skein/sessions"
)

// Metadata keys of a session bound to an agent: the agent's name, its
// frozen snapshot (Definition.Snapshot, with its directory) and the
// session context (SessionContext.Map).
const (
	MetadataName     = "agent"
	MetadataSnapshot = "agent_snapshot"
	MetadataContext  = "session_context"
)

// EventSessionStarted is the first event of every session, logged by the
// store when the session is created: {agent, model, fingerprint, context}
// for one created bound to an agent or with a context.
const EventSessionStarted = sessions.EventSessionStarted

// EventAgentBound is logged when an existing session that has no agent
// and no messages yet (a workflow stage's) is bound to an agent or given
// a context: session:started's data. The session itself started earlier.
const EventAgentBound = "agent_bound"

// SessionContext is where a session works: the workspace context of an
// editor or a run, set when the session is created (or updated), stored
// with it and interpolated into the agent's prompts as {{ctx.NAME}}.
type SessionContext struct {
	WorkingDir  string
	ActiveFile  string
	Selection   string
	GitRef      string
	FSScopeTier string
	Variables   map[string]string
}

// ContextKeys are a context's keys, sorted.
var ContextKeys = []string{"activeFile", "fsScopeTier", "gitRef", "selection", "variables", "workingDir"}

// ParseContext reads a context map (decoded data). Unknown keys (with a
// "did you mean"), values that are not strings and variables that are not
// a map of strings are errors.
func ParseContext(m map[string]any) (SessionContext, error) {
	var c SessionContext
	for _, k := range sortedKeys(m) {
		if !slices.Contains(ContextKeys, k) {
			return c, UnknownKey("context key", k, ContextKeys)
		}
		x := m[k]
		if x == nil {
			continue
		}
		if k == "variables" {
			vars, ok := x.(map[string]any)
			if !ok {
				return c, fmt.Errorf("context 'variables': got %s, want a dict of strings", TypeOf(x))
			}
			c.Variables = make(map[string]string, len(vars))
			for name, v := range vars {
				s, ok := v.(string)
				if !ok {
					return c, fmt.Errorf("context 'variables.%s': got %s, want string", name, TypeOf(v))
				}
				c.Variables[name] = s
			}
			continue
		}
		s, ok := x.(string)
		if !ok {
			return c, fmt.Errorf("context '%s': got %s, want string", k, TypeOf(x))
		}
		*c.field(k) = s
	}
	if c.FSScopeTier != "" && !slices.Contains([]string{"sandboxed", "project", "full"}, c.FSScopeTier) {
		return c, fmt.Errorf("context 'fsScopeTier': unknown tier '%s' (expected one of: full, project, sandboxed)", c.FSScopeTier)
	}
	return c, nil
}

func (c *SessionContext) field(k string) *string {
	switch k {
	case "workingDir":
		return &c.WorkingDir
	case "activeFile":
		return &c.ActiveFile
	case "selection":
		return &c.Selection
	case "gitRef":
		return &c.GitRef
	case "fsScopeTier":
		return &c.FSScopeTier
	}
	return nil
}

// Empty reports whether nothing is set.
func (c SessionContext) Empty() bool {
	return c.WorkingDir == "" && c.ActiveFile == "" && c.Selection == "" && c.GitRef == "" && c.FSScopeTier == "" && len(c.Variables) == 0
}

// Map returns the context as data (only the keys set).
func (c SessionContext) Map() map[string]any {
	m := map[string]any{}
	for _, k := range ContextKeys {
		if k == "variables" {
			if len(c.Variables) > 0 {
				vars := make(map[string]any, len(c.Variables))
				for name, v := range c.Variables {
					vars[name] = v
				}
				m[k] = vars
			}
			continue
		}
		if v := *c.field(k); v != "" {
			m[k] = v
		}
	}
	return m
}

// Strings returns every value of the context (for secret checks).
func (c SessionContext) Strings() []string {
	out := []string{c.WorkingDir, c.ActiveFile, c.Selection, c.GitRef, c.FSScopeTier}
	for _, v := range c.Variables {
		out = append(out, v)
	}
	return out
}

// Interpolate fills {{ctx.NAME}} and {{ctx.variables.NAME}} placeholders
// of text from c; "{{{{" writes "{{". A name that is not a context key or
// a variable, or a placeholder left open, is an error naming it; a key
// that is not set reads as "".
func Interpolate(text string, c SessionContext) (string, error) {
	if !strings.Contains(text, "{{") {
		return text, nil
	}
	var b strings.Builder
	rest := text
	for {
		i := strings.Index(rest, "{{")
		if i < 0 {
			b.WriteString(rest)
			return b.String(), nil
		}
		b.WriteString(rest[:i])
		rest = rest[i:]
		if strings.HasPrefix(rest, "{{{{") {
			b.WriteString("{{")
			rest = rest[4:]
			continue
		}
		end := strings.Index(rest, "}}")
		if end < 0 {
			return "", fmt.Errorf("a '{{' is not closed (write '{{{{' for a literal '{{')")
		}
		name := strings.TrimSpace(rest[2:end])
		rest = rest[end+2:]
		v, err := c.lookup(name)
		if err != nil {
			return "", err
		}
		b.WriteString(v)
	}
}

func (c SessionContext) lookup(name string) (string, error) {
	key, ok := strings.CutPrefix(name, "ctx.")
	if !ok {
		return "", fmt.Errorf("unknown placeholder '{{%s}}' (placeholders are {{ctx.NAME}}; write '{{{{' for a literal '{{')", name)
	}
	if v, ok := strings.CutPrefix(key, "variables."); ok {
		s, found := c.Variables[v]
		if !found {
			names := make([]string, 0, len(c.Variables))
			for n := range c.Variables {
				names = append(names, n)
			}
			sort.Strings(names)
			return "", fmt.Errorf("unknown context variable '%s' in {{%s}} (the context's variables: %s)", v, name, strings.Join(names, ", "))
		}
		return s, nil
	}
	if key == "variables" || !slices.Contains(ContextKeys, key) {
		return "", fmt.Errorf("{{%s}}: %w", name, UnknownKey("context key", key, ContextKeys))
	}
	return *c.field(key), nil
}

// SystemPrompt assembles the system prompt a bound session sends: the
// agent's own prompt with {{ctx.*}} filled, then a skills section (each
// skill's name and description, loaded with load_skill), then a context
// section (working directory, active file, selection, git ref) when any
// of those is set.
func (d *Definition) SystemPrompt(c SessionContext) (string, error) {
	soul, err := Interpolate(d.System, c)
	if err != nil {
		return "", fmt.Errorf("agent '%s': system: %w", d.Name, err)
	}
	parts := []string{}
	if strings.TrimSpace(soul) != "" {
		parts = append(parts, strings.TrimRight(soul, "\n"))
	}
	if len(d.Skills) > 0 {
		var b strings.Builder
		b.WriteString("## Skills\n\nLoad a skill's instructions with the " + ToolLoadSkill + " tool when the task needs it:\n")
		for _, s := range d.Skills {
			fmt.Fprintf(&b, "\n- %s: %s", s.Name, s.Description)
		}
		parts = append(parts, b.String())
	}
	var ctx []string
	for _, kv := range [][2]string{{"Working directory", c.WorkingDir}, {"Active file", c.ActiveFile}, {"Selection", c.Selection}, {"Git ref", c.GitRef}} {
		if kv[1] != "" {
			ctx = append(ctx, fmt.Sprintf("- %s: %s", kv[0], kv[1]))
		}
	}
	if len(ctx) > 0 {
		parts = append(parts, "## Context\n\n"+strings.Join(ctx, "\n"))
	}
	return strings.Join(parts, "\n\n"), nil
}
