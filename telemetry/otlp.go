package telemetry

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/instrumentation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// The OTLP/HTTP trace exporter.
//
// skein sends spans as OTLP/HTTP with binary protobuf (the protocol's
// http/protobuf, its default) with an exporter of its own: the
// OpenTelemetry project's otlptracehttp links the protobuf runtime and
// gRPC, whose package initialisation every skein command would pay at
// start-up, traced or not. This one encodes the few OTLP messages it
// sends by hand (the wire format of opentelemetry-proto's
// collector/trace/v1 ExportTraceServiceRequest) and reads the exporter's
// standard variables:
//
//	OTEL_EXPORTER_OTLP_TRACES_ENDPOINT  the URL spans are posted to, as is
//	OTEL_EXPORTER_OTLP_ENDPOINT         else this base URL + /v1/traces
//	OTEL_EXPORTER_OTLP_(TRACES_)HEADERS  k=v,k2=v2 (values URL-decoded)
//	OTEL_EXPORTER_OTLP_(TRACES_)TIMEOUT  milliseconds per export (default 10000)
//	OTEL_EXPORTER_OTLP_(TRACES_)COMPRESSION  gzip or none (default)
//	OTEL_EXPORTER_OTLP_(TRACES_)CERTIFICATE  a PEM file of CAs to trust
//	OTEL_EXPORTER_OTLP_(TRACES_)CLIENT_CERTIFICATE, _CLIENT_KEY  a client certificate
//	OTEL_EXPORTER_OTLP_(TRACES_)PROTOCOL  http/protobuf (the only one)
//
// A failed export (a connection refused, a status other than 2xx) is an
// error the batch processor reports; its spans are dropped.

// otlpConfig is what the OTEL_EXPORTER_OTLP_* variables configure.
type otlpConfig struct {
	url       string
	headers   map[string]string
	timeout   time.Duration
	gzip      bool
	tls       *tls.Config // nil: the default
	userAgent string
}

// otlpEnv returns the value of the traces-specific variable, else the
// general one.
func otlpEnv(name string) string {
	if v := strings.TrimSpace(os.Getenv("OTEL_EXPORTER_OTLP_TRACES_" + name)); v != "" {
		return v
	}
	return strings.TrimSpace(os.Getenv("OTEL_EXPORTER_OTLP_" + name))
}

// otlpConfigFromEnv reads the exporter's variables.
func otlpConfigFromEnv() (*otlpConfig, error) {
	c := &otlpConfig{headers: map[string]string{}, timeout: 10 * time.Second, userAgent: "skein-otlp-exporter"}
	if v := strings.TrimSpace(os.Getenv(EnvTracesEndpoint)); v != "" {
		c.url = v
	} else {
		base := strings.TrimSpace(os.Getenv(EnvEndpoint))
		c.url = strings.TrimRight(base, "/") + "/v1/traces"
	}
	u, err := url.Parse(c.url)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("the traces endpoint %q is not an http(s) URL", c.url)
	}
	if p := otlpEnv("PROTOCOL"); p != "" && p != "http/protobuf" {
		return nil, fmt.Errorf("OTEL_EXPORTER_OTLP_PROTOCOL=%s is not supported (only http/protobuf)", p)
	}
	for _, name := range []string{"OTEL_EXPORTER_OTLP_HEADERS", "OTEL_EXPORTER_OTLP_TRACES_HEADERS"} {
		for _, kv := range strings.Split(os.Getenv(name), ",") {
			if strings.TrimSpace(kv) == "" {
				continue
			}
			k, v, ok := strings.Cut(kv, "=")
			if !ok {
				return nil, fmt.Errorf("%s: %q is not key=value", name, strings.TrimSpace(k))
			}
			if dv, err := url.QueryUnescape(strings.TrimSpace(v)); err == nil {
				v = dv
			}
			c.headers[strings.TrimSpace(k)] = strings.TrimSpace(v)
		}
	}
	if v := otlpEnv("TIMEOUT"); v != "" {
		ms, err := strconv.Atoi(v)
		if err != nil || ms <= 0 {
			return nil, fmt.Errorf("OTEL_EXPORTER_OTLP_TIMEOUT=%s is not a positive number of milliseconds", v)
		}
		c.timeout = time.Duration(ms) * time.Millisecond
	}
	switch v := strings.ToLower(otlpEnv("COMPRESSION")); v {
	case "", "none":
	case "gzip":
		c.gzip = true
	default:
		return nil, fmt.Errorf("OTEL_EXPORTER_OTLP_COMPRESSION=%s is not supported (gzip or none)", v)
	}
	ca, cert, key := otlpEnv("CERTIFICATE"), otlpEnv("CLIENT_CERTIFICATE"), otlpEnv("CLIENT_KEY")
	if ca != "" || cert != "" || key != "" {
		c.tls = &tls.Config{MinVersion: tls.VersionTLS12}
		if ca != "" {
			pem, err := os.ReadFile(ca)
			if err != nil {
				return nil, fmt.Errorf("OTEL_EXPORTER_OTLP_CERTIFICATE: %v", err)
			}
			c.tls.RootCAs = x509.NewCertPool()
			if !c.tls.RootCAs.AppendCertsFromPEM(pem) {
				return nil, fmt.Errorf("OTEL_EXPORTER_OTLP_CERTIFICATE: %s holds no PEM certificate", ca)
			}
		}
		if cert != "" || key != "" {
			pair, err := tls.LoadX509KeyPair(cert, key)
			if err != nil {
				return nil, fmt.Errorf("OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE/_CLIENT_KEY: %v", err)
			}
			c.tls.Certificates = []tls.Certificate{pair}
		}
	}
	return c, nil
}

