package telemetry

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/resource"
	"go.opentelemetry.io/otel/trace"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
)

// TestOTLPExport exports spans through the SDK and skein's exporter to a
// loopback server and decodes the request with the OTLP project's own Go
// types: the hand-written encoding is the protocol's.
func TestOTLPExport(t *testing.T) {
	var mu sync.Mutex
	var bodies [][]byte
	var headers []http.Header
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		data, err := readExportBody(r)
		if err != nil {
			t.Error(err)
			return
		}
		mu.Lock()
		bodies, headers = append(bodies, data), append(headers, r.Header.Clone())
		mu.Unlock()
		if r.URL.Path != "/custom/traces" {
			t.Errorf("path %s", r.URL.Path)
		}
	}))
	defer srv.Close()
	clearEnv(t)
	t.Setenv(EnvTracesEndpoint, srv.URL+"/custom/traces")
	t.Setenv("OTEL_EXPORTER_OTLP_HEADERS", "x-team=obs,authorization=Bearer%20abc")
	t.Setenv("OTEL_EXPORTER_OTLP_COMPRESSION", "gzip")
	t.Setenv(EnvServiceName, "svc")
	tr := FromEnv(nil)
	ctx := With(context.Background(), tr)
	ctx, agent := Agent(ctx, "planner", "s1", "openai", "gpt")
	cctx, chat := Chat(ctx, ChatRequest{SessionID: "s1", Provider: "openai", Model: "gpt", MaxTokens: 100})
	_ = cctx
	chat.Replied(ChatResponse{Provider: "openai", RequestProvider: "openai", Model: "gpt-2", InputTokens: 12, OutputTokens: 3, FinishReason: "stop"})
	chat.SetString("x.empty", "")
	chat.span.SetAttributes(attribute.Bool("x.bool", true), attribute.Float64("x.f", 2.5), attribute.Int64Slice("x.ints", []int64{1, -2}), attribute.Bool("x.false", false))
	chat.End(errors.New("rate limited"), "rate_limit")
	agent.End(nil, "")
	if err := tr.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if len(bodies) != 1 {
		t.Fatalf("%d requests", len(bodies))
	}
	if h := headers[0]; h.Get("X-Team") != "obs" || h.Get("Authorization") != "Bearer abc" || h.Get("Content-Type") != "application/x-protobuf" {
		t.Errorf("headers %v", h)
	}
	var req coltracepb.ExportTraceServiceRequest
	if err := proto.Unmarshal(bodies[0], &req); err != nil {
		t.Fatal(err)
	}
	rs := req.ResourceSpans
	if len(rs) != 1 || len(rs[0].ScopeSpans) != 1 || len(rs[0].ScopeSpans[0].Spans) != 2 {
		t.Fatalf("request %v", &req)
	}
	res := map[string]string{}
	for _, kv := range rs[0].Resource.Attributes {
		res[kv.Key] = kv.Value.GetStringValue()
	}
	if res["service.name"] != "svc" || res["telemetry.sdk.language"] != "go" {
		t.Errorf("resource %v", res)
	}
	if name := rs[0].ScopeSpans[0].Scope.Name; name != ScopeName {
		t.Errorf("scope %q", name)
	}
	spans := map[string]*tracepb.Span{}
	for _, s := range rs[0].ScopeSpans[0].Spans {
		spans[s.Name] = s
	}
	a, c := spans["invoke_agent planner"], spans["chat gpt"]
	if a == nil || c == nil {
		t.Fatalf("spans %v", spans)
	}
	if len(a.TraceId) != 16 || len(a.SpanId) != 8 || len(a.ParentSpanId) != 0 || !bytes.Equal(c.TraceId, a.TraceId) || !bytes.Equal(c.ParentSpanId, a.SpanId) {
		t.Errorf("ids: agent %s/%s, chat %s/%s under %s", hex.EncodeToString(a.TraceId), hex.EncodeToString(a.SpanId),
			hex.EncodeToString(c.TraceId), hex.EncodeToString(c.SpanId), hex.EncodeToString(c.ParentSpanId))
	}
	if c.Kind != tracepb.Span_SPAN_KIND_CLIENT || a.Kind != tracepb.Span_SPAN_KIND_INTERNAL {
		t.Errorf("kinds %v %v", c.Kind, a.Kind)
	}
	if c.StartTimeUnixNano == 0 || c.EndTimeUnixNano < c.StartTimeUnixNano || c.Flags&0x1 == 0 {
		t.Errorf("times %d %d, flags %x", c.StartTimeUnixNano, c.EndTimeUnixNano, c.Flags)
	}
	if c.Status.GetCode() != tracepb.Status_STATUS_CODE_ERROR || c.Status.GetMessage() != "rate limited" || a.Status != nil {
		t.Errorf("status %v, %v", c.Status, a.Status)
	}
	if len(c.Events) != 1 || c.Events[0].Name != "exception" {
		t.Errorf("events %v", c.Events)
	}
	attrs := map[string]string{}
	for _, kv := range c.Attributes {
		attrs[kv.Key] = strings.TrimSpace(kv.Value.String())
	}
	for k, want := range map[string]string{
		"gen_ai.operation.name": `string_value:"chat"`, "gen_ai.provider.name": `string_value:"openai"`,
		"gen_ai.request.model": `string_value:"gpt"`, "gen_ai.response.model": `string_value:"gpt-2"`,
		"gen_ai.usage.input_tokens": `int_value:12`, "gen_ai.request.max_tokens": `int_value:100`,
		"gen_ai.response.finish_reasons": `array_value:{values:{string_value:"stop"}}`,
		"error.type":                     `string_value:"rate_limit"`, "x.empty": `string_value:""`, "x.bool": `bool_value:true`, "x.false": `bool_value:false`,
		"x.f": `double_value:2.5`, "x.ints": `array_value:{values:{int_value:1} values:{int_value:-2}}`,
	} {
		if got := strings.Join(strings.Fields(attrs[k]), ""); got != strings.Join(strings.Fields(want), "") {
			t.Errorf("%s = %s, want %s", k, attrs[k], want)
		}
	}
}

