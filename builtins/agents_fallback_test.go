package builtins_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/skein-dev/skein/builtins"
	"github.com/skein-dev/skein/llm/providers"
	"github.com/skein-dev/skein/vm"
)

// TestAgentFallbackChainOverHTTP runs a bound agent whose model is an
// OpenAI server and whose fallback_chain names an Anthropic one, both
// loopback fakes speaking their wire formats: a 500 from the first is
// answered by the second (a fallback event, the reply's model the
// fallback's); a 401 is not (the loop fails with the auth error).
func TestAgentFallbackChainOverHTTP(t *testing.T) {
	var status atomic.Int32
	status.Store(http.StatusInternalServerError)
	openaiSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(int(status.Load()))
		io.WriteString(w, `{"error":{"message":"the primary is down","type":"server_error"}}`)
	}))
	defer openaiSrv.Close()
	var anthropicCalls atomic.Int32
	anthropicSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		anthropicCalls.Add(1)
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"id":"msg_1","type":"message","role":"assistant","model":"claude-haiku-4-5","content":[{"type":"text","text":"from the fallback"}],"stop_reason":"end_turn","usage":{"input_tokens":10,"output_tokens":5}}`)
	}))
	defer anthropicSrv.Close()
	env := map[string]string{"OPENAI_API_KEY": "oai-test", "OPENAI_BASE_URL": openaiSrv.URL, "ANTHROPIC_API_KEY": "ant-test", "ANTHROPIC_BASE_URL": anthropicSrv.URL}
	runner := &vm.TestRunner{NewState: func(stdout io.Writer) (*vm.State, error) {
		return builtins.NewTestState(vm.Options{Stdout: stdout, LLM: providers.Default(func(k string) string { return env[k] })}, 1)
	}}
	res := runner.Run("fallback_test.star", []byte(`
def test_fallback():
    a = agent("chain", model = "openai/gpt-4o-mini", fallback_chain = ["anthropic/claude-haiku-4-5"], llm_retries = 0, stream = False)
    s = agent_session_open("f", agent = a)
    r = agent_loop("hi", session_id = s)
    assert.eq(r["text"], "from the fallback")
    assert.eq(r["messages"][-1]["model"], "claude-haiku-4-5")
    fb = [e for e in agent_session_snapshot(s)["events"] if e["type"] == "fallback"]
    assert.eq([(e["from"], e["to"], e["reason"]) for e in fb], [("openai/gpt-4o-mini", "anthropic/claude-haiku-4-5", "server_error")])

`), "test_fallback")
	if res.Status != vm.TestPass {
		t.Fatalf("%s %s %v", res.Status, res.Error, res.Failures)
	}
	if anthropicCalls.Load() != 1 {
		t.Errorf("anthropic calls: %d", anthropicCalls.Load())
	}
	status.Store(http.StatusUnauthorized)
	res = runner.Run("fallback_test.star", []byte(`
def test_no_fallback_on_auth():
    a = agent("chain", model = "openai/gpt-4o-mini", fallback_chain = ["anthropic/claude-haiku-4-5"], llm_retries = 0, stream = False)
    s = agent_session_open("g", agent = a)
    assert.fails(lambda: agent_loop("hi", session_id = s), "agent_loop: openai: auth: ")
    assert.eq([e for e in agent_session_snapshot(s)["events"] if e["type"] == "fallback"], [])
`), "test_no_fallback_on_auth")
	if res.Status != vm.TestPass {
		t.Fatalf("auth: %s %s %v", res.Status, res.Error, res.Failures)
	}
	if anthropicCalls.Load() != 1 {
		t.Errorf("anthropic was called after an auth error: %d calls", anthropicCalls.Load())
	}
}
