package builtins_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/skein-dev/skein/builtins"
	"github.com/skein-dev/skein/llm/openai"
	"github.com/skein-dev/skein/llm/providers"
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
		return builtins.NewTestState(vm.Options{Stdout: stdout, LLM: providers.Default(func(k string) string { return env[k] })}, 1)
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

// fakeAzure is an Azure OpenAI deployment "d" that records the
// api-version of every request ("deployment api-version") and calls the
// delegate tool when asked to.
type fakeAzure struct {
	mu   sync.Mutex
	seen []string
}

func (f *fakeAzure) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	deployment := strings.TrimSuffix(strings.TrimPrefix(r.URL.Path, "/openai/deployments/"), "/chat/completions")
	f.mu.Lock()
	f.seen = append(f.seen, deployment+" "+r.URL.Query().Get("api-version"))
	f.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	switch {
	case deployment != "d" || r.Header.Get("api-key") != "az-test":
		w.WriteHeader(http.StatusNotFound)
		io.WriteString(w, `{"error":{"code":"DeploymentNotFound","message":"no deployment `+deployment+`"}}`)
	case strings.Contains(string(body), `"role":"tool"`):
		io.WriteString(w, strings.Replace(chatReply, "from chat", "parent done", 1))
	case strings.Contains(string(body), "delegate please"):
		io.WriteString(w, `{"model":"m","choices":[{"message":{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"delegate","arguments":"{\"q\":\"sub task\"}"}}]},"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":1,"completion_tokens":1}}`)
	default:
		io.WriteString(w, chatReply)
	}
}

// TestAzureAPIVersion checks the api-version each Azure request carries:
// the api_version option of llm_call, agent_loop, a fallback entry and a
// workflow node, inherited by an agent_spawn child; else
// AZURE_OPENAI_API_VERSION; else the default.
func TestAzureAPIVersion(t *testing.T) {
	fake := &fakeAzure{}
	srv := httptest.NewServer(fake)
	defer srv.Close()
	env := map[string]string{"AZURE_OPENAI_API_KEY": "az-test", "AZURE_OPENAI_ENDPOINT": srv.URL, "AZURE_OPENAI_API_VERSION": "2024-06-01"}
	runner := &vm.TestRunner{NewState: func(stdout io.Writer) (*vm.State, error) {
		return builtins.NewTestState(vm.Options{Stdout: stdout, LLM: providers.Default(func(k string) string { return env[k] })}, 1)
	}}
	src := []byte(`
def delegate(q):
    """Ask a sub-agent.

    Args:
      q: what to ask.
    """
    return agent_spawn(q, carry = "reset")["text"]

def test_option_and_env():
    assert.eq(llm_call("hi", provider = "azure", model = "d", api_version = "2025-01-01-preview", stream = False)["text"], "from chat")
    assert.eq(llm_call("hi", provider = "azure", model = "d", stream = False)["text"], "from chat")
    r = llm_call("hi", provider = "azure", model = "gone", llm_retries = 0, stream = False,
                 fallback = [{"provider": "azure", "model": "d", "api_version": "2024-12-01-preview"}])
    assert.eq(r["text"], "from chat")
    r = agent_loop("delegate please", provider = "azure", model = "d", api_version = "2025-03-01-preview", tools = [delegate], stream = False)
    assert.eq(r["text"], "parent done")
    g = workflow_graph(name = "w", entry = "ask", nodes = {"ask": {"mode": "llm", "prompt": "{task}", "stream": False,
        "model_policy": {"provider": "azure", "model": "d", "api_version": "2023-05-15"}}}, edges = [])
    workflow_execute("hi", g)

def test_default():
    assert.eq(llm_call("hi", provider = "azure", model = "d", stream = False)["text"], "from chat")
`)
	if res := runner.Run("azure_test.star", src, "test_option_and_env"); res.Status != vm.TestPass {
		t.Fatalf("%s %s %v", res.Status, res.Error, res.Failures)
	}
	delete(env, "AZURE_OPENAI_API_VERSION")
	if res := runner.Run("azure_test.star", src, "test_default"); res.Status != vm.TestPass {
		t.Fatalf("%s %s %v", res.Status, res.Error, res.Failures)
	}
	want := []string{
		"d 2025-01-01-preview",                    // the option
		"d 2024-06-01",                            // AZURE_OPENAI_API_VERSION
		"gone 2024-06-01", "d 2024-12-01-preview", // a fallback entry's own
		"d 2025-03-01-preview", "d 2025-03-01-preview", "d 2025-03-01-preview", // parent, spawned child, parent
		"d 2023-05-15",                       // a workflow node's model_policy
		"d " + openai.DefaultAzureAPIVersion, // neither
	}
	if !slices.Equal(fake.seen, want) {
		t.Errorf("requests:\n got %q\nwant %q", fake.seen, want)
	}
}