// otlpExporter posts spans to an OTLP/HTTP endpoint.
type otlpExporter struct {
	cfg    *otlpConfig
	client *http.Client
}

var _ sdktrace.SpanExporter = (*otlpExporter)(nil)

func newOTLPExporter(cfg *otlpConfig) *otlpExporter {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.Proxy = nil // an exporter talks to the collector it was given
	if cfg.tls != nil {
		tr.TLSClientConfig = cfg.tls
	}
	return &otlpExporter{cfg: cfg, client: &http.Client{Transport: tr}}
}

// ExportSpans posts one ExportTraceServiceRequest holding spans.
func (e *otlpExporter) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	if len(spans) == 0 {
		return nil
	}
	body := encodeRequest(spans)
	if e.cfg.gzip {
		var buf bytes.Buffer
		zw := gzip.NewWriter(&buf)
		_, _ = zw.Write(body)
		_ = zw.Close()
		body = buf.Bytes()
	}
	ctx, cancel := context.WithTimeout(ctx, e.cfg.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.cfg.url, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("otlp: %v", err)
	}
	for k, v := range e.cfg.headers {
		req.Header.Set(k, v)
	}
	req.Header.Set("Content-Type", "application/x-protobuf")
	req.Header.Set("User-Agent", e.cfg.userAgent)
	if e.cfg.gzip {
		req.Header.Set("Content-Encoding", "gzip")
	}
	resp, err := e.client.Do(req)
	if err != nil {
		return fmt.Errorf("otlp: exporting %d spans: %v", len(spans), err)
	}
	defer resp.Body.Close()
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return fmt.Errorf("otlp: exporting %d spans: %s: %s", len(spans), resp.Status, strings.TrimSpace(printable(msg)))
	}
	return nil
}

// printable keeps the printable ASCII of an error body (a protobuf
// Status is binary).
func printable(b []byte) string {
	out := make([]byte, 0, len(b))
	for _, c := range b {
		if c >= 0x20 && c < 0x7f {
			out = append(out, c)
		}
	}
	return string(out)
}

// Shutdown closes idle connections.
func (e *otlpExporter) Shutdown(context.Context) error {
	e.client.CloseIdleConnections()
	return nil
}

// Protobuf wire format: the field numbers of opentelemetry-proto's
// trace/v1, common/v1, resource/v1 and collector/trace/v1 messages.
const (
	wireVarint  = 0
	wireFixed64 = 1
	wireBytes   = 2
	wireFixed32 = 5
)

func appendTag(b []byte, field, wire int) []byte {
	return binary.AppendUvarint(b, uint64(field)<<3|uint64(wire))
}

func appendBytesField(b []byte, field int, v []byte) []byte {
	b = appendTag(b, field, wireBytes)
	b = binary.AppendUvarint(b, uint64(len(v)))
	return append(b, v...)
}

func appendStringField(b []byte, field int, v string) []byte {
	if v == "" {
		return b
	}
	b = appendTag(b, field, wireBytes)
	b = binary.AppendUvarint(b, uint64(len(v)))
	return append(b, v...)
}

func appendVarintField(b []byte, field int, v uint64) []byte {
	if v == 0 {
		return b
	}
	return binary.AppendUvarint(appendTag(b, field, wireVarint), v)
}

