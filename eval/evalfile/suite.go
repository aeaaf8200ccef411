// Package evalfile is the eval.Suite of a `skein eval` file: its
// DATASET, task, score_* functions and VARIANTS, run on the file's
// Starlark VM, each job on its own thread and session.
package evalfile

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"go.starlark.net/starlark"

	"github.com/skein-dev/skein/eval"
	"github.com/skein-dev/skein/sessions"
	"github.com/skein-dev/skein/vm"
)

// StarlarkConfig is what NewStarlarkSuite reads.
type StarlarkConfig struct {
	State   *vm.State
	Globals starlark.StringDict // the eval file's globals, after it ran
	// RunID prefixes the cases' session ids.
	RunID string
	// Variants, if not nil, replace the file's VARIANTS (--variant).
	Variants []map[string]starlark.Value
	// CheckOptions checks a variant's options (builtins.CheckCallDefaults).
	CheckOptions func(fn string, d map[string]starlark.Value) error
}

// StarlarkSuite is the Suite of a `skein eval` file: DATASET (a list of
// dicts), task(case) or task(case, variant), the score_NAME(case, result)
// functions and VARIANTS (a list of option dicts, optional).
type StarlarkSuite struct {
	st       *vm.State
	runID    string
	cases    []eval.Case
	values   []starlark.Value // the cases as the file wrote them
	variants []eval.Variant
	vdicts   []*starlark.Dict            // each variant as task's second argument
	defaults []map[string]starlark.Value // each variant's call defaults
	task     starlark.Callable
	withVar  bool // task takes the variant
	names    []string
	scorers  []starlark.Callable
	stop     func()

	mu    sync.Mutex
	calls map[string]*sessionCalls // by session id: the llm_call events seen
}

type sessionCalls struct {
	n     int
	cost  float64
	known bool
}

var _ eval.Suite = (*StarlarkSuite)(nil)

// NewStarlarkSuite reads the suite from an eval file's globals. Errors
// name what is wrong and, for a case, which one.
func NewStarlarkSuite(c StarlarkConfig) (*StarlarkSuite, error) {
	s := &StarlarkSuite{st: c.State, runID: c.RunID, calls: map[string]*sessionCalls{}}
	if err := s.readDataset(c.Globals["DATASET"]); err != nil {
		return nil, err
	}
	task, ok := c.Globals["task"].(starlark.Callable)
	if !ok {
		return nil, fmt.Errorf("the file defines no task(case) function")
	}
	s.task = task
	if f, ok := task.(*starlark.Function); ok {
		switch n := f.NumParams(); {
		case n == 2:
			s.withVar = true
		case n != 1 && !f.HasVarargs():
			return nil, fmt.Errorf("task must take (case) or (case, variant), not %d parameters", n)
		}
	}
	for _, name := range sortedNames(c.Globals) {
		if fn, ok := c.Globals[name].(starlark.Callable); ok && strings.HasPrefix(name, "score_") && len(name) > len("score_") {
			s.names = append(s.names, strings.TrimPrefix(name, "score_"))
			s.scorers = append(s.scorers, fn)
		}
	}
	if len(s.scorers) == 0 {
		return nil, fmt.Errorf("the file defines no scorer (a score_NAME(case, result) function, or score_NAME = exact(...) and the other built-in scorers)")
	}
	variants := c.Variants
	if variants == nil {
		var err error
		if variants, err = readVariants(c.Globals["VARIANTS"]); err != nil {
			return nil, err
		}
	}
	if err := s.setVariants(variants, c.CheckOptions); err != nil {
		return nil, err
	}
	prefix := c.RunID + "-"
	s.stop = c.State.Store.ObserveLogged(func(e sessions.Event) {
		if e.Type != "llm_call" || !strings.HasPrefix(e.SessionID, prefix) {
			return
		}
		s.mu.Lock()
		sc := s.calls[e.SessionID]
		if sc == nil {
			sc = &sessionCalls{known: true}
			s.calls[e.SessionID] = sc
		}
		sc.n++
		if cost, ok := e.Data["cost_usd"].(float64); ok {
			sc.cost += cost
		} else {
			sc.known = false
		}
		s.mu.Unlock()
	})
	return s, nil
}

// Close stops watching the store.
func (s *StarlarkSuite) Close() { s.stop() }

func sortedNames(g starlark.StringDict) []string {
	names := make([]string, 0, len(g))
	for k := range g {
		names = append(names, k)
	}
	sort.Strings(names)
	return names
}