func TestOTLPConfigErrors(t *testing.T) {
	for _, tc := range []struct{ env map[string]string }{
		{map[string]string{EnvEndpoint: "localhost:4318"}},
		{map[string]string{EnvEndpoint: "http://127.0.0.1:4318", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}},
		{map[string]string{EnvEndpoint: "http://127.0.0.1:4318", "OTEL_EXPORTER_OTLP_TIMEOUT": "soon"}},
		{map[string]string{EnvEndpoint: "http://127.0.0.1:4318", "OTEL_EXPORTER_OTLP_COMPRESSION": "zstd"}},
		{map[string]string{EnvEndpoint: "http://127.0.0.1:4318", "OTEL_EXPORTER_OTLP_HEADERS": "novalue"}},
		{map[string]string{EnvEndpoint: "http://127.0.0.1:4318", "OTEL_EXPORTER_OTLP_HEADERS": "x-a=b%0D%0AHost: evil"}},
		{map[string]string{EnvEndpoint: "http://127.0.0.1:4318", "OTEL_EXPORTER_OTLP_HEADERS": "x a=b"}},
		{map[string]string{EnvEndpoint: "http://127.0.0.1:4318", "OTEL_EXPORTER_OTLP_CERTIFICATE": "/nonexistent.pem"}},
	} {
		clearEnv(t)
		for _, k := range []string{"OTEL_EXPORTER_OTLP_PROTOCOL", "OTEL_EXPORTER_OTLP_TIMEOUT", "OTEL_EXPORTER_OTLP_COMPRESSION", "OTEL_EXPORTER_OTLP_HEADERS", "OTEL_EXPORTER_OTLP_CERTIFICATE"} {
			t.Setenv(k, "")
		}
		for k, v := range tc.env {
			t.Setenv(k, v)
		}
		var errw bytes.Buffer
		if tr := FromEnv(&errw); tr != nil || !strings.HasPrefix(errw.String(), "telemetry: ") || !strings.HasSuffix(errw.String(), ": no traces are exported\n") {
			t.Errorf("%v: tracer %v, message %q", tc.env, tr != nil, errw.String())
		}
	}
}

