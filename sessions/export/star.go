package export

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/skein-dev/skein/agent"
	"github.com/skein-dev/skein/internal/jsonvalue"
	"github.com/skein-dev/skein/sessions"
	"github.com/skein-dev/skein/sessions/message"
)

// StarExport is a session exported as a runnable pipeline (see
// ExportStar): NAME.star, NAME.llm.jsonl and NAME_test.star.
type StarExport struct {
	Pipeline []byte // the pipeline
	Fixture  []byte // the recorded replies, one per model call, for --llm-replay
	Test     []byte // a skein test that replays the session and checks its last message
}

// ExportStar returns rec's current transcript as a pipeline named name
// that rebuilds it: it opens a session with rec's title and metadata,
// injects the messages before the first user turn, and runs one
// agent_loop per user turn (see UserTurns) with the recorded provider and
// model, the model's replies coming from the fixture, in order. The
// tools the turns call are stubs that return the recorded results in
// order. A turn the loop cannot reproduce exactly (messages the script
// injected, tool errors, thinking blocks, message metadata, feedback) is
// injected message by message instead. The output depends on rec alone:
// the same session always exports to the same bytes.
func ExportStar(rec *sessions.Record, name string) (*StarExport, error) {
	g := &starGen{rec: rec, results: map[string][]string{}, params: map[string]map[string]bool{}, provider: recordedProvider(rec.Events)}
	if err := g.plan(); err != nil {
		return nil, err
	}
	return g.render(name)
}

// recordedProvider returns the provider of the first llm_call event, or
// "mock".
func recordedProvider(events []sessions.Event) string {
	for i := range events {
		if p, ok := events[i].Data["provider"].(string); ok && events[i].Type == "llm_call" && p != "" {
			return p
		}
	}
	return "mock"
}

// starGen builds the body of an exported pipeline.
type starGen struct {
	rec      *sessions.Record
	provider string
	body     []string         // statements, one per line, at top level
	replies  []map[string]any // fixture lines, in model call order
	results  map[string][]string
	params   map[string]map[string]bool // tool -> argument names seen
	tools    []string                   // in first-call order
	loops    int
}

func (g *starGen) plan() error {
	msgs := g.rec.Messages
	view := message.NewTranscript(msgs)
	starts := append(sessions.UserTurns(view), len(msgs))
	for i := 0; i < starts[0]; i++ {
		if err := g.inject(&msgs[i]); err != nil {
			return err
		}
	}
	for t := 0; t+1 < len(starts); t++ {
		turn := msgs[starts[t]:starts[t+1]]
		if ok, err := g.loop(turn); err != nil || ok {
			if err != nil {
				return err
			}
			continue
		}
		g.line(fmt.Sprintf("# turn %d: injected message by message (agent_loop cannot reproduce it exactly)", t+1))
		for i := range turn {
			if err := g.inject(&turn[i]); err != nil {
				return err
			}
		}
	}
	return nil
}

func (g *starGen) line(s string) { g.body = append(g.body, s) }

// inject adds an agent_session_inject of m.
func (g *starGen) inject(m *message.Message) error {
	data, err := json.Marshal(m)
	if err != nil {
		return err
	}
	v, err := jsonvalue.Decode(data)
	if err != nil {
		return err
	}
	lit, err := starLiteral(v)
	if err != nil {
		return err
	}
	g.line("agent_session_inject(s, " + lit + ")")
	return nil
}

// plainMessage reports whether m has only what an agent loop gives a
// message of its role.
func plainMessage(m *message.Message) bool {
	return m.Blocks == nil && len(m.Metadata) == 0 && !m.IsError
}

