package main

import (
	"bytes"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/skein-dev/skein/telemetry/telemetrytest"
)

// traceScript is a workflow whose agent stage calls a tool and a tool
// that spawns a sub-agent; the second tool call fails.
const traceScript = `
def lookup(city):
    """Weather in a city."""
    return "sunny in " + city

def delegate(task):
    """Hand a task to a sub-agent."""
    return agent_spawn(task, carry = "reset")["visible_text"]

def broken():
    """Always fails."""
    fail("the tool broke")

g = workflow_graph(name = "trip", entry = "plan", nodes = {
    "plan": {"mode": "agent", "prompt": "Plan a day in {task}.", "tools": [lookup, delegate, broken],
             "model_policy": {"provider": "mock", "session_id": "plan-session"}},
})
llm_mock(tool_calls = [{"name": "lookup", "arguments": {"city": "Lisbon"}},
                       {"name": "delegate", "arguments": {"task": "count to two"}},
                       {"name": "broken", "arguments": {}}], input_tokens = 11, output_tokens = 7)
llm_mock(text = "one, two", model = "child-model")
llm_mock(text = "Walk to Belem.", input_tokens = 40, output_tokens = 5)
r = workflow_execute("Lisbon", g)
print(r["status"])
`

// runTraced runs script with skein run in this process, with the
// environment set by env, and returns its exit code and output.
func runTraced(t *testing.T, script string, env map[string]string) (int, string, string) {
	t.Helper()
	for _, k := range []string{"OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_SDK_DISABLED",
		"OTEL_TRACES_EXPORTER", "OTEL_SERVICE_NAME", "OTEL_RESOURCE_ATTRIBUTES", "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "OTEL_TRACES_SAMPLER"} {
		t.Setenv(k, "")
		os.Unsetenv(k)
	}
	for k, v := range env {
		t.Setenv(k, v)
	}
	dir := t.TempDir()
	file := filepath.Join(dir, "trip.star")
	if err := os.WriteFile(file, []byte(script), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("SKEIN_STORE", "memory")
	var out, errb bytes.Buffer
	code := skein([]string{"run", file}, stdio{in: strings.NewReader(""), out: &out, err: &errb})
	return code, out.String(), errb.String()
}

// TestTracesExported runs a workflow with OTEL_EXPORTER_OTLP_ENDPOINT set
// to a loopback receiver that decodes the OTLP protobuf: one trace whose
// span tree mirrors the work, with the GenAI attributes.
func TestTracesExported(t *testing.T) {
	rcv := telemetrytest.NewReceiver()
	defer rcv.Close()
	code, out, errs := runTraced(t, traceScript, map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": rcv.URL, "OTEL_SERVICE_NAME": "trip-planner",
		"OTEL_RESOURCE_ATTRIBUTES": "deployment.environment=test"})
	if code != 0 || out != "completed\n" {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, out, errs)
	}
	if err := rcv.Err(); err != nil {
		t.Fatal(err)
	}
	spans := rcv.Spans() // all exported before skein run returned: flushed at exit
	want := `invoke_workflow trip
  stage plan
    invoke_agent
      chat
      execute_tool lookup
      execute_tool delegate
        invoke_agent
          chat
      execute_tool broken
      chat
`
	if got := telemetrytest.Tree(spans); got != want {
		t.Fatalf("span tree:\n%s\nwant:\n%s", got, want)
	}
	trace := spans[0].TraceID
	byName := map[string][]telemetrytest.Span{}
	for _, s := range spans {
		if s.TraceID != trace {
			t.Errorf("span %s is in trace %s, not %s", s.Name, s.TraceID, trace)
		}
		if s.Resource["service.name"] != "trip-planner" || s.Resource["deployment.environment"] != "test" {
			t.Errorf("span %s: resource %v", s.Name, s.Resource)
		}
		byName[s.Name] = append(byName[s.Name], s)
	}
	check := func(s telemetrytest.Span, key string, want any) {
		t.Helper()
		if got := s.Attrs[key]; !equalAttr(got, want) {
			t.Errorf("span %s: %s = %#v, want %#v", s.Name, key, got, want)
		}
	}
	wf := byName["invoke_workflow trip"][0]
	check(wf, "gen_ai.operation.name", "invoke_workflow")
	check(wf, "skein.workflow.name", "trip")
	stage := byName["stage plan"][0]
	check(stage, "skein.workflow.stage", "plan")
	check(stage, "gen_ai.conversation.id", "plan-session")
	agents := byName["invoke_agent"]
	check(agents[0], "gen_ai.operation.name", "invoke_agent")
	check(agents[0], "gen_ai.conversation.id", "plan-session")
	check(agents[0], "gen_ai.provider.name", "mock")
	child := agents[1].Attrs["gen_ai.conversation.id"]
	if child == "plan-session" || child == nil {
		t.Errorf("the sub-agent's conversation id is %v", child)
	}
	chats := byName["chat"]
	first, sub, last := chats[0], chats[1], chats[2]
	for _, c := range chats {
		check(c, "gen_ai.operation.name", "chat")
		check(c, "gen_ai.provider.name", "mock")
		if c.Kind != 3 { // SPAN_KIND_CLIENT
			t.Errorf("chat span kind %v, want client", c.Kind)
		}
		if _, ok := c.Attrs["gen_ai.input.messages"]; ok {
			t.Errorf("content recorded without OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT")
		}
	}
	check(first, "gen_ai.conversation.id", "plan-session")
	check(first, "gen_ai.usage.input_tokens", int64(11))
	check(first, "gen_ai.usage.output_tokens", int64(7))
	check(first, "gen_ai.response.model", "mock-model")
	check(first, "gen_ai.response.finish_reasons", []any{"tool_use"})
	check(sub, "gen_ai.response.model", "child-model")
	check(sub, "gen_ai.conversation.id", child)
	check(last, "gen_ai.usage.input_tokens", int64(40))
	check(last, "gen_ai.response.finish_reasons", []any{"end_turn"})
	lookup := byName["execute_tool lookup"][0]
	check(lookup, "gen_ai.operation.name", "execute_tool")
	check(lookup, "gen_ai.tool.name", "lookup")
	check(lookup, "gen_ai.tool.call.id", "mock_call_1")
	check(lookup, "gen_ai.tool.type", "function")
	if lookup.StatusError {
		t.Error("lookup's span is an error")
	}
	broken := byName["execute_tool broken"][0]
	if !broken.StatusError || !strings.Contains(broken.StatusMessage, "the tool broke") || len(broken.Events) == 0 || broken.Events[0] != "exception" {
		t.Errorf("broken's span: error %v %q, events %v", broken.StatusError, broken.StatusMessage, broken.Events)
	}
	check(broken, "error.type", "_OTHER")
	for _, s := range spans {
		if s.EndNano < s.StartNano || s.StartNano == 0 {
			t.Errorf("span %s: start %d, end %d", s.Name, s.StartNano, s.EndNano)
		}
	}
}