// TestOTLPExportLarge: a request of many spans, one with a value longer
// than 16 KiB (a length of three bytes, at every level of nesting),
// decodes with the OTLP project's Go types; a chat span that failed
// before a reply still has its request's attributes.
func TestOTLPExportLarge(t *testing.T) {
	bodies := bodyServer(t)
	t.Setenv(EnvCaptureContent, "true")
	t.Setenv("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", "1000")
	tr := FromEnv(nil)
	ctx := With(context.Background(), tr)
	ctx, agent := Agent(ctx, "", "s1", "mock", "m")
	long := strings.Repeat("0123456789", 2000)
	for i := range 300 {
		_, tool := Tool(ctx, "noop", fmt.Sprint("call_", i))
		if i == 7 {
			tool.SetContent(KeyToolResult, long)
		}
		tool.End(nil, "")
	}
	_, chat := Chat(ctx, ChatRequest{SessionID: "s1", Provider: "gemini", Model: "m", MaxTokens: 5})
	chat.End(errors.New("quota"), "rate_limit")
	agent.End(nil, "")
	spans := exportedSpans(t, tr, bodies)
	if len(spans) != 302 {
		t.Fatalf("%d spans", len(spans))
	}
	attrs := func(s *tracepb.Span) map[string]string {
		m := map[string]string{}
		for _, kv := range s.Attributes {
			m[kv.Key] = kv.Value.GetStringValue() + fmt.Sprint(kv.Value.GetIntValue())
		}
		return m
	}
	if a := attrs(spans[7]); a[KeyToolResult] != long+"0" || a[KeyToolCallID] != "call_70" || spans[7].Name != "execute_tool noop" {
		t.Errorf("span 7: %s, %d attributes, call id %q", spans[7].Name, len(a), a[KeyToolCallID])
	}
	c := spans[300]
	if a := attrs(c); c.Name != "chat m" || a[KeyOperation] != "chat0" || a[KeyProvider] != "gcp.gemini0" || a[KeyRequestModel] != "m0" ||
		a[KeyMaxTokens] != "5" || a[KeyErrorType] != "rate_limit0" || a[KeyConversationID] != "s10" || c.Status.GetMessage() != "quota" {
		t.Errorf("failed chat span %s: %v, status %v", c.Name, a, c.Status)
	}
}

// TestOTLPExportChunksReused: batches that span several chunks, the
// chunks reused from batch to batch, gzip on and off: every span
// arrives once, intact.
func TestOTLPExportChunksReused(t *testing.T) {
	for _, gz := range []string{"none", "gzip"} {
		var mu sync.Mutex
		seen := map[string]int{}
		requests := 0
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			data, err := readExportBody(r)
			if err != nil {
				t.Error(err)
				return
			}
			var req coltracepb.ExportTraceServiceRequest
			if err := proto.Unmarshal(data, &req); err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			defer mu.Unlock()
			requests++
			for _, s := range req.ResourceSpans[0].ScopeSpans[0].Spans {
				for _, kv := range s.Attributes {
					if kv.Key == KeyToolCallID {
						seen[kv.Value.GetStringValue()+"/"+s.Name]++
					}
				}
			}
		}))
		clearEnv(t)
		t.Setenv(EnvEndpoint, srv.URL)
		t.Setenv("OTEL_EXPORTER_OTLP_COMPRESSION", gz)
		t.Setenv("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", "300")
		tr := FromEnv(nil)
		ctx := With(context.Background(), tr)
		pad := strings.Repeat("x", 200)
		const n = 1000
		for i := range n {
			_, tool := Tool(ctx, fmt.Sprint("tool", i%7, pad), fmt.Sprint("call_", i))
			tool.End(nil, "")
		}
		if err := tr.Shutdown(context.Background()); err != nil {
			t.Fatal(err)
		}
		srv.Close()
		if requests != 4 || len(seen) != n {
			t.Fatalf("%s: %d requests, %d distinct spans", gz, requests, len(seen))
		}
		for i := range n {
			if k := fmt.Sprintf("call_%d/execute_tool tool%d%s", i, i%7, pad); seen[k] != 1 {
				t.Fatalf("%s: span %s arrived %d times", gz, k, seen[k])
			}
		}
	}
}

// TestMessageLength: a sub-message's length written into the one or two
// bytes kept for it (beginMessage/endMessage, appendSpanField/
// endMessage2) whatever its size, the body moved when the varint is
// shorter or longer; spans around those sizes decode.
func TestMessageLength(t *testing.T) {
	for _, n := range []int{0, 1, 127, 128, 300, 16383, 16384, 20000, 2100000} {
		body := bytes.Repeat([]byte{0xa5}, n)
		want := appendBytesField([]byte{7}, 2, body)
		b, m := beginMessage([]byte{7}, 2)
		if got := endMessage(append(b, body...), m); !bytes.Equal(got, want) {
			t.Errorf("endMessage, %d bytes: %.12x..., want %.12x...", n, got, want)
		}
		b = append(appendTag([]byte{7}, 2, wireBytes), 0, 0)
		if got := endMessage2(append(b, body...), len(b)); !bytes.Equal(got, want) {
			t.Errorf("endMessage2, %d bytes: %.12x..., want %.12x...", n, got, want)
		}
	}
	exp := &recordingExporter{}
	tp := newRecorder(resource.Empty(), exp, batchOptions{delay: time.Hour, timeout: time.Second, maxQueue: 1000, batchSize: 1000})
	var names []string
	for _, n := range []int{0, 20, 40, 60, 80, 100, 16200, 16250, 16300, 16350, 16400, 70000} {
		for d := range 8 { // a span's size around 128 and 16384 bytes
			name := strings.Repeat("n", n+d)
			names = append(names, name)
			endSpans(tp, name)
		}
	}
	if err := tp.proc.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got, _ := exp.got(); len(got) != 1 || got[0] != strings.Join(names, ",") {
		t.Errorf("the spans decoded differ from those ended")
	}
}

