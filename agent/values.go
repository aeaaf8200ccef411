package agent

import (
	"fmt"
	"maps"
	"regexp"
	"sort"
	"sync"
	"time"

	"github.com/skein-dev/skein/llm"
	"github.com/skein-dev/skein/llm/openai"
)

// Values are options given as data, each checked against its table's
// row: what a script's keywords, a workflow node, an agent file or an
// HTTP request set. An option not given reads as its row's default.
type Values struct {
	table *Table
	m     map[string]any
}

// Empty returns Values of t with no option given.
func (t *Table) Empty() Values { return Values{table: t, m: map[string]any{}} }

// Parse checks every key of m against t: an unknown key (with a "did you
// mean" hint) or a value of the wrong type or out of range is an error
// without prefix. Keys are checked in sorted order, so the error does not
// depend on map order.
func (t *Table) Parse(m map[string]any) (Values, error) {
	v := t.Empty()
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if err := v.Set(k, m[k]); err != nil {
			return Values{}, err
		}
	}
	return v, nil
}

// Table returns the table the values are checked against.
func (v Values) Table() *Table { return v.table }

// Set checks x against the row of name and sets it (nil: given as None,
// reading as the default). A host value (KindCallable, KindHost) is
// stored as it is: the host checked it.
func (v Values) Set(name string, x any) error {
	r := v.table.Lookup(name)
	if r == nil {
		return UnknownKey("option key", name, v.table.Names())
	}
	if r.Data() {
		if err := r.Check(x); err != nil {
			return err
		}
	}
	v.m[name] = x
	return nil
}

// Has reports whether name was given (None counts as given).
func (v Values) Has(name string) bool {
	v.table.Row(name)
	_, ok := v.m[name]
	return ok
}

// Get returns the value of name and whether it was given and not None.
func (v Values) Get(name string) (any, bool) {
	v.table.Row(name)
	x, ok := v.m[name]
	return x, ok && x != nil
}

// Given returns a copy of the options given (not None), by name.
func (v Values) Given() map[string]any {
	out := make(map[string]any, len(v.m))
	for k, x := range v.m {
		if x != nil {
			out[k] = x
		}
	}
	return out
}

// Clone returns a copy that can be changed without changing v.
func (v Values) Clone() Values { return Values{table: v.table, m: maps.Clone(v.m)} }

// Int returns a KindInt option, or its default.
func (v Values) Int(name string) int {
	if x, ok := v.Get(name); ok {
		n, _ := asInt(x)
		return int(n)
	}
	d, _ := v.table.Row(name).Default.(int)
	return d
}

// Float returns a KindFloat option, or its default; nil when neither.
func (v Values) Float(name string) *float64 {
	if x, ok := v.Get(name); ok {
		f, _ := asFloat(x)
		return &f
	}
	if d, ok := v.table.Row(name).Default.(float64); ok {
		return &d
	}
	return nil
}

// Seconds returns a KindSeconds option as a duration, or its default.
func (v Values) Seconds(name string) time.Duration {
	if x, ok := v.Get(name); ok {
		f, _ := asFloat(x)
		return time.Duration(f * float64(time.Second))
	}
	d, _ := v.table.Row(name).Default.(time.Duration)
	return d
}

// Bool returns a KindBool option, or its default.
func (v Values) Bool(name string) bool {
	if x, ok := v.Get(name); ok {
		b, _ := x.(bool)
		return b
	}
	d, _ := v.table.Row(name).Default.(bool)
	return d
}

// String returns a KindString or KindChoice option, or its default.
func (v Values) String(name string) string {
	if x, ok := v.Get(name); ok {
		s, _ := x.(string)
		return s
	}
	d, _ := v.table.Row(name).Default.(string)
	return d
}