func (s *StarlarkSuite) readDataset(v starlark.Value) error {
	if v == nil {
		return fmt.Errorf("the file defines no DATASET (a list of dicts, or dataset(\"cases.jsonl\"))")
	}
	seq, ok := v.(starlark.Indexable)
	if _, isStr := v.(starlark.String); !ok || isStr {
		return fmt.Errorf("DATASET: got %s, want a list of dicts", v.Type())
	}
	if seq.Len() == 0 {
		return fmt.Errorf("DATASET: no cases")
	}
	seen := map[string]int{}
	for i := 0; i < seq.Len(); i++ {
		d, ok := seq.Index(i).(*starlark.Dict)
		if !ok {
			return fmt.Errorf("DATASET: case %d: got %s, want dict", i+1, seq.Index(i).Type())
		}
		id := fmt.Sprintf("#%d", i+1)
		if v, found, _ := d.Get(starlark.String("id")); found {
			switch v := v.(type) {
			case starlark.String:
				id = string(v)
			case starlark.Int:
				id = v.String()
			default:
				return fmt.Errorf("DATASET: case %d: 'id' must be a string or an int, got %s", i+1, v.Type())
			}
			if j, dup := seen[id]; dup {
				return fmt.Errorf("DATASET: case %d: id '%s' is also case %d's", i+1, id, j)
			}
			seen[id] = i + 1
		}
		s.cases = append(s.cases, eval.Case{Index: i, ID: id})
		s.values = append(s.values, d)
	}
	return nil
}

func readVariants(v starlark.Value) ([]map[string]starlark.Value, error) {
	if v == nil || v == starlark.None {
		return nil, nil
	}
	list, ok := v.(starlark.Indexable)
	if _, isStr := v.(starlark.String); !ok || isStr {
		return nil, fmt.Errorf("VARIANTS: got %s, want a list of dicts", v.Type())
	}
	out := make([]map[string]starlark.Value, list.Len())
	for i := range out {
		d, ok := list.Index(i).(*starlark.Dict)
		if !ok {
			return nil, fmt.Errorf("VARIANTS[%d]: got %s, want dict", i, list.Index(i).Type())
		}
		m := map[string]starlark.Value{}
		for _, kv := range d.Items() {
			k, ok := kv[0].(starlark.String)
			if !ok {
				return nil, fmt.Errorf("VARIANTS[%d]: keys must be strings, got %s", i, kv[0].Type())
			}
			m[string(k)] = kv[1]
		}
		out[i] = m
	}
	return out, nil
}

// setVariants checks each variant's options and names it: its "name", else
// "provider/model" and its other options as k=v; no variant is one named
// "default" without options.
func (s *StarlarkSuite) setVariants(vs []map[string]starlark.Value, check func(string, map[string]starlark.Value) error) error {
	if len(vs) == 0 {
		vs = []map[string]starlark.Value{{"name": starlark.String("default")}}
	}
	seen := map[string]int{}
	for i, v := range vs {
		where := fmt.Sprintf("VARIANTS[%d]", i)
		opts := map[string]starlark.Value{}
		name := ""
		for k, x := range v {
			if k == "name" {
				str, ok := x.(starlark.String)
				if !ok || str == "" {
					return fmt.Errorf("%s: 'name' must be a non-empty string, got %s", where, x.Type())
				}
				name = string(str)
				continue
			}
			opts[k] = x
		}
		if check != nil {
			if err := check(where, opts); err != nil {
				return err
			}
		}
		if name == "" {
			name = variantName(opts)
		}
		if j, dup := seen[name]; dup {
			return fmt.Errorf("%s: variant '%s' is also VARIANTS[%d]'s name (give each a distinct 'name')", where, name, j)
		}
		seen[name] = i
		jsonOpts := map[string]any{}
		d := starlark.NewDict(len(v) + 1)
		for k, x := range opts {
			jsonOpts[k] = jsonOf(x)
			_ = d.SetKey(starlark.String(k), x)
		}
		_ = d.SetKey(starlark.String("name"), starlark.String(name))
		d.Freeze()
		s.variants = append(s.variants, eval.Variant{Name: name, Options: jsonOpts})
		s.vdicts = append(s.vdicts, d)
		s.defaults = append(s.defaults, opts)
	}
	return nil
}