// TestAttrEncoding checks the attributes fields encoded with their
// lengths computed first (strings, ints) and those encoded once (fixed
// values) against the generic encoding, and decodes each with the OTLP
// project's Go types.
func TestAttrEncoding(t *testing.T) {
	var kvs []attribute.KeyValue
	for _, n := range []int{0, 1, 100, 127, 128, 200, 16383, 16384, 20000, 2100000} {
		kvs = append(kvs, attribute.String("k", strings.Repeat("v", n)), attribute.String(strings.Repeat("k", n+1), "v"))
	}
	for _, v := range []int64{0, 1, 127, 128, -1, 1 << 40, math.MaxInt64, math.MinInt64} {
		kvs = append(kvs, attribute.Int64(KeyInputTokens, v))
	}
	for _, kv := range kvs {
		var got []byte
		var k int
		if kv.Value.Type() == attribute.STRING {
			got, k = appendStringKeyValue([]byte{7}, string(kv.Key), kv.Value.AsString())
		} else {
			got, k = appendIntKeyValue([]byte{7}, string(kv.Key), kv.Value.AsInt64())
		}
		if want := encodeKeyValue([]byte{7}, 9, kv); !bytes.Equal(got, want) {
			t.Fatalf("%.20s=%.20s: encoded %.40x, want %.40x", kv.Key, kv.Value.Emit(), got, want)
		}
		if key := string(got[k:min(k+len(kv.Key), len(got))]); key != string(kv.Key) {
			t.Fatalf("%.20s: the key at %d reads %.20q", kv.Key, k, key)
		}
		checkField(t, got[1:], kv)
	}
	fixed := map[*[]byte]attribute.KeyValue{&fieldOpWorkflow: attribute.String(KeyOperation, OpWorkflow),
		&fieldOpStage: attribute.String(KeyOperation, OpStage), &fieldOpAgent: attribute.String(KeyOperation, OpAgent),
		&fieldOpChat: attribute.String(KeyOperation, OpChat), &fieldOpTool: attribute.String(KeyOperation, OpTool),
		&fieldToolFunction: attribute.String(KeyToolType, "function")}
	for i, r := range stopReasons {
		fixed[&fieldStopReasons[i]] = attribute.StringSlice(KeyFinishReasons, []string{r})
	}
	for f, kv := range fixed {
		checkField(t, *f, kv)
	}
}

// checkField decodes a Span's attributes field (9) with the OTLP types
// and checks it is kv.
func checkField(t *testing.T, field []byte, kv attribute.KeyValue) {
	t.Helper()
	var s tracepb.Span
	if err := proto.Unmarshal(field, &s); err != nil || len(s.Attributes) != 1 {
		t.Fatalf("%.20s: %v, %d attributes", kv.Key, err, len(s.Attributes))
	}
	a := s.Attributes[0]
	var got, want string
	switch kv.Value.Type() {
	case attribute.STRINGSLICE:
		want = fmt.Sprint(kv.Value.AsStringSlice())
		var vs []string
		for _, x := range a.Value.GetArrayValue().GetValues() {
			vs = append(vs, x.GetStringValue())
		}
		got = fmt.Sprint(vs)
	case attribute.INT64:
		want, got = fmt.Sprint(kv.Value.AsInt64()), fmt.Sprint(a.Value.GetIntValue())
	default:
		want, got = kv.Value.AsString(), a.Value.GetStringValue()
	}
	if a.Key != string(kv.Key) || got != want {
		t.Errorf("%.20s=%.20s decoded as %.20s=%.20s", kv.Key, want, a.Key, got)
	}
}

