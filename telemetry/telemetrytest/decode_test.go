package telemetrytest

import (
	"reflect"
	"testing"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	resourcepb "go.opentelemetry.io/proto/otlp/resource/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
)

func str(s string) *commonpb.AnyValue {
	return &commonpb.AnyValue{Value: &commonpb.AnyValue_StringValue{StringValue: s}}
}

// TestDecode decodes a request the OTLP project's Go types encoded.
func TestDecode(t *testing.T) {
	req := &coltracepb.ExportTraceServiceRequest{ResourceSpans: []*tracepb.ResourceSpans{{
		Resource: &resourcepb.Resource{Attributes: []*commonpb.KeyValue{{Key: "service.name", Value: str("skein")}}},
		ScopeSpans: []*tracepb.ScopeSpans{{
			Scope: &commonpb.InstrumentationScope{Name: "scope"},
			Spans: []*tracepb.Span{{
				TraceId: []byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}, SpanId: []byte{1, 1, 1, 1, 1, 1, 1, 1},
				ParentSpanId: []byte{2, 2, 2, 2, 2, 2, 2, 2}, Name: "chat m", Kind: tracepb.Span_SPAN_KIND_CLIENT,
				StartTimeUnixNano: 100, EndTimeUnixNano: 200,
				Attributes: []*commonpb.KeyValue{
					{Key: "s", Value: str("v")},
					{Key: "i", Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_IntValue{IntValue: -3}}},
					{Key: "b", Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_BoolValue{BoolValue: true}}},
					{Key: "d", Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_DoubleValue{DoubleValue: 1.5}}},
					{Key: "a", Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_ArrayValue{ArrayValue: &commonpb.ArrayValue{Values: []*commonpb.AnyValue{str("x"), str("y")}}}}},
				},
				Events: []*tracepb.Span_Event{{Name: "exception", TimeUnixNano: 150}},
				Status: &tracepb.Status{Code: tracepb.Status_STATUS_CODE_ERROR, Message: "boom"},
			}},
		}},
	}}}
	data, err := proto.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	spans, err := Decode(data)
	if err != nil {
		t.Fatal(err)
	}
	want := []Span{{TraceID: "0102030405060708090a0b0c0d0e0f10", SpanID: "0101010101010101", ParentID: "0202020202020202", Name: "chat m", Kind: 3,
		Attrs: map[string]any{"s": "v", "i": int64(-3), "b": true, "d": 1.5, "a": []any{"x", "y"}}, StatusError: true, StatusMessage: "boom",
		Events: []string{"exception"}, Resource: map[string]any{"service.name": "skein"}, Scope: "scope", StartNano: 100, EndNano: 200}}
	if !reflect.DeepEqual(spans, want) {
		t.Errorf("decoded\n\t%+v\nwant\n\t%+v", spans, want)
	}
	if _, err := Decode([]byte{0x0a, 0x05, 0x01}); err == nil {
		t.Error("a truncated request decoded")
	}
}
