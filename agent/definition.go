package agent

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/skein-dev/skein/internal/jsonvalue"
	"github.com/skein-dev/skein/internal/yamlfile"
)

// FileSuffix ends the name of an agent file: NAME.agent.yaml.
const FileSuffix = ".agent.yaml"

// Definition is an agent: a named, declarative definition of a model and
// its fallback chain, a system prompt, tools, skills, specialists it may
// spawn, tools that need approval, and defaults of every agent_loop
// option. A session bound to it runs it for the whole conversation.
// Definitions are values: nothing changes one after Decode.
type Definition struct {
	Name        string
	Description string
	// Model is "provider/model" (or a model the provider is resolved
	// from); "" runs the run's default model.
	Model string
	// FallbackChain are the models tried in order, "provider/model" each,
	// when a call to Model fails with a transient error.
	FallbackChain []string
	// System is the agent's own prompt ("soul"); {{ctx.*}} placeholders
	// are filled from the session's context.
	System string
	// Tools are names: built-in tools, "file.star:function" (relative to
	// Dir) or MCP tools.
	Tools []string
	// MCPServers are the MCP servers the agent's tools come from, as the
	// file gives them (the MCP integration reads them).
	MCPServers map[string]any
	// Skills are the skills the agent may load (read from the skill
	// folders when the definition was decoded).
	Skills []Skill
	// Specialists are the agents this one may spawn (spawn_subagent).
	Specialists []*Definition
	// Approve names tools that run only when the approval callback
	// accepts the call.
	Approve []string
	// Options are the agent's defaults of agent_loop's options.
	Options Values
	// Dir is the directory relative paths resolve against ("": none).
	Dir string

	fingerprint string
}

// ownKeys are an agent file's keys that are not agent_loop options.
var ownKeys = []string{"approve", "description", "dir", "fallback_chain", "mcp_servers", "model", "name", "skills", "specialists", "system", "tools"}

// FileOptions is the agent_loop options an agent file may set as
// defaults: the data options, but those its own keys replace (provider
// and model: `model`; fallback: `fallback_chain`) and the session's.
var FileOptions = sync.OnceValue(func() *Table {
	return LoopOptions().Select("agent files", "Keys of an agent file besides its own: every `agent_loop` option that is data, as the agent's default.",
		func(o *Option) bool {
			return !o.Script && !slices.Contains([]string{"provider", "model", "fallback"}, o.Name)
		})
})

// FileKeys returns every key an agent file accepts, sorted.
func FileKeys() []string {
	keys := append(append([]string{}, ownKeys...), FileOptions().Names()...)
	sort.Strings(keys)
	return keys
}

// KeyError is a problem with one key of an agent file: Key names it and
// Line is its line in the file (0 when not known).
type KeyError struct {
	Key  string
	Line int
	Err  error
}

func (e *KeyError) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("line %d: %v", e.Line, e.Err)
	}
	return e.Err.Error()
}

func (e *KeyError) Unwrap() error { return e.Err }

// Load reads an agent file. Errors name the file and, for a key, its
// line; an unknown key gets a "did you mean".
func Load(path string) (*Definition, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	dir, err := filepath.Abs(filepath.Dir(path))
	if err != nil {
		return nil, err
	}
	d, err := Parse(data, filepath.Base(path), dir)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return d, nil
}

// Parse reads an agent file's bytes; file names it (its stem before
// .agent.yaml is the default name) and dir is where its relative paths
// resolve.
func Parse(data []byte, file, dir string) (*Definition, error) {
	v, err := yamlfile.Parse(data)
	if err != nil {
		return nil, err
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("an agent file holds a map (name, model, system, ...), got %s", TypeOf(v))
	}
	if _, named := m["name"]; !named {
		m["name"] = strings.TrimSuffix(file, FileSuffix)
	}
	if _, ok := m["dir"]; !ok && dir != "" {
		m["dir"] = dir
	}
	d, err := Decode(m)
	var ke *KeyError
	if errors.As(err, &ke) && ke.Line == 0 {
		ke.Line = yamlfile.KeyLine(data, ke.Key)
	}
	return d, err
}

