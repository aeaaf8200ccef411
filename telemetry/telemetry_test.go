package telemetry

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/skein-dev/skein/sessions/message"
	"go.opentelemetry.io/otel/trace"
)

func clearEnv(t testing.TB) {
	for _, k := range []string{EnvEndpoint, EnvTracesEndpoint, EnvSDKDisabled, EnvTracesExporter, EnvCaptureContent} {
		t.Setenv(k, "")
	}
}

func TestFromEnv(t *testing.T) {
	for _, tc := range []struct {
		env     map[string]string
		on      bool
		content bool
		warns   string
	}{
		{env: map[string]string{}},
		{env: map[string]string{EnvCaptureContent: "true"}},
		{env: map[string]string{EnvEndpoint: "http://127.0.0.1:1"}, on: true},
		{env: map[string]string{EnvTracesEndpoint: "http://127.0.0.1:1/v1/traces", EnvCaptureContent: "TRUE"}, on: true, content: true},
		{env: map[string]string{EnvEndpoint: "http://127.0.0.1:1", EnvCaptureContent: "yes"}, on: true},
		{env: map[string]string{EnvEndpoint: "http://127.0.0.1:1", EnvSDKDisabled: "true"}},
		{env: map[string]string{EnvEndpoint: "http://127.0.0.1:1", EnvTracesExporter: "none"}},
		{env: map[string]string{EnvEndpoint: "http://127.0.0.1:1", EnvTracesExporter: "otlp"}, on: true},
		{env: map[string]string{EnvEndpoint: "http://127.0.0.1:1", EnvTracesExporter: "zipkin"}, warns: "telemetry: OTEL_TRACES_EXPORTER=zipkin is not supported"},
	} {
		clearEnv(t)
		for k, v := range tc.env {
			t.Setenv(k, v)
		}
		var errw bytes.Buffer
		tr := FromEnv(&errw)
		if (tr != nil) != tc.on || tr.CaptureContent() != tc.content || !strings.HasPrefix(errw.String(), tc.warns) || (tc.warns == "") != (errw.Len() == 0) {
			t.Errorf("%v: tracer %v, content %v, warning %q", tc.env, tr != nil, tr.CaptureContent(), errw.String())
		}
		// nothing was set up, so nothing to flush
		if err := tr.Shutdown(context.Background()); err != nil {
			t.Error(err)
		}
	}
}

// TestOff: without a tracer in the context every helper returns the
// context unchanged and a Span whose methods do nothing.
func TestOff(t *testing.T) {
	ctx := context.Background()
	for _, f := range []func() (context.Context, Span){
		func() (context.Context, Span) { return Workflow(ctx, "w", "r") },
		func() (context.Context, Span) { return Stage(ctx, "n", "agent", "s") },
		func() (context.Context, Span) { return Agent(ctx, "a", "s", "mock", "m") },
		func() (context.Context, Span) { return Chat(ctx, ChatRequest{SessionID: "s", Model: "m"}) },
		func() (context.Context, Span) { return Tool(ctx, "t", "c") },
	} {
		got, span := f()
		if got != ctx || span != (Span{}) || span.Recording() || span.CaptureContent() {
			t.Fatalf("a helper without a tracer changed the context or returned a span")
		}
		span.Replied(ChatResponse{Model: "m"})
		span.SetContent(KeyInputMessages, "x")
		span.SetString("k", "v")
		span.End(errors.New("boom"), "")
	}
	h := http.Header{}
	Inject(ctx, h)
	if len(h) != 0 {
		t.Errorf("Inject without a span wrote %v", h)
	}
	if From(With(ctx, nil)) != nil || With(ctx, nil) != ctx {
		t.Error("With(nil)")
	}
}

func TestExtractInject(t *testing.T) {
	const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	h := http.Header{}
	h.Set("traceparent", tp)
	ctx := Extract(context.Background(), h)
	out := http.Header{}
	Inject(ctx, out)
	if out.Get("traceparent") != tp {
		t.Errorf("traceparent %q, want %q", out.Get("traceparent"), tp)
	}
	if ctx := context.Background(); Extract(ctx, http.Header{}) != ctx {
		t.Error("Extract without a traceparent changed the context")
	}
}

