package llm

import (
	"context"
	"errors"
	"fmt"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestResolveName(t *testing.T) {
	env := func(kv ...string) func(string) string {
		m := map[string]string{}
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return func(k string) string { return m[k] }
	}
	tests := []struct {
		name              string
		def, explicit, md string
		getenv            func(string) string
		want, err         string
	}{
		{"explicit wins", "anthropic", "mock", "gpt-4o", env(), "mock", ""},
		{"vm default", "ollama", "", "claude-3", env(), "ollama", ""},
		{"claude model", "", "", "claude-sonnet-4-5", env(), "anthropic", ""},
		{"gpt model", "", "", "gpt-4.1-mini", env(), "openai", ""},
		{"o-series", "", "", "o3-mini", env(), "openai", ""},
		{"o1", "", "", "o1", env(), "openai", ""},
		{"chatgpt", "", "", "chatgpt-4o-latest", env(), "openai", ""},
		{"not o-series", "", "", "olmo-2", env("OPENAI_API_KEY", "k"), "openai", ""},
		{"anthropic key first", "", "", "llama3", env("ANTHROPIC_API_KEY", "a", "OPENAI_API_KEY", "o"), "anthropic", ""},
		{"openai key", "", "", "", env("OPENAI_API_KEY", "o"), "openai", ""},
		{"nothing", "", "", "llama3", env(), "", "no provider configured"},
	}
	for _, tc := range tests {
		s := &Settings{Provider: tc.def, Getenv: tc.getenv}
		got, err := s.ResolveName(tc.explicit, tc.md)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) || !strings.Contains(err.Error(), `provider="mock"`) {
				t.Errorf("%s: err = %v", tc.name, err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("%s: got %q, %v; want %q", tc.name, got, err, tc.want)
		}
	}
}

type flaky struct {
	name  string
	errs  []error
	calls int
}

func (f *flaky) Name() string { return f.name }

func (f *flaky) Complete(ctx context.Context, req *Request) (*Response, error) {
	f.calls++
	if len(f.errs) > 0 {
		err := f.errs[0]
		f.errs = f.errs[1:]
		return nil, err
	}
	return &Response{Text: "ok from " + f.name}, nil
}

func TestRetryDelays(t *testing.T) {
	var waits []time.Duration
	p := RetryPolicy{Retries: 4, Backoff: 500 * time.Millisecond, Jitter: func() float64 { return 0 }, Sleep: func(ctx context.Context, d time.Duration) error {
		waits = append(waits, d)
		return nil
	}}
	f := &flaky{name: "p", errs: []error{
		&Error{Category: RateLimit}, &Error{Category: Overloaded},
		&Error{Category: RateLimit, RetryAfter: 3 * time.Second}, &Error{Category: Network, RetryAfter: 5 * time.Minute},
	}}
	resp, err := p.Call(context.Background(), func() (*Response, error) { return f.Complete(context.Background(), &Request{}) })
	if err != nil || resp.Text != "ok from p" {
		t.Fatal(resp, err)
	}
	want := []time.Duration{500 * time.Millisecond, time.Second, 3 * time.Second, MaxRetryDelay}
	if len(waits) != len(want) {
		t.Fatalf("waits = %v", waits)
	}
	for i := range want {
		if waits[i] != want[i] {
			t.Errorf("wait %d = %v, want %v", i, waits[i], want[i])
		}
	}
}

// TestRetryJitter: waits spread over [d/2, d] for the backoff and
// [r, 1.1r] for a retry-after, so parallel callers do not retry together.
func TestRetryJitter(t *testing.T) {
	for _, tc := range []struct {
		jitter  float64
		err     *Error
		attempt int
		want    time.Duration
	}{
		{0, nil, 1, 500 * time.Millisecond},
		{0.5, nil, 1, 375 * time.Millisecond},
		{1, nil, 1, 250 * time.Millisecond},
		{1, nil, 2, 500 * time.Millisecond},
		{0, &Error{RetryAfter: 2 * time.Second}, 1, 2 * time.Second},
		{1, &Error{RetryAfter: 2 * time.Second}, 1, 2200 * time.Millisecond},
		{1, &Error{RetryAfter: time.Hour}, 1, MaxRetryDelay},
	} {
		p := RetryPolicy{Backoff: 500 * time.Millisecond, Jitter: func() float64 { return tc.jitter }}
		if got := p.Delay(tc.attempt, tc.err); got != tc.want {
			t.Errorf("Delay(%d, %+v) with jitter %v = %v, want %v", tc.attempt, tc.err, tc.jitter, got, tc.want)
		}
	}
	// the default jitter spreads waits
	p := RetryPolicy{Backoff: time.Second}
	seen := map[time.Duration]bool{}
	for range 20 {
		d := p.Delay(1, nil)
		if d < 500*time.Millisecond || d > time.Second {
			t.Fatalf("Delay = %v, want between 500ms and 1s", d)
		}
		seen[d] = true
	}
	if len(seen) < 2 {
		t.Error("20 waits were all equal: no jitter")
	}
}

func TestRetryStopsOnTerminalAndNoRetry(t *testing.T) {
	p := RetryPolicy{Retries: 3, Sleep: func(context.Context, time.Duration) error { return nil }}
	for _, e := range []*Error{{Category: Auth}, {Category: ServerError, NoRetry: true}} {
		f := &flaky{errs: []error{e, e}}
		_, err := p.Call(context.Background(), func() (*Response, error) { return f.Complete(context.Background(), &Request{}) })
		if err == nil || f.calls != 1 {
			t.Errorf("%+v: calls %d err %v", e, f.calls, err)
		}
	}
}

func TestRetrySleepIsCancellable(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	p := RetryPolicy{Retries: 3, Backoff: time.Hour}
	f := &flaky{errs: []error{&Error{Category: RateLimit}}}
	go func() { time.Sleep(20 * time.Millisecond); cancel() }()
	start := time.Now()
	_, err := p.Call(ctx, func() (*Response, error) { return f.Complete(ctx, &Request{}) })
	if !errors.Is(err, context.Canceled) || time.Since(start) > 5*time.Second {
		t.Fatalf("err = %v after %v", err, time.Since(start))
	}
}

func TestFallback(t *testing.T) {
	noSleep := RetryPolicy{Retries: 1, Sleep: func(context.Context, time.Duration) error { return nil }}
	a := &flaky{name: "a", errs: []error{&Error{Provider: "a", Category: Overloaded, Message: "busy"}, &Error{Provider: "a", Category: Overloaded, Message: "busy"}}}
	b := &flaky{name: "b"}
	resp, err := Fallback(context.Background(), []Target{{Provider: a}, {Provider: b, Model: "m2"}}, noSleep, &Request{Model: "m1"})
	if err != nil || resp.Provider != "b" || resp.Model != "m2" || a.calls != 2 {
		t.Fatalf("resp %+v err %v a.calls %d", resp, err, a.calls)
	}
	// context_length is returned at once: another provider would fail too
	c := &flaky{name: "c", errs: []error{&Error{Provider: "c", Category: ContextLength}}}
	d := &flaky{name: "d"}
	_, err = Fallback(context.Background(), []Target{{Provider: c}, {Provider: d}}, noSleep, &Request{})
	if e, ok := AsError(err); !ok || e.Category != ContextLength || d.calls != 0 {
		t.Fatalf("err %v d.calls %d", err, d.calls)
	}
	// everything failing names every attempt and unwraps to the last
	e1 := &flaky{name: "e1", errs: []error{&Error{Provider: "e1", Category: Auth, Message: "no"}}}
	e2 := &flaky{name: "e2", errs: []error{&Error{Provider: "e2", Category: InvalidRequest, Message: "bad"}}}
	_, err = Fallback(context.Background(), []Target{{Provider: e1}, {Provider: e2}}, noSleep, &Request{})
	if err == nil || err.Error() != "every provider failed: e1: auth: no; then e2: invalid_request: bad" {
		t.Fatalf("err = %v", err)
	}
	if e, ok := AsError(err); !ok || e.Provider != "e2" {
		t.Fatalf("does not unwrap to the last: %v", err)
	}
}

func TestBuildFromPresets(t *testing.T) {
	env := map[string]string{"GROQ_API_KEY": "gk", "GOOGLE_API_KEY": "goog", "SKEIN_OLLAMA_BASE_URL": "http://gpu:11434/v1", "MYSERVER_API_KEY": "mk",
		"AZURE_OPENAI_API_KEY": "ak", "AZURE_OPENAI_API_VERSION": "2024-06-01"}
	var got ProviderConfig
	s := &Settings{Getenv: func(k string) string { return env[k] }, Factories: map[string]Factory{}}
	for _, proto := range []string{ProtocolOpenAI, ProtocolOpenAIResponses, ProtocolAnthropic, ProtocolGemini, ProtocolAzure} {
		s.Factories[proto] = func(pc ProviderConfig) (Provider, error) { got = pc; return &flaky{name: pc.Name}, nil }
	}
	tests := []struct {
		name, base, apiVersion string
		want                   ProviderConfig
		err                    string
	}{
		{name: "groq", want: ProviderConfig{Name: "groq", Protocol: "openai", BaseURL: "https://api.groq.com/openai/v1", APIKey: "gk"}},
		{name: "groq", base: "http://proxy/v1", want: ProviderConfig{Name: "groq", Protocol: "openai", BaseURL: "http://proxy/v1", APIKey: "gk"}},
		{name: "gemini", want: ProviderConfig{Name: "gemini", Protocol: "gemini", BaseURL: "https://generativelanguage.googleapis.com", APIKey: "goog"}},
		{name: "ollama", want: ProviderConfig{Name: "ollama", Protocol: "openai", BaseURL: "http://gpu:11434/v1"}},
		{name: "vllm", want: ProviderConfig{Name: "vllm", Protocol: "openai", BaseURL: "http://localhost:8000/v1"}},
		{name: "myserver", base: "http://box/v1", want: ProviderConfig{Name: "myserver", Protocol: "openai", BaseURL: "http://box/v1", APIKey: "mk"}},
		{name: "azure", base: "http://az", want: ProviderConfig{Name: "azure", Protocol: "azure", BaseURL: "http://az", APIKey: "ak", APIVersion: "2024-06-01"}},
		{name: "azure", base: "http://az", apiVersion: "2025-01-01-preview", want: ProviderConfig{Name: "azure", Protocol: "azure", BaseURL: "http://az", APIKey: "ak", APIVersion: "2025-01-01-preview"}},
		{name: "groq", apiVersion: "2024-10-21", err: "option 'api_version' is for Azure OpenAI only, not provider 'groq'"},
		{name: "openai_responses", err: "provider openai_responses: OPENAI_API_KEY is not set"},
		{name: "azure", err: "provider azure needs a base_url (or AZURE_OPENAI_ENDPOINT)"},
		{name: "openai_compatible", err: `provider "openai_compatible" needs a base_url`},
		{name: "myserver", err: `unknown provider 'myserver'`},
	}
	for _, tt := range tests {
		got = ProviderConfig{}
		_, err := s.Build(tt.name, tt.base, tt.apiVersion)
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("Build(%q, %q, %q): got %v, want %q", tt.name, tt.base, tt.apiVersion, err, tt.err)
			}
			continue
		}
		got.Getenv, got.HTTPClient = nil, nil
		if err != nil || !reflect.DeepEqual(got, tt.want) {
			t.Errorf("Build(%q, %q, %q): got %+v, %v; want %+v", tt.name, tt.base, tt.apiVersion, got, err, tt.want)
		}
	}
}