// loop adds an agent_loop reproducing turn, with its replies and tool
// results, when the turn has the shape a loop gives it: user messages
// (all but the last injected), then replies, each calling tools whose
// results follow in call order, the last one without calls (or, for a
// turn cut short, the results of the last calls). It reports false, and
// adds nothing, for any other turn.
func (g *starGen) loop(turn []message.Message) (bool, error) {
	users := 0
	for users < len(turn) && turn[users].Role == message.RoleUser {
		if !plainMessage(&turn[users]) {
			return false, nil
		}
		users++
	}
	rest := turn[users:]
	if len(rest) == 0 || turn[users-1].Text == "" {
		return false, nil
	}
	type call struct{ name, output string }
	var replies []map[string]any
	var calls []call
	model, complete := rest[0].Model, false
	for i := 0; i < len(rest); {
		a := &rest[i]
		if a.Role != message.RoleAssistant || !plainMessage(a) || a.Model == "" || complete {
			return false, nil
		}
		reply := map[string]any{"model": a.Model}
		if a.Text != "" {
			reply["text"] = a.Text
		}
		for _, k := range []string{"input_tokens", "output_tokens"} {
			if n, ok := a.Usage[k].(int64); ok {
				reply[k] = n
			}
		}
		i++
		if len(a.ToolCalls) == 0 {
			complete = true
		}
		var tc []any
		for _, c := range a.ToolCalls {
			if i >= len(rest) {
				return false, nil
			}
			r := &rest[i]
			if r.Role != message.RoleTool || r.ToolCallID != c.ID || r.Name != c.Name || !plainMessage(r) {
				return false, nil
			}
			args := c.Arguments
			if args == nil {
				args = map[string]any{}
			}
			tc = append(tc, map[string]any{"name": c.Name, "arguments": args})
			calls = append(calls, call{c.Name, r.Text})
			i++
		}
		if tc != nil {
			reply["tool_calls"] = tc
		}
		replies = append(replies, reply)
	}
	for i := range turn[:users-1] {
		if err := g.inject(&turn[i]); err != nil {
			return false, err
		}
	}
	for _, r := range replies {
		tc, _ := r["tool_calls"].([]any)
		for _, c := range tc {
			cm := c.(map[string]any)
			name := cm["name"].(string)
			if g.params[name] == nil {
				g.params[name] = map[string]bool{}
				g.tools = append(g.tools, name)
			}
			for k := range cm["arguments"].(map[string]any) {
				g.params[name][k] = true
			}
		}
	}
	for _, c := range calls {
		g.results[c.name] = append(g.results[c.name], c.output)
	}
	g.replies = append(g.replies, replies...)
	g.loops++
	args := []string{strconv.Quote(turn[users-1].Text), "session_id = s", "provider = " + strconv.Quote(g.provider), "model = " + strconv.Quote(model), "tools = TOOLS"}
	// agent_loop makes at most agent.DefaultMaxIterations model calls
	// unless told otherwise: a replayed turn with more passes its own
	if !complete || len(replies) > agent.DefaultMaxIterations {
		args = append(args, "max_iterations = "+strconv.Itoa(len(replies)))
	}
	g.line("r = agent_loop(" + strings.Join(args, ", ") + ")")
	return true, nil
}

func (g *starGen) render(name string) (*StarExport, error) {
	rec := g.rec
	var fixture bytes.Buffer
	for _, r := range g.replies {
		data, err := jsonvalue.Encode(r)
		if err != nil {
			return nil, err
		}
		fixture.Write(data)
		fixture.WriteByte('\n')
	}
	open := []string{}
	if rec.Title != "" {
		open = append(open, "title = "+strconv.Quote(rec.Title))
	}
	if len(rec.Metadata) > 0 {
		lit, err := starLiteral(rec.Metadata)
		if err != nil {
			return nil, fmt.Errorf("metadata: %v", err)
		}
		open = append(open, "metadata = "+lit)
	}
	defs, err := g.definitions()
	if err != nil {
		return nil, err
	}
	// The label goes into comment lines: escaped, no character of it can
	// end the comment (Starlark ends one at \r as well as \n) and run the
	// rest of a hostile title or id as code.
	label := rec.ID
	if rec.Title != "" {
		label += " (" + sessions.Label(rec.Title) + ")"
	}
	label, name = sessions.Escape(label), sessions.Escape(name)
	var p bytes.Buffer
	fmt.Fprintf(&p, `# %s.star: session %s, exported by skein sessions export --format star.
#
# It rebuilds the session's transcript: it opens a new session with the
# same title and metadata, injects the messages that came before the first
# user turn and runs one agent_loop per user turn with the recorded
# provider and model. Replayed offline, the model's replies come from the
# recorded ones and the transcript comes out exactly as it was:
#
#     skein run --llm-replay %s.llm.jsonl %s.star
#
# (tool call ids are the replay's). Without --llm-replay the turns go to
# the provider for real.
#
# The tools are stubs: each returns the results the session recorded for
# it, in order, instead of doing the work. Replace them with the real
# tools to run the pipeline for real.

`, name, label, name, name)
	p.WriteString(defs)
	fmt.Fprintf(&p, "\nTOOLS = recorded_tools()\ns = agent_session_open(%s)\n", strings.Join(open, ", "))
	for _, l := range g.body {
		p.WriteString(l + "\n")
	}
	if g.loops > 0 {
		p.WriteString("print(r[\"text\"])\n")
	}

	var t bytes.Buffer
	fmt.Fprintf(&t, `# %s_test.star: replays session %s offline and checks the transcript it
# rebuilds (skein test %s_test.star). The replies are the recorded ones
# (%s.llm.jsonl), queued with llm_mock; the tools are stubs returning the
# recorded results, in order.

`, name, label, name, name)
	t.WriteString(defs)
	lit, err := starLiteral(anyList(g.replies))
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(&t, "\nREPLIES = %s\n\ndef test_replay():\n", lit)
	t.WriteString("    for reply in REPLIES:\n        llm_mock(**reply)\n")
	fmt.Fprintf(&t, "    TOOLS = recorded_tools()\n    s = agent_session_open(%s)\n", strings.Join(open, ", "))
	for _, l := range g.body {
		t.WriteString("    " + l + "\n")
	}
	t.WriteString("    messages = agent_session_snapshot(s)[\"messages\"]\n")
	fmt.Fprintf(&t, "    assert.eq(len(messages), %d)\n", len(rec.Messages))
	if n := len(rec.Messages); n > 0 {
		last := &rec.Messages[n-1]
		content, err := messageContent(last)
		if err != nil {
			return nil, err
		}
		fmt.Fprintf(&t, "    assert.eq(messages[-1][\"role\"], %s)\n", strconv.Quote(last.Role))
		fmt.Fprintf(&t, "    assert.eq(messages[-1][\"content\"], %s)\n", content)
	}
	return &StarExport{Pipeline: p.Bytes(), Fixture: fixture.Bytes(), Test: t.Bytes()}, nil
}

