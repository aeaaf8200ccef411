package builtins_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/skein-dev/skein/builtins"
	"github.com/skein-dev/skein/llm/providers"
	"github.com/skein-dev/skein/vm"
)

// fakeStructured answers each protocol's path with the next of its
// replies (a text, in the protocol's whole-reply JSON) and records the
// request bodies.
type fakeStructured struct {
	mu      sync.Mutex
	replies []string
	bodies  []string
}

func (f *fakeStructured) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	f.mu.Lock()
	f.bodies = append(f.bodies, string(body))
	text := `"no reply queued"`
	if len(f.replies) > 0 {
		text, f.replies = f.replies[0], f.replies[1:]
	}
	f.mu.Unlock()
	q, _ := json.Marshal(text)
	w.Header().Set("Content-Type", "application/json")
	switch {
	case r.URL.Path == "/v1/chat/completions":
		io.WriteString(w, `{"model":"gpt-4.1","choices":[{"message":{"role":"assistant","content":`+string(q)+`},"finish_reason":"stop"}],"usage":{"prompt_tokens":1,"completion_tokens":1}}`)
	case r.URL.Path == "/v1/responses":
		io.WriteString(w, `{"id":"resp_1","object":"response","status":"completed","model":"gpt-4.1","output":[{"id":"msg_1","type":"message","role":"assistant","content":[{"type":"output_text","text":`+string(q)+`}]}],"usage":{"input_tokens":1,"output_tokens":1}}`)
	case r.URL.Path == "/v1/messages":
		io.WriteString(w, `{"id":"msg_1","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[{"type":"text","text":`+string(q)+`}],"stop_reason":"end_turn","usage":{"input_tokens":1,"output_tokens":1}}`)
	case strings.HasPrefix(r.URL.Path, "/v1beta/models/gemini-2.5-flash:generateContent"):
		io.WriteString(w, `{"candidates":[{"content":{"role":"model","parts":[{"text":`+string(q)+`}]},"finishReason":"STOP","index":0}],"usageMetadata":{"promptTokenCount":1,"candidatesTokenCount":1},"modelVersion":"gemini-2.5-flash"}`)
	default:
		w.WriteHeader(http.StatusNotFound)
		io.WriteString(w, `{"error":{"message":"unexpected `+r.URL.Path+`"}}`)
	}
}

// TestOutputSchemaProviders runs llm_call with output_schema against a
// loopback server of each protocol: the request carries the schema in the
// protocol's native form; a reply that violates it gets a repair turn
// quoting the violation and the repaired value is the result's output;
// a reply that stays invalid fails naming the violated path.
func TestOutputSchemaProviders(t *testing.T) {
	const (
		bad  = `{"verdict": "maybe", "confidence": 0.5}`
		good = `{"verdict": "bug", "confidence": 0.5}`
	)
	protocols := []struct {
		name, call, native string
	}{
		{"openai", `provider = "openai", base_url = base + "/v1", model = "gpt-4.1"`, `"response_format":{"type":"json_schema","json_schema":{"name":"output","schema":`},
		{"openai_responses", `provider = "openai_responses", base_url = base + "/v1", model = "gpt-4.1"`, `"text":{"format":{"type":"json_schema","name":"output","schema":`},
		{"anthropic", `provider = "anthropic", base_url = base, model = "claude-sonnet-4-5"`, `"output_config":{"format":{"type":"json_schema","schema":`},
		{"gemini", `provider = "gemini", model = "gemini-2.5-flash"`, `"responseMimeType":"application/json","responseJsonSchema":`},
	}
	for _, p := range protocols {
		t.Run(p.name, func(t *testing.T) {
			fake := &fakeStructured{replies: []string{bad, good, bad, bad, bad}}
			srv := httptest.NewServer(fake)
			defer srv.Close()
			env := map[string]string{"ANTHROPIC_API_KEY": "ant-test", "OPENAI_API_KEY": "oai-test", "GEMINI_API_KEY": "gem-test", "GEMINI_BASE_URL": srv.URL}
			runner := &vm.TestRunner{NewState: func(stdout io.Writer) (*vm.State, error) {
				return builtins.NewTestState(vm.Options{Stdout: stdout, LLM: providers.Default(func(k string) string { return env[k] })}, 1)
			}}
			res := runner.Run("output_test.star", []byte(`
S = {"type": "object", "required": ["verdict", "confidence"], "additionalProperties": False,
     "properties": {"verdict": {"enum": ["bug", "feature"]}, "confidence": {"type": "number"}}}

def test_output():
    base = "`+srv.URL+`"
    r = llm_call("Classify: the app crashes", `+p.call+`, output_schema = S, stream = False)
    assert.eq(r["output"], {"verdict": "bug", "confidence": 0.5})
    assert.fails(lambda: llm_call("Classify again", `+p.call+`, output_schema = S, output_retries = 1, stream = False),
        "llm_call: output_schema: the reply does not match the schema after 1 repair turn: output.verdict: value must be one of 'bug', 'feature'")
`), "test_output")
			if res.Status != vm.TestPass {
				t.Fatalf("%s %s %v", res.Status, res.Error, res.Failures)
			}
			if len(fake.bodies) != 4 {
				t.Fatalf("%d requests, want 4 (a reply, its repair, a reply, its repair)", len(fake.bodies))
			}
			for i, b := range fake.bodies {
				if !strings.Contains(b, p.native) {
					t.Errorf("request %d does not carry the schema as %s: %s", i+1, p.native, b)
				}
			}
			for _, i := range []int{1, 3} {
				if !strings.Contains(fake.bodies[i], `output.verdict: value must be one of 'bug', 'feature'`) || !strings.Contains(fake.bodies[i], `maybe`) {
					t.Errorf("repair request %d does not quote the violation after the bad reply: %s", i+1, fake.bodies[i])
				}
			}
		})
	}
}