func appendFixed64Field(b []byte, field int, v uint64) []byte {
	if v == 0 {
		return b
	}
	return binary.LittleEndian.AppendUint64(appendTag(b, field, wireFixed64), v)
}

func appendFixed32Field(b []byte, field int, v uint32) []byte {
	if v == 0 {
		return b
	}
	return binary.LittleEndian.AppendUint32(appendTag(b, field, wireFixed32), v)
}

// appendMessage appends a length-delimited sub-message that enc writes.
func appendMessage(b []byte, field int, enc func([]byte) []byte) []byte {
	return appendBytesField(b, field, enc(nil))
}

// encodeRequest is an ExportTraceServiceRequest of spans, grouped by
// resource and instrumentation scope.
func encodeRequest(spans []sdktrace.ReadOnlySpan) []byte {
	type scopeKey struct {
		res   attribute.Distinct
		scope instrumentation.Scope
	}
	var resOrder []attribute.Distinct
	resources := map[attribute.Distinct]*resource.Resource{}
	var scopeOrder []scopeKey
	byScope := map[scopeKey][]sdktrace.ReadOnlySpan{}
	for _, s := range spans {
		res := s.Resource()
		rk := res.Equivalent()
		if _, ok := resources[rk]; !ok {
			resources[rk] = res
			resOrder = append(resOrder, rk)
		}
		sk := scopeKey{rk, s.InstrumentationScope()}
		if _, ok := byScope[sk]; !ok {
			scopeOrder = append(scopeOrder, sk)
		}
		byScope[sk] = append(byScope[sk], s)
	}
	var out []byte
	for _, rk := range resOrder {
		res := resources[rk]
		out = appendMessage(out, 1, func(b []byte) []byte { // ResourceSpans
			b = appendMessage(b, 1, func(b []byte) []byte { // Resource
				for _, kv := range res.Attributes() {
					b = appendMessage(b, 1, func(b []byte) []byte { return appendKeyValue(b, kv) })
				}
				return b
			})
			for _, sk := range scopeOrder {
				if sk.res != rk {
					continue
				}
				b = appendMessage(b, 2, func(b []byte) []byte { // ScopeSpans
					b = appendMessage(b, 1, func(b []byte) []byte { // InstrumentationScope
						b = appendStringField(b, 1, sk.scope.Name)
						return appendStringField(b, 2, sk.scope.Version)
					})
					for _, s := range byScope[sk] {
						b = appendMessage(b, 2, func(b []byte) []byte { return appendSpan(b, s) })
					}
					return appendStringField(b, 3, sk.scope.SchemaURL)
				})
			}
			return appendStringField(b, 3, res.SchemaURL())
		})
	}
	return out
}

// appendSpan appends the fields of a trace/v1 Span.
func appendSpan(b []byte, s sdktrace.ReadOnlySpan) []byte {
	sc := s.SpanContext()
	tid, sid := sc.TraceID(), sc.SpanID()
	b = appendBytesField(b, 1, tid[:])
	b = appendBytesField(b, 2, sid[:])
	b = appendStringField(b, 3, sc.TraceState().String())
	if p := s.Parent(); p.SpanID().IsValid() {
		psid := p.SpanID()
		b = appendBytesField(b, 4, psid[:])
	}
	b = appendStringField(b, 5, s.Name())
	b = appendVarintField(b, 6, uint64(s.SpanKind()))
	b = appendFixed64Field(b, 7, unixNano(s.StartTime()))
	b = appendFixed64Field(b, 8, unixNano(s.EndTime()))
	for _, kv := range s.Attributes() {
		b = appendMessage(b, 9, func(b []byte) []byte { return appendKeyValue(b, kv) })
	}
	b = appendVarintField(b, 10, uint64(s.DroppedAttributes()))
	for _, ev := range s.Events() {
		b = appendMessage(b, 11, func(b []byte) []byte {
			b = appendFixed64Field(b, 1, unixNano(ev.Time))
			b = appendStringField(b, 2, ev.Name)
			for _, kv := range ev.Attributes {
				b = appendMessage(b, 3, func(b []byte) []byte { return appendKeyValue(b, kv) })
			}
			return appendVarintField(b, 4, uint64(ev.DroppedAttributeCount))
		})
	}
	b = appendVarintField(b, 12, uint64(s.DroppedEvents()))
	for _, l := range s.Links() {
		b = appendMessage(b, 13, func(b []byte) []byte {
			ltid, lsid := l.SpanContext.TraceID(), l.SpanContext.SpanID()
			b = appendBytesField(b, 1, ltid[:])
			b = appendBytesField(b, 2, lsid[:])
			b = appendStringField(b, 3, l.SpanContext.TraceState().String())
			for _, kv := range l.Attributes {
				b = appendMessage(b, 4, func(b []byte) []byte { return appendKeyValue(b, kv) })
			}
			b = appendVarintField(b, 5, uint64(l.DroppedAttributeCount))
			return appendFixed32Field(b, 6, spanFlags(l.SpanContext.TraceFlags(), l.SpanContext.IsRemote()))
		})
	}
	b = appendVarintField(b, 14, uint64(s.DroppedLinks()))
	if st := s.Status(); st.Code != codes.Unset {
		b = appendMessage(b, 15, func(b []byte) []byte {
			b = appendStringField(b, 2, st.Description)
			code := uint64(1) // STATUS_CODE_OK
			if st.Code == codes.Error {
				code = 2 // STATUS_CODE_ERROR
			}
			return appendVarintField(b, 3, code)
		})
	}
	return appendFixed32Field(b, 16, spanFlags(sc.TraceFlags(), s.Parent().IsRemote()))
}