// definitions returns RESULTS, the tool stubs and TOOLS.
func (g *starGen) definitions() (string, error) {
	var b strings.Builder
	names := append([]string(nil), g.tools...)
	results := map[string]any{}
	for _, n := range names {
		results[n] = anyList(g.results[n])
	}
	lit, err := starLiteral(results)
	if err != nil {
		return "", err
	}
	fmt.Fprintf(&b, "# The recorded result of each call, by tool, in call order.\nRESULTS = %s\n\n", lit)
	b.WriteString(`def recorded_tools():
    """Stubs of the session's tools: the n'th call of a tool returns its n'th recorded result."""
    calls = {}

    def recorded(name):
        n = calls.get(name, 0)
        if n >= len(RESULTS[name]):
            fail("%s: the session recorded only %d results" % (name, len(RESULTS[name])))
        calls[name] = n + 1
        return RESULTS[name][n]
`)
	for _, n := range names {
		if !isStarIdent(n) {
			return "", fmt.Errorf("tool name %q is not a Starlark identifier", n)
		}
		params := make([]string, 0, len(g.params[n]))
		for p := range g.params[n] {
			if !isStarIdent(p) {
				return "", fmt.Errorf("tool %s: argument name %q is not a Starlark identifier", n, p)
			}
			params = append(params, p+" = None")
		}
		sort.Strings(params)
		fmt.Fprintf(&b, "\n    def %s(%s):\n        \"\"\"Stub of the session's %s tool: returns its recorded results in order.\"\"\"\n        return recorded(%s)\n",
			n, strings.Join(params, ", "), n, strconv.Quote(n))
	}
	fmt.Fprintf(&b, "\n    return [%s]\n", strings.Join(names, ", "))
	return b.String(), nil
}

// messageContent returns the Starlark literal of m's content as a
// snapshot shows it: a string, or a list of block dicts.
func messageContent(m *message.Message) (string, error) {
	if m.Blocks == nil {
		return strconv.Quote(m.Text), nil
	}
	data, err := json.Marshal(m.Blocks)
	if err != nil {
		return "", err
	}
	v, err := jsonvalue.Decode(data)
	if err != nil {
		return "", err
	}
	return starLiteral(v)
}

func anyList[T any](xs []T) []any {
	out := make([]any, len(xs))
	for i, x := range xs {
		out[i] = x
	}
	return out
}

// starLiteral renders a JSON value as a Starlark expression: dict keys
// sorted, strings quoted with Go's escapes (which Starlark reads the same
// way for valid UTF-8 text).
func starLiteral(v any) (string, error) {
	var b strings.Builder
	if err := writeStarLiteral(&b, v); err != nil {
		return "", err
	}
	return b.String(), nil
}

func writeStarLiteral(b *strings.Builder, v any) error {
	switch v := v.(type) {
	case nil:
		b.WriteString("None")
	case bool:
		if v {
			b.WriteString("True")
		} else {
			b.WriteString("False")
		}
	case int64:
		b.WriteString(strconv.FormatInt(v, 10))
	case float64:
		data, err := jsonvalue.Encode(v)
		if err != nil {
			return err
		}
		s := string(data)
		if !strings.ContainsAny(s, ".eE") {
			s += ".0"
		}
		b.WriteString(s)
	case string:
		b.WriteString(strconv.Quote(v))
	case []any:
		b.WriteByte('[')
		for i, x := range v {
			if i > 0 {
				b.WriteString(", ")
			}
			if err := writeStarLiteral(b, x); err != nil {
				return err
			}
		}
		b.WriteByte(']')
	case map[string]any:
		b.WriteByte('{')
		for i, k := range slices.Sorted(maps.Keys(v)) {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString(strconv.Quote(k) + ": ")
			if err := writeStarLiteral(b, v[k]); err != nil {
				return err
			}
		}
		b.WriteByte('}')
	default:
		return fmt.Errorf("%T is not a JSON value", v)
	}
	return nil
}

// isStarIdent reports whether s can name a tool stub or its parameter: a
// Starlark identifier that is not a keyword or a name the stubs use.
func isStarIdent(s string) bool {
	if s == "" || slices.Contains(starKeywords, s) {
		return false
	}
	for i, r := range s {
		if !(r == '_' || 'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || i > 0 && '0' <= r && r <= '9') {
			return false
		}
	}
	return true
}

// starKeywords are the names a generated variable may not take.
var starKeywords = []string{"and", "break", "continue", "def", "elif", "else",
	"for", "if", "in", "lambda", "load", "not", "or", "pass", "return",
	"None", "True", "False", "recorded", "calls"}