// Decode builds a definition from its map: an agent file's keys, or a
// frozen snapshot (Snapshot), whose skills and specialists are already
// resolved. Errors are *KeyError.
func Decode(m map[string]any) (*Definition, error) {
	return decode(m, 0)
}

// maxSpecialistDepth bounds specialists of specialists.
const maxSpecialistDepth = 8

func decode(m map[string]any, depth int) (*Definition, error) {
	keys := FileKeys()
	for _, k := range sortedKeys(m) {
		if !slices.Contains(keys, k) {
			return nil, &KeyError{Key: k, Err: UnknownKey("key", k, keys)}
		}
	}
	d := &Definition{Options: FileOptions().Empty()}
	str := func(k string, dst *string) error {
		x, ok := m[k]
		if !ok || x == nil {
			return nil
		}
		s, isStr := x.(string)
		if !isStr {
			return &KeyError{Key: k, Err: fmt.Errorf("'%s': got %s, want string", k, TypeOf(x))}
		}
		*dst = s
		return nil
	}
	list := func(k string, dst *[]string) error {
		x, ok := m[k]
		if !ok || x == nil {
			return nil
		}
		l, isList := Strings(x)
		if !isList {
			return &KeyError{Key: k, Err: fmt.Errorf("'%s': got %s, want a list of strings", k, TypeOf(x))}
		}
		for _, s := range l {
			if strings.TrimSpace(s) == "" {
				return &KeyError{Key: k, Err: fmt.Errorf("'%s': an entry is empty", k)}
			}
		}
		*dst = l
		return nil
	}
	for _, f := range []func() error{
		func() error { return str("name", &d.Name) },
		func() error { return str("description", &d.Description) },
		func() error { return str("model", &d.Model) },
		func() error { return str("system", &d.System) },
		func() error { return str("dir", &d.Dir) },
		func() error { return list("fallback_chain", &d.FallbackChain) },
		func() error { return list("tools", &d.Tools) },
		func() error { return list("approve", &d.Approve) },
	} {
		if err := f(); err != nil {
			return nil, err
		}
	}
	if strings.TrimSpace(d.Name) == "" {
		return nil, &KeyError{Key: "name", Err: fmt.Errorf("'name' must not be empty")}
	}
	if x, ok := m["mcp_servers"]; ok && x != nil {
		servers, isMap := x.(map[string]any)
		if !isMap {
			return nil, &KeyError{Key: "mcp_servers", Err: fmt.Errorf("'mcp_servers': got %s, want a map of server name to its settings", TypeOf(x))}
		}
		d.MCPServers = servers
	}
	for _, k := range FileOptions().Names() {
		x, ok := m[k]
		if !ok {
			continue
		}
		if err := d.Options.Set(k, x); err != nil {
			return nil, &KeyError{Key: k, Err: err}
		}
	}
	if _, err := d.Options.Output(); err != nil {
		return nil, &KeyError{Key: "output_schema", Err: err}
	}
	if _, err := d.Options.Thinking(); err != nil {
		return nil, &KeyError{Key: "thinking", Err: err}
	}
	for _, name := range d.Approve {
		if !slices.Contains(d.Tools, name) && name != ToolSpawnSubagent {
			return nil, &KeyError{Key: "approve", Err: fmt.Errorf("'approve': '%s' is not one of the agent's tools (%s)", name, strings.Join(d.Tools, ", "))}
		}
	}
	if err := d.decodeSkills(m["skills"]); err != nil {
		return nil, err
	}
	if err := d.decodeSpecialists(m["specialists"], depth); err != nil {
		return nil, err
	}
	return d, nil
}

