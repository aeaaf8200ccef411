package workflow

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/expr-lang/expr/vm"
	"github.com/skein-dev/skein/agent"
	"github.com/skein-dev/skein/internal/yamlfile"
	"github.com/skein-dev/skein/llm/schema"
)

// Mode is how a stage runs.
type Mode string

// Stage modes.
const (
	ModeAgent Mode = "agent" // an agent loop on the stage session
	ModeLLM   Mode = "llm"   // one model call, no session unless model_policy.session_id is set
	ModeFn    Mode = "fn"    // a function of the caller's (Executor) given the run's context
	// ModeInput starts a run: its output is the run's task. ModeOutput
	// ends one: its output is the previous stage's. Neither calls a
	// model or has a session; a session's export starts and ends with
	// them.
	ModeInput  Mode = "input"
	ModeOutput Mode = "output"
)

// Modes lists the stage modes in sorted order.
var Modes = []Mode{ModeAgent, ModeFn, ModeInput, ModeLLM, ModeOutput}

// Graph is a validated workflow: nodes, edges with compiled conditions,
// and the normalised specification it was built from (what Dump writes
// and what Fingerprint hashes).
type Graph struct {
	Name  string
	Entry string
	// Nodes by name; Order lists the names sorted.
	Nodes map[string]*Node
	Order []string
	Edges []*Edge
	// Metadata is the free-form top-level metadata map (nil if absent).
	Metadata map[string]any
	// Agents are the agents the nodes' agent_ref names, by name (the
	// top-level agents: list of full definitions).
	Agents map[string]*agent.Definition

	spec        map[string]any
	fingerprint string
	out         map[string][]*Edge // outgoing edges by node, in order
}

// Node is one stage of a graph.
type Node struct {
	Name   string
	Mode   Mode
	Prompt string // the template text (prompt_template, or prompt); empty for fn, input and output nodes
	// AgentRef names the agent an agent node runs, bound to the stage's
	// session ("" for none).
	AgentRef string
	System   string
	// Tools are the names of the stage's tools, in order.
	Tools []string
	// Fn names the function of an fn node: "file.star:function" in files,
	// the function's reference in graphs built by a script.
	Fn          string
	ModelPolicy ModelPolicy
	// Options are the other agent loop options of the node (max_iterations,
	// compaction, ...), normalised JSON values, by key.
	Options map[string]any
	// RequireTranscript is input_contract.require_transcript: the stage
	// session must already exist and hold messages.
	RequireTranscript bool
	// OutputSchema is output_contract.json_schema (nil if none).
	OutputSchema map[string]any

	prompt   *template
	contract *schema.Schema
}

// ModelPolicy is a node's model_policy. Zero fields are unset.
type ModelPolicy struct {
	Provider, Model, BaseURL string
	// APIVersion is Azure OpenAI's api-version.
	APIVersion string
	// SessionID, when not blank, is the stage session's id.
	SessionID   string
	Temperature *float64
	MaxTokens   *int
}

// Edge is one edge; When is the condition's source ("" is always true).
type Edge struct {
	Index    int
	From, To string
	When     string

	program *vm.Program
}

// String names the edge as errors do: "edge 2 (review -> fix)".
func (e *Edge) String() string { return fmt.Sprintf("edge %d (%s -> %s)", e.Index, e.From, e.To) }

// Fingerprint identifies the graph's content: two graphs with the same
// specification have the same fingerprint. A resumed run must match the
// recorded one.
func (g *Graph) Fingerprint() string { return g.fingerprint }

// Spec returns the graph's normalised specification: the value Decode
// accepts, with sorted-key maps, int64 integers and float64 numbers. The
// caller must not modify it.
func (g *Graph) Spec() map[string]any { return g.spec }

// Outgoing returns the edges leaving node, in order.
func (g *Graph) Outgoing(node string) []*Edge { return g.out[node] }

// topKeys are the keys of a graph specification.
var topKeys = []string{"agents", "edges", "entry", "metadata", "name", "nodes"}