// TestSpanLimits: the span limits apply to the encoded attributes as the
// SDK applies them (a key set again takes its new value, a new key past
// the count limit is dropped and counted, as is an invalid attribute;
// strings and string slices are cut to the length limit), and events,
// links, names and statuses are exported, all decoded with the OTLP
// project's Go types.
func TestSpanLimits(t *testing.T) {
	bodies := bodyServer(t)
	t.Setenv("OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT", "6")
	t.Setenv("OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT", "4")
	tr := FromEnv(nil)
	ctx := With(context.Background(), tr)
	ctx, agent := Agent(ctx, "", "session", "", "")                                      // 2 attributes
	_, chat := Chat(ctx, ChatRequest{SessionID: "s1", Provider: "openai", Model: "gpt"}) // 4
	chat.Replied(ChatResponse{Provider: "azure", RequestProvider: "openai", Model: "gpt-4o", InputTokens: 3, OutputTokens: 200, FinishReason: "stop"})
	// operation, conversation, provider (replaced), request.model, response.model,
	// input_tokens; output_tokens and finish_reasons dropped
	chat.span.SetAttributes(attribute.String(KeyConversationID, "s2"), attribute.String("", "invalid"),
		attribute.StringSlice(KeyRequestModel, []string{"abcdefg", "xy"}))
	chat.span.SetName("renamed")
	chat.span.AddEvent("note", trace.WithAttributes(attribute.Int("n", 1)))
	chat.span.AddLink(trace.Link{SpanContext: agent.span.SpanContext(), Attributes: []attribute.KeyValue{attribute.Bool("b", true)}})
	chat.End(errors.New("boom"), "")
	agent.span.SetStatus(codes.Ok, "")
	agent.End(nil, "")
	spans := exportedSpans(t, tr, bodies)
	if len(spans) != 2 {
		t.Fatalf("%d spans", len(spans))
	}
	c, a := spans[0], spans[1]
	got := map[string]string{}
	for _, kv := range c.Attributes {
		got[kv.Key] = strings.Join(strings.Fields(kv.Value.String()), "")
	}
	want := map[string]string{
		KeyOperation: `string_value:"chat"`, KeyConversationID: `string_value:"s2"`, KeyProvider: `string_value:"azur"`,
		KeyRequestModel:  `array_value:{values:{string_value:"abcd"}values:{string_value:"xy"}}`,
		KeyResponseModel: `string_value:"gpt-"`, KeyInputTokens: `int_value:3`,
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("attributes\n%v, want\n%v", got, want)
	}
	// output_tokens, finish_reasons, the invalid one and error.type
	if c.DroppedAttributesCount != 4 {
		t.Errorf("%d attributes dropped", c.DroppedAttributesCount)
	}
	if c.Name != "renamed" || len(c.Events) != 2 || c.Events[0].Name != "note" || c.Events[0].Attributes[0].Value.GetIntValue() != 1 ||
		c.Events[1].Name != "exception" || len(c.Links) != 1 || !bytes.Equal(c.Links[0].SpanId, a.SpanId) ||
		!c.Links[0].Attributes[0].Value.GetBoolValue() || c.Status.GetCode() != tracepb.Status_STATUS_CODE_ERROR {
		t.Errorf("chat span: %v", c)
	}
	if a.Name != "invoke_agent" || len(a.Attributes) != 2 || a.Status.GetCode() != tracepb.Status_STATUS_CODE_OK {
		t.Errorf("agent span: %v", a)
	}
}

// bodyServer starts a loopback OTLP/HTTP server keeping the request
// bodies, which OTEL_EXPORTER_OTLP_ENDPOINT names (the other variables
// cleared), and returns what it has received so far.
func bodyServer(t *testing.T) func() [][]byte {
	var mu sync.Mutex
	var bodies [][]byte
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		data, err := io.ReadAll(r.Body)
		if err != nil {
			t.Error(err)
		}
		mu.Lock()
		bodies = append(bodies, data)
		mu.Unlock()
	}))
	t.Cleanup(srv.Close)
	clearEnv(t)
	t.Setenv(EnvEndpoint, srv.URL)
	return func() [][]byte {
		mu.Lock()
		defer mu.Unlock()
		return bodies
	}
}

// exportedSpans shuts tr down and decodes the one request bodies has
// with the OTLP project's Go types, returning its spans.
func exportedSpans(t *testing.T, tr *Tracer, bodies func() [][]byte) []*tracepb.Span {
	t.Helper()
	if err := tr.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	got := bodies()
	if len(got) != 1 {
		t.Fatalf("%d requests", len(got))
	}
	var req coltracepb.ExportTraceServiceRequest
	if err := proto.Unmarshal(got[0], &req); err != nil {
		t.Fatal(err)
	}
	return req.ResourceSpans[0].ScopeSpans[0].Spans
}

// readExportBody reads an export request's body, unzipping it when its
// Content-Encoding is gzip.
func readExportBody(r *http.Request) ([]byte, error) {
	var body io.Reader = r.Body
	if r.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(r.Body)
		if err != nil {
			return nil, err
		}
		body = zr
	}
	return io.ReadAll(body)
}