func TestContentShapes(t *testing.T) {
	msgs := []message.Message{
		{Role: message.RoleUser, Text: "weather?"},
		{Role: message.RoleAssistant, ToolCalls: []message.ToolCall{{ID: "c1", Name: "weather", Arguments: map[string]any{"city": "Lisbon"}}}},
		{Role: message.RoleTool, ToolCallID: "c1", Name: "weather", Text: "sunny"},
	}
	want := `[{"role":"user","parts":[{"type":"text","content":"weather?"}]},` +
		`{"role":"assistant","parts":[{"type":"tool_call","id":"c1","name":"weather","arguments":{"city":"Lisbon"}}]},` +
		`{"role":"tool","parts":[{"type":"tool_call_response","id":"c1","response":"sunny"}]}]`
	if got := InputMessages(msgs); got != want {
		t.Errorf("input messages\n\tgot  %s\n\twant %s", got, want)
	}
	if got, want := OutputMessages("Sunny.", nil, "end_turn"), `[{"role":"assistant","parts":[{"type":"text","content":"Sunny."}],"finish_reason":"end_turn"}]`; got != want {
		t.Errorf("output messages %s, want %s", got, want)
	}
	if got := SystemInstructions("be terse"); got != `[{"type":"text","content":"be terse"}]` {
		t.Errorf("system instructions %s", got)
	}
	if SystemInstructions("") != "[]" {
		t.Error("empty system instructions")
	}
}