func equalAttr(got, want any) bool {
	g, gok := got.([]any)
	w, wok := want.([]any)
	if gok || wok {
		if len(g) != len(w) {
			return false
		}
		for i := range g {
			if g[i] != w[i] {
				return false
			}
		}
		return gok && wok
	}
	return got == want
}

// TestTracesContent: with OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT
// the chat spans carry the messages and the tool spans their arguments
// and results.
func TestTracesContent(t *testing.T) {
	rcv := telemetrytest.NewReceiver()
	defer rcv.Close()
	code, _, errs := runTraced(t, traceScript, map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": rcv.URL + "/v1/traces",
		"OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "true"})
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var chat, tool *telemetrytest.Span
	for _, s := range rcv.Spans() {
		switch s.Name {
		case "chat":
			if chat == nil {
				chat = &s
			}
		case "execute_tool lookup":
			tool = &s
		}
	}
	if chat == nil || tool == nil {
		t.Fatalf("spans missing: %s", telemetrytest.Tree(rcv.Spans()))
	}
	if in, _ := chat.Attrs["gen_ai.input.messages"].(string); in != `[{"role":"user","parts":[{"type":"text","content":"Plan a day in Lisbon."}]}]` {
		t.Errorf("input messages %s", in)
	}
	if out, _ := chat.Attrs["gen_ai.output.messages"].(string); !strings.HasPrefix(out, `[{"role":"assistant","parts":[{"type":"tool_call","id":"mock_call_1","name":"lookup","arguments":{"city":"Lisbon"}}`) {
		t.Errorf("output messages %s", out)
	}
	if args, res := tool.Attrs["gen_ai.tool.call.arguments"], tool.Attrs["gen_ai.tool.call.result"]; args != `{"city":"Lisbon"}` || res != "sunny in Lisbon" {
		t.Errorf("tool arguments %v, result %v", args, res)
	}
}

// TestTracesOffConnectsNowhere: without an endpoint variable (other
// OTEL_* variables set), and with OTEL_SDK_DISABLED=true or
// OTEL_TRACES_EXPORTER=none beside one, nothing connects: not the
// receiver, not OTLP/HTTP's default port 4318 on localhost.
func TestTracesOffConnectsNowhere(t *testing.T) {
	rcv := telemetrytest.NewReceiver()
	defer rcv.Close()
	var dialled atomic.Int64
	ln, err := net.Listen("tcp", "127.0.0.1:4318")
	if err != nil {
		t.Logf("port 4318 is taken (%v): only the receiver is watched", err)
	} else {
		defer ln.Close()
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				dialled.Add(1)
				c.Close()
			}
		}()
	}
	for _, env := range []map[string]string{
		{"OTEL_SERVICE_NAME": "x", "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "true", "OTEL_TRACES_SAMPLER": "always_on"},
		{"OTEL_EXPORTER_OTLP_ENDPOINT": rcv.URL, "OTEL_SDK_DISABLED": "true"},
		{"OTEL_EXPORTER_OTLP_ENDPOINT": rcv.URL, "OTEL_TRACES_EXPORTER": "none"},
	} {
		if code, _, errs := runTraced(t, traceScript, env); code != 0 || errs != "" {
			t.Fatalf("%v: exit %d: %s", env, code, errs)
		}
	}
	time.Sleep(50 * time.Millisecond) // an accept in flight is counted
	if n := rcv.Requests(); n != 0 || dialled.Load() != 0 {
		t.Errorf("%d export requests, %d connections to :4318 without tracing asked for", n, dialled.Load())
	}
}