// TestPresetsDocumented keeps the table of docs/providers.md in step with
// Presets.
func TestPresetsDocumented(t *testing.T) {
	data, err := os.ReadFile("../docs/providers.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(data)
	begin, end := strings.Index(doc, "<!-- presets:begin -->\n"), strings.Index(doc, "<!-- presets:end -->")
	if begin < 0 || end < begin {
		t.Fatal("docs/providers.md has no presets table markers")
	}
	var b strings.Builder
	b.WriteString("| name | protocol | default base URL | base URL variable | key variables | key required |\n|---|---|---|---|---|---|\n")
	code := func(s string) string {
		if s == "" {
			return ""
		}
		return "`" + s + "`"
	}
	for _, p := range Presets {
		base := code(p.BaseURL)
		if base == "" {
			base = "(none: the resource endpoint)"
		}
		var keys []string
		for _, k := range p.KeyEnv {
			keys = append(keys, code(k))
		}
		req := "no"
		if p.KeyRequired {
			req = "yes"
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s | %s | %s |\n", p.Name, p.Protocol, base, code(p.BaseURLEnv), strings.Join(keys, ", "), req)
	}
	if got := doc[begin+len("<!-- presets:begin -->\n") : end]; got != b.String() {
		t.Errorf("docs/providers.md presets table is out of date; want:\n%s", b.String())
	}
}