// spanFlags is a Span's or Link's flags: the W3C trace flags, and
// whether the parent (or linked) span context is known to be remote.
func spanFlags(f interface{ IsSampled() bool }, remote bool) uint32 {
	var flags uint32 = 0x100 // SPAN_FLAGS_CONTEXT_HAS_IS_REMOTE_MASK
	if f.IsSampled() {
		flags |= 0x01
	}
	if remote {
		flags |= 0x200 // SPAN_FLAGS_CONTEXT_IS_REMOTE_MASK
	}
	return flags
}

func unixNano(t time.Time) uint64 {
	if t.IsZero() {
		return 0
	}
	return uint64(t.UnixNano())
}

// appendKeyValue appends the fields of a common/v1 KeyValue.
func appendKeyValue(b []byte, kv attribute.KeyValue) []byte {
	b = appendStringField(b, 1, string(kv.Key))
	return appendMessage(b, 2, func(b []byte) []byte { return appendAnyValue(b, kv.Value) })
}

// appendAnyValue appends the fields of a common/v1 AnyValue.
func appendAnyValue(b []byte, v attribute.Value) []byte {
	switch v.Type() {
	case attribute.BOOL:
		return appendScalar(b, v.AsBool())
	case attribute.INT64:
		return appendScalar(b, v.AsInt64())
	case attribute.FLOAT64:
		return appendScalar(b, v.AsFloat64())
	case attribute.STRING:
		return appendScalar(b, v.AsString())
	case attribute.BOOLSLICE:
		return appendArray(b, v.AsBoolSlice())
	case attribute.INT64SLICE:
		return appendArray(b, v.AsInt64Slice())
	case attribute.FLOAT64SLICE:
		return appendArray(b, v.AsFloat64Slice())
	case attribute.STRINGSLICE:
		return appendArray(b, v.AsStringSlice())
	}
	return appendScalar(b, v.Emit())
}

// appendScalar appends an AnyValue's oneof field for x (zero values are
// written too: the oneof says which it is).
func appendScalar[T bool | int64 | float64 | string](b []byte, x T) []byte {
	switch x := any(x).(type) {
	case string: // string_value = 1
		b = appendTag(b, 1, wireBytes)
		b = binary.AppendUvarint(b, uint64(len(x)))
		return append(b, x...)
	case bool: // bool_value = 2
		v := uint64(0)
		if x {
			v = 1
		}
		return binary.AppendUvarint(appendTag(b, 2, wireVarint), v)
	case int64: // int_value = 3
		return binary.AppendUvarint(appendTag(b, 3, wireVarint), uint64(x))
	case float64: // double_value = 4
		return binary.LittleEndian.AppendUint64(appendTag(b, 4, wireFixed64), math.Float64bits(x))
	}
	return b
}

// appendArray appends an AnyValue's array_value (5): an ArrayValue whose
// values (1) are xs.
func appendArray[T bool | int64 | float64 | string](b []byte, xs []T) []byte {
	return appendMessage(b, 5, func(b []byte) []byte {
		for _, x := range xs {
			b = appendMessage(b, 1, func(b []byte) []byte { return appendScalar(b, x) })
		}
		return b
	})
}