func TestProviderName(t *testing.T) {
	for in, want := range map[string]string{"openai": "openai", "anthropic": "anthropic", "gemini": "gcp.gemini", "azure": "azure.ai.openai", "openai_responses": "openai", "mock": "mock"} {
		if got := ProviderName(in); got != want {
			t.Errorf("ProviderName(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestSampler: OTEL_TRACES_SAMPLER chooses the SDK's samplers as the SDK
// does; the default follows a remote parent's sampled flag.
func TestSampler(t *testing.T) {
	unsampled := http.Header{"Traceparent": {"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00"}}
	sampled := http.Header{"Traceparent": {"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}}
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	defer srv.Close()
	for _, tc := range []struct {
		sampler, arg string
		parent       http.Header
		recording    bool
	}{
		{"", "", nil, true},
		{"", "", sampled, true},
		{"", "", unsampled, false},
		{"parentbased_always_on", "", unsampled, false},
		{"always_on", "", unsampled, true},
		{"always_off", "", nil, false},
		{"parentbased_always_off", "", nil, false},
		{"parentbased_always_off", "", sampled, true},
		{"traceidratio", "0", nil, false},
		{"traceidratio", "1", nil, true},
		{"parentbased_traceidratio", "0", sampled, true},
		{"bogus", "", unsampled, false}, // reported; the default
	} {
		clearEnv(t)
		t.Setenv(EnvEndpoint, srv.URL)
		t.Setenv("OTEL_TRACES_SAMPLER", tc.sampler)
		t.Setenv("OTEL_TRACES_SAMPLER_ARG", tc.arg)
		tr := FromEnv(nil)
		ctx := With(context.Background(), tr)
		if tc.parent != nil {
			ctx = Extract(ctx, tc.parent)
		}
		cctx, s := Agent(ctx, "a", "s", "mock", "m")
		if s.Recording() != tc.recording {
			t.Errorf("%s(%s) under %v: recording %v", tc.sampler, tc.arg, tc.parent, s.Recording())
		}
		h := http.Header{}
		Inject(cctx, h)
		if tp := h.Get("traceparent"); tc.parent != nil && (tp[3:35] != "0af7651916cd43dd8448eb211c80319c" || tp[36:52] == "b7ad6b7169203331") {
			t.Errorf("%s under %v: traceparent %s", tc.sampler, tc.parent, tp)
		}
		s.End(nil, "")
		tr.Close()
	}
}

// TestSpanContextKey checks that a started span is its context's current
// span as the OpenTelemetry API sees it (trace.SpanFromContext), that
// the context keeps its parent's values and cancellation, and that the
// spans still nest when the API's key could not be found.
func TestSpanContextKey(t *testing.T) {
	if currentSpanKey == nil {
		t.Fatal("the OpenTelemetry API's current-span key was not found")
	}
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	defer srv.Close()
	clearEnv(t)
	t.Setenv(EnvEndpoint, srv.URL)
	tr := FromEnv(nil)
	defer tr.Close()
	orig := currentSpanKey
	defer func() { currentSpanKey = orig }()
	for _, key := range []any{orig, nil} {
		currentSpanKey = key
		parent, cancel := context.WithCancel(WithAgent(With(context.Background(), tr), "planner"))
		actx, a := Agent(parent, "", "s", "mock", "m")
		cctx, c := Chat(actx, ChatRequest{SessionID: "s", Model: "m"})
		if trace.SpanFromContext(actx) != trace.Span(a.span) || trace.SpanFromContext(cctx) != trace.Span(c.span) {
			t.Errorf("key %v: the started spans are not their contexts' current spans", key)
		}
		if c.span.d.psid != a.span.sid || c.span.d.tid != a.span.tid || !trace.SpanContextFromContext(cctx).Equal(c.span.SpanContext()) {
			t.Errorf("key %v: the chat span's parent is %v, want %v", key, c.span.d.psid, a.span.SpanContext())
		}
		if From(cctx) != tr || cctx.Value(agentKey{}) != "planner" {
			t.Errorf("key %v: the span's context lost its parent's values", key)
		}
		cancel()
		if cctx.Err() != context.Canceled {
			t.Errorf("key %v: the span's context was not cancelled with its parent: %v", key, cctx.Err())
		}
		c.End(nil, "")
		a.End(nil, "")
		if trace.SpanFromContext(cctx).IsRecording() {
			t.Errorf("key %v: an ended span records", key)
		}
	}
}

// TestSpanAllocations: a span of the helpers (started, given its
// attributes and ended, encoded for export) allocates once, its handle
// and context together, in 96 bytes.
func TestSpanAllocations(t *testing.T) {
	clearEnv(t)
	t.Setenv(EnvEndpoint, "http://127.0.0.1:1")
	tr := FromEnv(nil)
	ctx := With(context.Background(), tr)
	ctx, agent := Agent(ctx, "", "s1", "mock", "m")
	defer agent.End(nil, "")
	defer tr.Shutdown(context.Background())
	n := testing.AllocsPerRun(200, func() {
		_, chat := Chat(ctx, ChatRequest{SessionID: "s1", Provider: "mock", Model: "m"})
		chat.Replied(ChatResponse{Provider: "mock", RequestProvider: "mock", Model: "m", InputTokens: 1, OutputTokens: 2, FinishReason: "tool_use"})
		chat.End(nil, "")
		_, tool := Tool(ctx, "noop", "call_1")
		tool.End(nil, "")
	})
	if n > 2 {
		t.Errorf("%v allocations for two spans", n)
	}
	if size := unsafe.Sizeof(spanCtx{}); size > 96 {
		t.Errorf("a span and its context take %d bytes", size)
	}
}

// TestSpanTimes: a span's start is the wall clock when it starts and
// its end the start plus the monotonic time it took (with the wall
// clock read at most once a second, a second span started right after
// is timed the same way); times given through the API are kept as
// given.
func TestSpanTimes(t *testing.T) {
	bodies := bodyServer(t)
	tr := FromEnv(nil)
	ctx := With(context.Background(), tr)
	before := time.Now()
	_, first := Tool(ctx, "first", "call_1")
	first.End(nil, "")
	time.Sleep(time.Millisecond)
	_, tool := Tool(ctx, "slow", "call_2")
	time.Sleep(30 * time.Millisecond)
	tool.End(nil, "")
	after := time.Now()
	given := time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC)
	_, api := tr.recorder().Start(ctx, "given", trace.WithTimestamp(given))
	api.End(trace.WithTimestamp(given.Add(time.Minute)))
	spans := exportedSpans(t, tr, bodies)
	if len(spans) != 3 {
		t.Fatalf("%d spans", len(spans))
	}
	for _, s := range spans[:2] {
		start, end := int64(s.StartTimeUnixNano), int64(s.EndTimeUnixNano)
		if start < before.UnixNano() || end > after.UnixNano() || end < start {
			t.Errorf("%s: %d–%d, not within %d–%d", s.Name, start, end, before.UnixNano(), after.UnixNano())
		}
	}
	if spans[1].StartTimeUnixNano < spans[0].EndTimeUnixNano+uint64(time.Millisecond) {
		t.Errorf("the second span starts %d, the first ended %d", spans[1].StartTimeUnixNano, spans[0].EndTimeUnixNano)
	}
	if d := time.Duration(spans[1].EndTimeUnixNano - spans[1].StartTimeUnixNano); d < 30*time.Millisecond || d > after.Sub(before) {
		t.Errorf("the slow span took %v", d)
	}
	if s := spans[2]; s.StartTimeUnixNano != uint64(given.UnixNano()) || s.EndTimeUnixNano != uint64(given.Add(time.Minute).UnixNano()) {
		t.Errorf("given times: %d–%d", s.StartTimeUnixNano, s.EndTimeUnixNano)
	}
}

// TestRecordReuse: a span whose record had events, links and an error
// status before (records are reused) carries none of them.
func TestRecordReuse(t *testing.T) {
	bodies := bodyServer(t)
	tr := FromEnv(nil)
	ctx := With(context.Background(), tr)
	for i := range 3 {
		_, tool := Tool(ctx, "broken", "call_1")
		tool.span.AddLink(trace.Link{SpanContext: tool.span.SpanContext()})
		tool.End(errors.New("broke"), "")
		_, ok := Tool(ctx, "fine", fmt.Sprint("call_", i))
		ok.End(nil, "")
	}
	spans := exportedSpans(t, tr, bodies)
	if len(spans) != 6 {
		t.Fatalf("%d spans", len(spans))
	}
	for i, s := range spans {
		broken := i%2 == 0
		if broken != (len(s.Events) == 1 && len(s.Links) == 1 && s.Status.GetMessage() == "broke") || !broken && (len(s.Events) > 0 || len(s.Links) > 0 || s.Status != nil) {
			t.Errorf("span %d (%s): events %v, links %v, status %v", i, s.Name, s.Events, s.Links, s.Status)
		}
	}
}
