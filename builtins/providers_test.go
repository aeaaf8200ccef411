package builtins_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/skein-dev/skein/builtins"
	"github.com/skein-dev/skein/vm"
)

// fakeProviders answers each protocol's path with one canned reply and
// records the requests.
type fakeProviders struct {
	mu     sync.Mutex
	bodies map[string][]string // path -> request bodies
}

const (
	anthropicReply = `{"id":"msg_1","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[{"type":"redacted_thinking","data":"EmwKAhgBEgy3va3p"},{"type":"text","text":"from anthropic"}],"stop_reason":"end_turn","usage":{"input_tokens":10,"cache_read_input_tokens":90,"output_tokens":5}}`
	responsesReply = `{"id":"resp_1","object":"response","status":"completed","model":"o4-mini","output":[{"id":"msg_1","type":"message","role":"assistant","content":[{"type":"output_text","text":"from responses"}]}],"usage":{"input_tokens":3,"output_tokens":4}}`
	geminiReply    = `{"candidates":[{"content":{"role":"model","parts":[{"text":"from gemini"}]},"finishReason":"STOP","index":0}],"usageMetadata":{"promptTokenCount":2,"candidatesTokenCount":3,"thoughtsTokenCount":4},"modelVersion":"gemini-2.5-flash"}`
	chatReply      = `{"model":"m","choices":[{"message":{"role":"assistant","content":"from chat"},"finish_reason":"stop"}],"usage":{"prompt_tokens":1,"completion_tokens":1}}`
)

func (f *fakeProviders) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	f.mu.Lock()
	f.bodies[r.URL.Path] = append(f.bodies[r.URL.Path], string(body))
	f.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	switch {
	case r.URL.Path == "/v1/messages" && r.Header.Get("x-api-key") == "ant-test":
		io.WriteString(w, anthropicReply)
	case r.URL.Path == "/v1/responses" && r.Header.Get("Authorization") == "Bearer oai-test":
		io.WriteString(w, responsesReply)
	case strings.HasPrefix(r.URL.Path, "/v1beta/models/gemini-2.5-flash:generateContent") && r.Header.Get("x-goog-api-key") == "gem-test":
		io.WriteString(w, geminiReply)
	case r.URL.Path == "/openai/deployments/my-deploy/chat/completions" && r.Header.Get("api-key") == "az-test":
		io.WriteString(w, chatReply)
	case r.URL.Path == "/v1/chat/completions" && r.Header.Get("Authorization") == "Bearer groq-test":
		io.WriteString(w, chatReply)
	default:
		w.WriteHeader(http.StatusNotFound)
		io.WriteString(w, `{"error":{"message":"unexpected `+r.URL.Path+`"}}`)
	}
}

// TestProvidersByName runs llm_call and agent_loop against every protocol
// by provider name, through the registry the CLI uses: keys from the
// environment, base URLs from base_url or the environment, the thinking
// and cache options, and redacted thinking kept in a session and sent
// back.
func TestProvidersByName(t *testing.T) {
	fake := &fakeProviders{bodies: map[string][]string{}}
	srv := httptest.NewServer(fake)
	defer srv.Close()
	env := map[string]string{
		"ANTHROPIC_API_KEY": "ant-test", "OPENAI_API_KEY": "oai-test", "GEMINI_API_KEY": "gem-test",
		"AZURE_OPENAI_API_KEY": "az-test", "AZURE_OPENAI_ENDPOINT": srv.URL, "GROQ_API_KEY": "groq-test",
		"GEMINI_BASE_URL": srv.URL,
	}
	runner := &vm.TestRunner{NewState: func(stdout io.Writer) (*vm.State, error) {
		return builtins.NewTestState(vm.Options{Stdout: stdout, LLM: builtins.DefaultLLM(func(k string) string { return env[k] })}, 1)
	}}
	res := runner.Run("providers_test.star", []byte(`
def test_providers():
    run("`+srv.URL+`")

def run(base):
    r = agent_loop("hi", provider = "anthropic", base_url = base, model = "claude-sonnet-4-5", session_id = "s", thinking = {"budget_tokens": 2000}, stream = False)
    assert.eq(r["text"], "from anthropic")
    assert.eq(r["llm"]["input_tokens"], 100)
    msgs = agent_session_snapshot("s")["messages"]
    assert.eq(msgs[1]["content"][0], {"type": "redacted_thinking", "data": "EmwKAhgBEgy3va3p"})
    agent_loop("again", provider = "anthropic", base_url = base, model = "claude-sonnet-4-5", session_id = "s", cache = "none", stream = False)
    assert.eq(llm_call("hi", provider = "openai_responses", base_url = base + "/v1", model = "o4-mini", thinking = {"effort": "low"}, stream = False)["text"], "from responses")
    r = llm_call("hi", provider = "gemini", model = "gemini-2.5-flash", stream = False)
    assert.eq((r["text"], r["usage"]["output_tokens"], r["usage"]["reasoning_tokens"]), ("from gemini", 7, 4))
    assert.eq(llm_call("hi", provider = "azure", model = "my-deploy", stream = False)["text"], "from chat")
    assert.eq(llm_call("hi", provider = "groq", base_url = base + "/v1", model = "llama-3.3-70b", stream = False)["text"], "from chat")
    assert.fails(lambda: llm_call("hi", provider = "anthropic", thinking = {"effort": "max"}), "llm_call: thinking: unknown effort 'max' \\(expected one of: high, low, medium\\)")
    assert.fails(lambda: llm_call("hi", provider = "anthropic", thinking = {}), "llm_call: option 'thinking' needs budget_tokens or effort")
    assert.fails(lambda: llm_call("hi", provider = "anthropic", thinking = 5), "llm_call: option 'thinking': got int, want dict")
    assert.fails(lambda: llm_call("hi", provider = "anthropic", cache = "always"), "llm_call: unknown cache 'always' \\(expected one of: auto, none\\)")
`), "test_providers")
	if res.Status != vm.TestPass {
		t.Fatalf("%s %s %v", res.Status, res.Error, res.Failures)
	}
	msgs := fake.bodies["/v1/messages"]
	if len(msgs) != 2 {
		t.Fatalf("anthropic requests: %q", msgs)
	}
	if !strings.Contains(msgs[0], `"thinking":{"type":"enabled","budget_tokens":2000}`) || !strings.Contains(msgs[0], `"cache_control":{"type":"ephemeral"}`) {
		t.Errorf("first anthropic request: %s", msgs[0])
	}
	if !strings.Contains(msgs[1], `{"type":"redacted_thinking","data":"EmwKAhgBEgy3va3p"}`) || strings.Contains(msgs[1], "cache_control") {
		t.Errorf("second anthropic request: %s", msgs[1])
	}
	if r := fake.bodies["/v1/responses"]; len(r) != 1 || !strings.Contains(r[0], `"reasoning":{"effort":"low","summary":"auto"}`) {
		t.Errorf("responses request: %q", r)
	}
}