// decodeSpecialists reads specialists: names of agent files beside this
// one (NAME.agent.yaml in Dir) or full definitions (a snapshot's).
func (d *Definition) decodeSpecialists(x any, depth int) error {
	if x == nil {
		return nil
	}
	items, ok := x.([]any)
	if !ok {
		return &KeyError{Key: "specialists", Err: fmt.Errorf("'specialists': got %s, want a list of agent names", TypeOf(x))}
	}
	if depth >= maxSpecialistDepth {
		return &KeyError{Key: "specialists", Err: fmt.Errorf("'specialists': nested more than %d deep (does an agent name itself?)", maxSpecialistDepth)}
	}
	for i, item := range items {
		var s *Definition
		var err error
		switch item := item.(type) {
		case string:
			if d.Dir == "" {
				return &KeyError{Key: "specialists", Err: fmt.Errorf("specialists[%d]: '%s': no directory to find %s%s in (give a full definition)", i, item, item, FileSuffix)}
			}
			path := filepath.Join(d.Dir, item+FileSuffix)
			data, rerr := os.ReadFile(path)
			if rerr != nil {
				return &KeyError{Key: "specialists", Err: fmt.Errorf("specialists[%d]: unknown agent '%s' (no %s)", i, item, path)}
			}
			var v any
			if v, err = yamlfile.Parse(data); err == nil {
				m, isMap := v.(map[string]any)
				if !isMap {
					err = fmt.Errorf("an agent file holds a map")
				} else {
					if _, named := m["name"]; !named {
						m["name"] = item
					}
					if _, ok := m["dir"]; !ok {
						m["dir"] = d.Dir
					}
					s, err = decode(m, depth+1)
				}
			}
			if err != nil {
				err = fmt.Errorf("%s: %w", path, err)
			}
		case map[string]any:
			s, err = decode(item, depth+1)
		default:
			err = fmt.Errorf("got %s, want an agent name", TypeOf(item))
		}
		if err != nil {
			return &KeyError{Key: "specialists", Err: fmt.Errorf("specialists[%d]: %w", i, err)}
		}
		d.Specialists = append(d.Specialists, s)
	}
	return nil
}

// Specialist returns the specialist named name, or nil.
func (d *Definition) Specialist(name string) *Definition {
	for _, s := range d.Specialists {
		if s.Name == name {
			return s
		}
	}
	return nil
}

// Provider and ModelName split Model ("provider/model"): a model without
// a provider resolves its provider as the run does.
func (d *Definition) Provider() string {
	p, _ := SplitModel(d.Model)
	return p
}

// SplitModel splits "provider/model" at its first slash; a name without
// one is a model of no named provider.
func SplitModel(s string) (provider, model string) {
	if p, m, ok := strings.Cut(s, "/"); ok {
		return p, m
	}
	return "", s
}

// Snapshot returns the frozen definition: every field resolved (skill
// bodies and specialists' definitions included), as a map that Decode
// reads back into the same definition and a file can hold.
func (d *Definition) Snapshot() map[string]any {
	m := d.Options.Given()
	m["name"] = d.Name
	put := func(k, v string) {
		if v != "" {
			m[k] = v
		}
	}
	put("description", d.Description)
	put("model", d.Model)
	put("system", d.System)
	put("dir", d.Dir)
	strs := func(k string, l []string) {
		if len(l) > 0 {
			out := make([]any, len(l))
			for i, s := range l {
				out[i] = s
			}
			m[k] = out
		}
	}
	strs("fallback_chain", d.FallbackChain)
	strs("tools", d.Tools)
	strs("approve", d.Approve)
	if len(d.MCPServers) > 0 {
		m["mcp_servers"] = jsonvalue.CloneObject(d.MCPServers)
	}
	if len(d.Skills) > 0 {
		skills := make([]any, len(d.Skills))
		for i, s := range d.Skills {
			skills[i] = s.snapshot()
		}
		m["skills"] = skills
	}
	if len(d.Specialists) > 0 {
		specs := make([]any, len(d.Specialists))
		for i, s := range d.Specialists {
			specs[i] = s.Snapshot()
		}
		m["specialists"] = specs
	}
	return m
}

// Fingerprint identifies the frozen definition: the SHA-256 of its
// snapshot as canonical JSON.
func (d *Definition) Fingerprint() string {
	if d.fingerprint == "" {
		b, err := jsonvalue.Encode(d.Snapshot())
		if err != nil {
			panic("agent: a snapshot is not JSON: " + err.Error())
		}
		sum := sha256.Sum256(b)
		d.fingerprint = hex.EncodeToString(sum[:8])
	}
	return d.fingerprint
}

// Dump writes the definition as an agent file: its snapshot without the
// directory, keys sorted, byte-stable (Parse then Dump gives the same
// bytes).
func (d *Definition) Dump() []byte {
	m := d.Snapshot()
	delete(m, "dir")
	return yamlfile.Dump(m)
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