// variantName names a variant without a name: "provider/model" (either
// part alone when only one is set), then the other options as k=v, sorted.
func variantName(opts map[string]starlark.Value) string {
	var parts []string
	str := func(k string) string {
		if s, ok := opts[k].(starlark.String); ok {
			return string(s)
		}
		return ""
	}
	p, m := str("provider"), str("model")
	switch {
	case p != "" && m != "":
		parts = append(parts, p+"/"+m)
	case p != "" || m != "":
		parts = append(parts, p+m)
	}
	keys := make([]string, 0, len(opts))
	for k := range opts {
		if k != "provider" && k != "model" {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	for _, k := range keys {
		val := opts[k].String()
		if s, ok := opts[k].(starlark.String); ok {
			val = string(s)
		}
		if len(val) > 40 {
			val = val[:37] + "..."
		}
		parts = append(parts, k+"="+val)
	}
	if len(parts) == 0 {
		return "default"
	}
	return strings.Join(parts, ", ")
}

// jsonOf is v as a JSON value, or its Starlark text when it has none.
func jsonOf(v starlark.Value) any {
	x, err := vm.FromStarlark(v, "value")
	if err != nil {
		return v.String()
	}
	return x
}

// Cases implements Suite.
func (s *StarlarkSuite) Cases() []eval.Case { return s.cases }

// Variants implements Suite.
func (s *StarlarkSuite) Variants() []eval.Variant { return s.variants }

// Scorers implements Suite.
func (s *StarlarkSuite) Scorers() []string { return s.names }

// Run implements Suite: the task runs on a thread of its own, its model
// calls taking the variant's options and the job's session as defaults;
// the scorers run after it on the same thread without those defaults.
func (s *StarlarkSuite) Run(ctx context.Context, job eval.Job) (*eval.CaseResult, error) {
	thread := s.st.NewThread("eval " + job.SessionID)
	ctx = eval.WithJob(ctx, job.Repeat)
	restoreCtx := vm.WithContext(thread, ctx)
	defer restoreCtx()
	base := s.defaults[job.Variant]
	defaults := make(map[string]starlark.Value, len(base)+1)
	for k, v := range base {
		defaults[k] = v
	}
	if _, ok := defaults["session_id"]; !ok {
		defaults["session_id"] = starlark.String(job.SessionID)
	}
	restoreDefaults := vm.WithCallDefaults(thread, defaults)
	caseValue := s.values[job.Case]
	args := starlark.Tuple{caseValue}
	if s.withVar {
		args = append(args, s.vdicts[job.Variant])
	}
	start := time.Now()
	out, err := starlark.Call(thread, s.task, args, nil)
	latency := time.Since(start)
	restoreDefaults()
	res := &eval.CaseResult{LatencyMS: float64(latency.Microseconds()) / 1000, Scores: make(map[string]eval.Score, len(s.names)), CostKnown: true}
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		res.Error = err.Error()
	} else {
		res.Output = jsonOf(out)
	}
	for i, name := range s.names {
		if res.Error != "" {
			res.Scores[name] = eval.Score{Reason: "the task failed: " + res.Error}
			continue
		}
		v, err := starlark.Call(thread, s.scorers[i], starlark.Tuple{caseValue, out}, nil)
		if err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			return nil, fmt.Errorf("score_%s: %w", name, err)
		}
		sc, err := ParseScore("score_"+name, v)
		if err != nil {
			return nil, err
		}
		res.Scores[name] = sc
	}
	s.mu.Lock()
	if sc := s.calls[job.SessionID]; sc != nil {
		res.Calls, res.CostUSD, res.CostKnown = sc.n, sc.cost, sc.known
		res.SessionID = job.SessionID
		delete(s.calls, job.SessionID)
	}
	s.mu.Unlock()
	res.CachedCalls = eval.JobCached(ctx)
	return res, nil
}

// ParseScore reads what a scorer returned: a bool (pass or fail), a
// number in [0, 1] (passing from eval.PassMark), or a dict {score, reason,
// pass} whose score is a bool or such a number, reason a string and pass
// (optional) overrides the mark.
func ParseScore(fn string, v starlark.Value) (eval.Score, error) {
	want := "want a bool, a number in [0, 1] or {score, reason}"
	switch v := v.(type) {
	case starlark.Bool:
		if v {
			return eval.Score{Value: 1, Pass: true}, nil
		}
		return eval.Score{}, nil
	case starlark.Int, starlark.Float:
		f, _ := starlark.AsFloat(v)
		if f < 0 || f > 1 || f != f {
			return eval.Score{}, fmt.Errorf("%s returned %s, want a number in [0, 1]", fn, v.String())
		}
		return eval.Score{Value: f, Pass: f >= eval.PassMark}, nil
	case *starlark.Dict:
		var sc eval.Score
		scoreV, found, _ := v.Get(starlark.String("score"))
		if !found {
			return eval.Score{}, fmt.Errorf("%s returned a dict without 'score', %s", fn, want)
		}
		inner, err := ParseScore(fn+"'s score", scoreV)
		if err != nil {
			return eval.Score{}, err
		}
		sc = inner
		for _, kv := range v.Items() {
			k, _ := kv[0].(starlark.String)
			switch k {
			case "score":
			case "reason":
				r, ok := kv[1].(starlark.String)
				if !ok && kv[1] != starlark.None {
					return eval.Score{}, fmt.Errorf("%s: 'reason' must be a string, got %s", fn, kv[1].Type())
				}
				sc.Reason = string(r)
			case "pass":
				b, ok := kv[1].(starlark.Bool)
				if !ok {
					return eval.Score{}, fmt.Errorf("%s: 'pass' must be a bool, got %s", fn, kv[1].Type())
				}
				sc.Pass = bool(b)
			default:
				return eval.Score{}, fmt.Errorf("%s returned a dict with key %s (expected: pass, reason, score)", fn, kv[0].String())
			}
		}
		return sc, nil
	}
	return eval.Score{}, fmt.Errorf("%s returned %s, %s", fn, v.Type(), want)
}