// Decode builds and validates a graph from its specification: a map with
// the keys name, entry, nodes (name -> node map), edges (a list of
// {from, to, when}) and metadata, holding JSON-like Go values (nil, bool,
// integers, floats, string, []any, map[string]any). Errors name the node
// or edge at fault and never the caller; callers prefix their own name.
func Decode(spec map[string]any) (*Graph, error) {
	norm, err := yamlfile.Normalize(spec, "graph")
	if err != nil {
		return nil, err
	}
	top := norm.(map[string]any)
	if err := checkKeys("graph", top, topKeys); err != nil {
		return nil, err
	}
	g := &Graph{spec: top, Nodes: map[string]*Node{}, out: map[string][]*Edge{}}
	if g.Name, err = requiredString(top, "name", "graph"); err != nil {
		return nil, err
	}
	if g.Entry, err = requiredString(top, "entry", "graph"); err != nil {
		return nil, err
	}
	if v, ok := top["metadata"]; ok {
		m, isMap := v.(map[string]any)
		if !isMap {
			return nil, fmt.Errorf("graph: 'metadata': got %s, want a map", typeName(v))
		}
		g.Metadata = m
	}
	if err := g.decodeAgents(top["agents"]); err != nil {
		return nil, err
	}
	nodes, ok := top["nodes"].(map[string]any)
	switch {
	case top["nodes"] == nil:
		return nil, fmt.Errorf("graph: missing 'nodes'")
	case !ok:
		return nil, fmt.Errorf("graph: 'nodes': got %s, want a map of node name to node", typeName(top["nodes"]))
	case len(nodes) == 0:
		return nil, fmt.Errorf("graph: 'nodes' is empty")
	}
	for name := range nodes {
		g.Order = append(g.Order, name)
	}
	sort.Strings(g.Order)
	for _, name := range g.Order {
		n, err := decodeNode(name, nodes[name])
		if err != nil {
			return nil, err
		}
		g.Nodes[name] = n
	}
	for _, name := range g.Order {
		if ref := g.Nodes[name].AgentRef; ref != "" && g.Agents[ref] == nil {
			return nil, fmt.Errorf("node '%s': unknown agent_ref '%s' (the graph's agents: %s)", name, ref, strings.Join(g.agentNames(), ", "))
		}
	}
	if _, ok := g.Nodes[g.Entry]; !ok {
		return nil, fmt.Errorf("graph: entry '%s' is not a node (nodes: %s)", g.Entry, strings.Join(g.Order, ", "))
	}
	for _, n := range g.Nodes {
		if err := n.prompt.checkNodes(n.Name, g.Nodes); err != nil {
			return nil, err
		}
	}
	if err := g.decodeEdges(top["edges"]); err != nil {
		return nil, err
	}
	if err := g.checkReachable(); err != nil {
		return nil, err
	}
	b, err := json.Marshal(top)
	if err != nil {
		return nil, fmt.Errorf("graph: %w", err)
	}
	sum := sha256.Sum256(b)
	g.fingerprint = "sha256:" + hex.EncodeToString(sum[:])
	return g, nil
}

var edgeKeys = []string{"from", "to", "when"}