// TestTraceparentSentToProvider: a provider request carries the W3C
// traceparent of its chat span.
func TestTraceparentSentToProvider(t *testing.T) {
	rcv := telemetrytest.NewReceiver()
	defer rcv.Close()
	fake := newFakeOpenAI(0)
	defer fake.Close()
	var mu sync.Mutex
	var seen []string
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.Header.Get("traceparent"))
		mu.Unlock()
		fake.Config.Handler.ServeHTTP(w, r)
	}))
	defer proxy.Close()
	code, out, errs := runTraced(t, `print(agent_loop("hi", provider = "openai", model = "gpt-test")["text"])`,
		map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": rcv.URL, "OPENAI_BASE_URL": proxy.URL + "/v1", "OPENAI_API_KEY": fakeKey})
	if code != 0 || out != "echo: hi\n" {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, out, errs)
	}
	var chat *telemetrytest.Span
	for _, s := range rcv.Spans() {
		if s.Name == "chat gpt-test" {
			chat = &s
		}
	}
	if chat == nil {
		t.Fatalf("no chat span: %s", telemetrytest.Tree(rcv.Spans()))
	}
	if want := "00-" + chat.TraceID + "-" + chat.SpanID + "-01"; len(seen) != 1 || seen[0] != want {
		t.Errorf("traceparent %q, want %q", seen, want)
	}
	if chat.Attrs["gen_ai.provider.name"] != "openai" || chat.Attrs["gen_ai.request.model"] != "gpt-test" {
		t.Errorf("chat attributes %v", chat.Attrs)
	}
	// without tracing, no traceparent
	seen = nil
	if code, _, errs := runTraced(t, `agent_loop("hi", provider = "openai", model = "gpt-test")`,
		map[string]string{"OPENAI_BASE_URL": proxy.URL + "/v1", "OPENAI_API_KEY": fakeKey}); code != 0 {
		t.Fatal(errs)
	}
	if len(seen) != 1 || seen[0] != "" {
		t.Errorf("traceparent %q without tracing", seen)
	}
}
