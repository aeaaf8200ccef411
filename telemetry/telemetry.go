// Package telemetry exports skein's work as OpenTelemetry traces with the
// GenAI semantic conventions: a span invoke_workflow per workflow run, one
// per stage, invoke_agent per agent loop, chat per model call and
// execute_tool per tool call, nested as the work nests (a sub-agent's
// invoke_agent under its parent's execute_tool).
//
// Tracing is configured only by the standard OTEL_* variables: FromEnv
// returns a Tracer when OTEL_EXPORTER_OTLP_ENDPOINT or
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is set (and neither
// OTEL_SDK_DISABLED=true nor OTEL_TRACES_EXPORTER=none says otherwise),
// else nil. The span recorder (recorder.go: skein's implementation of
// the OpenTelemetry trace API, with the SDK's samplers, span limits and
// resource), its batch processor and OTLP/HTTP exporter are built at the
// first span, not before: a command that starts no span pays nothing,
// and nothing connects anywhere until spans are exported. The exporter
// reads OTEL_EXPORTER_OTLP_* (endpoint, headers, timeout, compression,
// certificates), the batch processor OTEL_BSP_*, the recorder
// OTEL_TRACES_SAMPLER(_ARG) and the span limits (OTEL_SPAN_*_LIMIT,
// OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT, ...), the resource
// OTEL_SERVICE_NAME (default "skein") and OTEL_RESOURCE_ATTRIBUTES.
// Message content is recorded only with
// OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true.
//
// The tracer travels in the context (With): the span helpers (Workflow,
// Stage, Agent, Chat, Tool) return a nil *Span, whose methods do nothing,
// when the context has none, so code without tracing pays a context
// lookup per span and nothing else. Inject writes the W3C traceparent of
// the current span into an outgoing request's headers; Extract continues
// one an incoming request carries.
package telemetry

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/resource"
)

// Environment variables read by FromEnv itself (the exporter and the
// recorder read the rest of OTEL_*).
const (
	EnvEndpoint       = "OTEL_EXPORTER_OTLP_ENDPOINT"
	EnvTracesEndpoint = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
	EnvSDKDisabled    = "OTEL_SDK_DISABLED"
	EnvTracesExporter = "OTEL_TRACES_EXPORTER"
	EnvServiceName    = "OTEL_SERVICE_NAME"
	EnvCaptureContent = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
)

// ScopeName is the instrumentation scope of skein's spans.
const ScopeName = "github.com/skein-dev/skein"

// Tracer exports spans over OTLP/HTTP. A nil *Tracer traces nothing.
type Tracer struct {
	content bool
	otlp    *otlpConfig
	errw    io.Writer // where a failure to set up tracing is reported

	once sync.Once
	rec  *recorder // nil until the first span, or when set-up failed
}

// FromEnv returns a Tracer configured by the OTEL_* variables, or nil
// when they do not ask for traces. It builds nothing and connects
// nowhere: the recorder is set up at the first span. A failure then (a
// bad variable) is written once to errw and tracing stays off.
func FromEnv(errw io.Writer) *Tracer {
	if os.Getenv(EnvEndpoint) == "" && os.Getenv(EnvTracesEndpoint) == "" {
		return nil
	}
	if strings.EqualFold(strings.TrimSpace(os.Getenv(EnvSDKDisabled)), "true") {
		return nil
	}
	if exp := strings.TrimSpace(os.Getenv(EnvTracesExporter)); exp != "" && !strings.EqualFold(exp, "otlp") {
		// "none", or an exporter skein does not have: nothing is exported
		if !strings.EqualFold(exp, "none") && errw != nil {
			fmt.Fprintf(errw, "telemetry: %s=%s is not supported (only otlp over http): no traces are exported\n", EnvTracesExporter, exp)
		}
		return nil
	}
	cfg, err := otlpConfigFromEnv()
	if err != nil {
		if errw != nil {
			fmt.Fprintf(errw, "telemetry: %v: no traces are exported\n", err)
		}
		return nil
	}
	return &Tracer{content: strings.EqualFold(strings.TrimSpace(os.Getenv(EnvCaptureContent)), "true"), otlp: cfg, errw: errw}
}

// recorder returns the span recorder, setting it up on the first call
// (nil when that failed).
func (t *Tracer) recorder() *recorder {
	t.once.Do(t.setUp)
	return t.rec
}

func (t *Tracer) setUp() {
	// OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES (WithFromEnv)
	// override the default service name.
	res, err := resource.New(context.Background(), resource.WithAttributes(attribute.String("service.name", "skein")),
		resource.WithFromEnv(), resource.WithTelemetrySDK())
	if err != nil {
		if t.errw != nil {
			fmt.Fprintf(t.errw, "telemetry: OTEL_RESOURCE_ATTRIBUTES: %v (no traces are exported)\n", err)
		}
		return
	}
	t.rec = newRecorder(res, newOTLPExporter(t.otlp, res), batchOptionsFromEnv())
}

// CaptureContent reports whether message content is recorded on spans.
func (t *Tracer) CaptureContent() bool { return t != nil && t.content }

// Shutdown exports the spans not yet sent and stops the exporter, within
// ctx's deadline. It does nothing when no span was started.
func (t *Tracer) Shutdown(ctx context.Context) error {
	if t == nil {
		return nil
	}
	t.once.Do(func() {}) // a span started later records nothing
	if t.rec == nil {
		return nil
	}
	return t.rec.proc.Shutdown(ctx)
}

// ShutdownTimeout is how long Close waits for the last spans to export.
const ShutdownTimeout = 5 * time.Second

// Close is Shutdown with ShutdownTimeout; its error is written to errw.
func (t *Tracer) Close() {
	if t == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), ShutdownTimeout)
	defer cancel()
	if err := t.Shutdown(ctx); err != nil && t.errw != nil {
		fmt.Fprintf(t.errw, "telemetry: exporting the last spans: %v\n", err)
	}
}

type tracerKey struct{}

// With returns ctx carrying t (ctx itself when t is nil).
func With(ctx context.Context, t *Tracer) context.Context {
	if t == nil {
		return ctx
	}
	return context.WithValue(ctx, tracerKey{}, t)
}

// From returns the Tracer ctx carries, or nil.
func From(ctx context.Context) *Tracer {
	t, _ := ctx.Value(tracerKey{}).(*Tracer)
	return t
}

type agentKey struct{}

// WithAgent returns ctx naming the agent whose loops run under it: an
// invoke_agent span started under ctx without a name of its own takes
// this one (skein serve names each turn's agent).
func WithAgent(ctx context.Context, name string) context.Context {
	if name == "" {
		return ctx
	}
	return context.WithValue(ctx, agentKey{}, name)
}