func (g *Graph) decodeEdges(v any) error {
	if v == nil {
		return nil
	}
	list, ok := v.([]any)
	if !ok {
		return fmt.Errorf("graph: 'edges': got %s, want a list of edges", typeName(v))
	}
	for i, item := range list {
		m, ok := item.(map[string]any)
		if !ok {
			return fmt.Errorf("edge %d: got %s, want a map with from, to and when", i, typeName(item))
		}
		e := &Edge{Index: i}
		from, _ := m["from"].(string)
		to, _ := m["to"].(string)
		e.From, e.To = from, to
		where := e.String()
		if err := checkKeys(where, m, edgeKeys); err != nil {
			return err
		}
		for _, k := range []string{"from", "to"} {
			s, isStr := m[k].(string)
			switch {
			case m[k] == nil:
				return fmt.Errorf("%s: missing '%s'", where, k)
			case !isStr:
				return fmt.Errorf("%s: '%s': got %s, want a node name", where, k, typeName(m[k]))
			case g.Nodes[s] == nil:
				return fmt.Errorf("%s: '%s' names no node: '%s' (nodes: %s)", where, k, s, strings.Join(g.Order, ", "))
			}
		}
		if w, ok := m["when"]; ok && w != nil {
			s, isStr := w.(string)
			if !isStr {
				return fmt.Errorf("%s: 'when': got %s, want an expression string", where, typeName(w))
			}
			prog, err := compileCondition(s)
			if err != nil {
				return fmt.Errorf("%s: %w", where, err)
			}
			e.When, e.program = s, prog
		}
		g.Edges = append(g.Edges, e)
		g.out[e.From] = append(g.out[e.From], e)
	}
	return nil
}

func (g *Graph) checkReachable() error {
	seen := map[string]bool{g.Entry: true}
	queue := []string{g.Entry}
	for len(queue) > 0 {
		n := queue[0]
		queue = queue[1:]
		for _, e := range g.out[n] {
			if !seen[e.To] {
				seen[e.To] = true
				queue = append(queue, e.To)
			}
		}
	}
	for _, name := range g.Order {
		if !seen[name] {
			return fmt.Errorf("node '%s': unreachable from entry '%s'", name, g.Entry)
		}
	}
	return nil
}

// checkKeys fails on a key of m that is not in allowed (sorted).
func checkKeys(where string, m map[string]any, allowed []string) error {
	var bad []string
	for k := range m {
		if !contains(allowed, k) {
			bad = append(bad, k)
		}
	}
	if len(bad) == 0 {
		return nil
	}
	sort.Strings(bad)
	return fmt.Errorf("%s: %w", where, agent.UnknownKey("key", bad[0], allowed))
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func requiredString(m map[string]any, key, where string) (string, error) {
	v, ok := m[key]
	if !ok || v == nil {
		return "", fmt.Errorf("%s: missing '%s'", where, key)
	}
	s, ok := v.(string)
	if !ok {
		return "", fmt.Errorf("%s: '%s': got %s, want string", where, key, typeName(v))
	}
	if strings.TrimSpace(s) == "" {
		return "", fmt.Errorf("%s: '%s' must not be empty", where, key)
	}
	return s, nil
}

// typeName names a normalised value's type for error messages.
func typeName(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "bool"
	case int64:
		return "int"
	case float64:
		return "float"
	case string:
		return "string"
	case []any:
		return "list"
	case map[string]any:
		return "map"
	}
	return fmt.Sprintf("%T", v)
}

// decodeAgents reads the top-level agents: list of full agent
// definitions (as agent files hold them, or frozen snapshots).
func (g *Graph) decodeAgents(v any) error {
	if v == nil {
		return nil
	}
	list, ok := v.([]any)
	if !ok {
		return fmt.Errorf("graph: 'agents': got %s, want a list of agent definitions", typeName(v))
	}
	g.Agents = map[string]*agent.Definition{}
	for i, x := range list {
		m, isMap := x.(map[string]any)
		if !isMap {
			return fmt.Errorf("graph: agents[%d]: got %s, want an agent definition (a map)", i, typeName(x))
		}
		d, err := agent.Decode(m)
		if err != nil {
			return fmt.Errorf("graph: agents[%d]: %w", i, err)
		}
		if g.Agents[d.Name] != nil {
			return fmt.Errorf("graph: agents[%d]: two agents are named '%s'", i, d.Name)
		}
		g.Agents[d.Name] = d
	}
	return nil
}

// agentNames returns the names of the graph's agents, sorted.
func (g *Graph) agentNames() []string {
	names := make([]string, 0, len(g.Agents))
	for n := range g.Agents {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}