// apiVersionPattern is what an api-version may hold: the characters a
// URL query value carries unescaped ("2024-10-21", "2025-01-01-preview").
var apiVersionPattern = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9._~-]+$`) })

// APIVersion reads the api_version option of v ("" when not given); a
// value a query cannot carry as it is is an error.
func (v Values) APIVersion() (string, error) {
	x, given := v.Get("api_version")
	s, _ := x.(string)
	if given && !apiVersionPattern().MatchString(s) {
		return "", fmt.Errorf("option 'api_version': got %q, want a version such as '%s' (letters, digits, '-', '.', '_', '~')", s, openai.DefaultAzureAPIVersion)
	}
	return s, nil
}

// Targets returns the provider chain the options name: the primary
// (provider, model, base_url, api_version) then each fallback entry.
func (v Values) Targets() ([]llm.TargetSpec, error) {
	primary := llm.TargetSpec{Provider: v.String("provider"), Model: v.String("model"), BaseURL: v.String("base_url")}
	var err error
	if primary.APIVersion, err = v.APIVersion(); err != nil {
		return nil, err
	}
	out := []llm.TargetSpec{primary}
	x, _ := v.Get("fallback")
	list, _ := x.([]any)
	for i, e := range list {
		f, err := FallbackOptions().Parse(e.(map[string]any))
		if err != nil {
			return nil, fmt.Errorf("fallback[%d]: %w", i, err)
		}
		t := llm.TargetSpec{Provider: f.String("provider"), Model: f.String("model"), BaseURL: f.String("base_url")}
		if t.APIVersion, err = f.APIVersion(); err != nil {
			return nil, fmt.Errorf("fallback[%d]: %w", i, err)
		}
		if t.Provider == "" && t.Model == "" {
			return nil, fmt.Errorf("fallback[%d] needs a provider or a model", i)
		}
		out = append(out, t)
	}
	return out, nil
}

// Thinking reads the thinking option: {budget_tokens: N} and/or
// {effort: "low"|"medium"|"high"}; nil when not given.
func (v Values) Thinking() (*llm.Thinking, error) {
	x, ok := v.Get("thinking")
	if !ok {
		return nil, nil
	}
	o, err := ThinkingOptions().Parse(x.(map[string]any))
	if err != nil {
		return nil, fmt.Errorf("thinking: %w", err)
	}
	t := llm.Thinking{BudgetTokens: o.Int("budget_tokens"), Effort: o.String("effort")}
	if t.BudgetTokens == 0 && t.Effort == "" {
		return nil, fmt.Errorf("option 'thinking' needs budget_tokens or effort")
	}
	return &t, nil
}

// Output reads output_schema (compiled now, so a mistake in it fails
// before any call) and output_retries; nil without output_schema.
func (v Values) Output() (*Output, error) {
	x, ok := v.Get("output_schema")
	if !ok {
		return nil, nil
	}
	retries := v.Int("output_retries")
	if retries == 0 {
		retries = -1 // an option's 0 is none; Output's 0 is the default
	}
	out, err := NewOutput(x.(map[string]any), retries)
	if err != nil {
		return nil, fmt.Errorf("option 'output_schema': %w", err)
	}
	return out, nil
}

// Configure sets the fields of cfg the options decide: the request
// (model, temperature, max_tokens, stop, stream, thinking, cache), the
// structured output (output_schema, output_retries), the
// retry policy and the timeout and, for agent_loop's options, the loop's
// limits (max_iterations, persistent, max_nudges, tool_errors,
// max_cost_usd, max_turns when given). The provider chain (Targets),
// tools, compaction, callbacks and the session are the host's.
func (v Values) Configure(cfg *Config) error {
	cfg.Request.Model = v.String("model")
	cfg.Request.Temperature = v.Float("temperature")
	cfg.Request.MaxTokens = v.Int("max_tokens")
	cfg.Request.Stream = v.Bool("stream")
	cfg.Request.NoCache = v.String("cache") == "none"
	if x, ok := v.Get("stop"); ok {
		if s, isStr := x.(string); isStr {
			cfg.Request.Stop = []string{s}
		} else {
			cfg.Request.Stop, _ = Strings(x)
		}
	}
	t, err := v.Thinking()
	if err != nil {
		return err
	}
	cfg.Request.Thinking = t
	if cfg.Output, err = v.Output(); err != nil {
		return err
	}
	cfg.Retry = llm.RetryPolicy{Retries: v.Int("llm_retries"), Backoff: time.Duration(v.Int("llm_backoff_ms")) * time.Millisecond}
	cfg.Timeout = v.Seconds("timeout_s")
	if v.table.Lookup("max_iterations") == nil {
		return nil
	}
	cfg.MaxIterations, cfg.Persistent = v.Int("max_iterations"), v.Bool("persistent")
	cfg.MaxNudges = v.Int("max_nudges")
	if cfg.MaxNudges == 0 {
		cfg.MaxNudges = -1 // an option's 0 is none; Config's 0 is the default
	}
	cfg.ToolErrors = ToolErrors(v.String("tool_errors"))
	if c := v.Float("max_cost_usd"); c != nil {
		cfg.Budgets = append(cfg.Budgets, &llm.Budget{MaxUSD: *c})
	}
	if _, ok := v.Get("max_turns"); ok {
		cfg.MaxTurns = v.Int("max_turns")
	}
	return nil
}
