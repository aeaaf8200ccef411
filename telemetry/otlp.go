package telemetry

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/binary"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/instrumentation"
	"go.opentelemetry.io/otel/sdk/resource"
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
			if !validHeader(strings.TrimSpace(k), strings.TrimSpace(v)) {
				return nil, fmt.Errorf("%s: %q is not a valid header", name, strings.TrimSpace(k))
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

// otlpExporter posts spans to an OTLP/HTTP endpoint (otlphttp.go). A
// request is the encoded spans as the batch processor holds them,
// between a head and a tail the exporter encodes (the resource's and the
// scope's fields once, at the start); gzip compresses them into a buffer
// it keeps.
type otlpExporter struct {
	cfg  *otlpConfig
	conn *otlpConn
	res  *resource.Resource

	resField, scopeField []byte // a ResourceSpans's resource field, a ScopeSpans's scope field
	resTail, scopeTail   []byte // their schema_url fields

	mu    sync.Mutex // one export at a time: they share the buffers
	head  []byte
	parts [][]byte
	zbuf  bytes.Buffer
	zw    *gzip.Writer
}

var _ spanExporter = (*otlpExporter)(nil)

// newOTLPExporter returns an exporter of spans of resource res and scope
// skein's (ScopeName).
func newOTLPExporter(cfg *otlpConfig, res *resource.Resource) *otlpExporter {
	e := &otlpExporter{cfg: cfg, conn: newOTLPConn(cfg), res: res}
	scope := instrumentation.Scope{Name: ScopeName}
	var m int
	e.resField, m = beginMessage(nil, 1) // Resource
	for _, kv := range res.Attributes() {
		e.resField = encodeKeyValue(e.resField, 1, kv)
	}
	e.resField = endMessage(e.resField, m)
	e.scopeField, m = beginMessage(nil, 1) // InstrumentationScope
	e.scopeField = appendStringField(e.scopeField, 1, scope.Name)
	e.scopeField = appendStringField(e.scopeField, 2, scope.Version)
	for it := scope.Attributes.Iter(); it.Next(); {
		e.scopeField = encodeKeyValue(e.scopeField, 3, it.Attribute())
	}
	e.scopeField = endMessage(e.scopeField, m)
	e.scopeTail = appendStringField(nil, 3, scope.SchemaURL)
	e.resTail = appendStringField(nil, 3, res.SchemaURL())
	return e
}

// encodeHead appends to b what precedes size bytes of spans fields in
// an ExportTraceServiceRequest of one ResourceSpans (e's resource)
// holding one ScopeSpans (e's scope); what follows them is e.scopeTail
// and e.resTail.
func (e *otlpExporter) encodeHead(b []byte, size int) []byte {
	ss := len(e.scopeField) + size + len(e.scopeTail)
	rs := len(e.resField) + 1 + uvarintLen(ss) + ss + len(e.resTail)
	b = appendTag(b, 1, wireBytes) // resource_spans
	b = binary.AppendUvarint(b, uint64(rs))
	b = append(b, e.resField...)
	b = appendTag(b, 2, wireBytes) // scope_spans
	b = binary.AppendUvarint(b, uint64(ss))
	return append(b, e.scopeField...)
}

func uvarintLen(x int) int { return uvarintLen64(uint64(x)) }

func uvarintLen64(x uint64) int {
	n := 1
	for x >= 0x80 {
		x >>= 7
		n++
	}
	return n
}

// ExportSpans posts one ExportTraceServiceRequest holding n spans,
// encoded in chunks (appendSpanField). It is done with the chunks when
// it returns (released is always true).
func (e *otlpExporter) ExportSpans(ctx context.Context, chunks [][]byte, n int) (released bool, err error) {
	if n == 0 {
		return true, nil
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	size := 0
	for _, c := range chunks {
		size += len(c)
	}
	e.head = e.encodeHead(e.head[:0], size)
	parts := append(append(append(e.parts[:0], e.head), chunks...), e.scopeTail, e.resTail)
	e.parts = parts
	length := len(e.head) + size + len(e.scopeTail) + len(e.resTail)
	if e.cfg.gzip {
		e.zbuf.Reset()
		if e.zw == nil {
			e.zw = gzip.NewWriter(&e.zbuf)
		} else {
			e.zw.Reset(&e.zbuf)
		}
		// Compressing into a bytes.Buffer cannot fail: the buffer's
		// Write never returns an error, so neither do these.
		for _, p := range parts {
			_, _ = e.zw.Write(p)
		}
		_ = e.zw.Close()
		parts, length = [][]byte{e.zbuf.Bytes()}, e.zbuf.Len()
	}
	ctx, cancel := context.WithTimeout(ctx, e.cfg.timeout)
	defer cancel()
	status, msg, err := e.conn.post(ctx, parts, length)
	if err != nil {
		return true, fmt.Errorf("otlp: exporting %d spans: %v", n, err)
	}
	if status < 200 || status > 299 {
		return true, fmt.Errorf("otlp: exporting %d spans: %d %s: %s", n, status, http.StatusText(status), strings.TrimSpace(printable(msg)))
	}
	return true, nil
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

// Shutdown closes the connection.
func (e *otlpExporter) Shutdown(context.Context) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.conn.close()
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

// beginMessage starts a length-delimited sub-message in place: it
// appends the field's tag and one byte for the length, and returns b
// and where the message's body starts (endMessage's argument). The
// body is then appended to b directly, with no buffer of its own.
func beginMessage(b []byte, field int) ([]byte, int) {
	b = append(appendTag(b, field, wireBytes), 0)
	return b, len(b)
}

// endMessage writes the length of the sub-message whose body starts at
// body (beginMessage) and ends at len(b). A body of 128 bytes or more
// needs a longer length, for which the body moves up.
func endMessage(b []byte, body int) []byte {
	if n := len(b) - body; n < 0x80 {
		b[body-1] = byte(n)
		return b
	}
	return placeLength(b, body, 1)
}

// appendSpanField appends s as a ScopeSpans's spans field (2). Two bytes
// are kept for the span's length, which fit the usual span (128 bytes
// to 16 KB): with beginMessage's one, nearly every span would move up a
// byte when it is written (on the loop's goroutine, as the span ends).
func appendSpanField(b []byte, s *record) []byte {
	b = append(appendTag(b, 2, wireBytes), 0, 0)
	body := len(b)
	return endMessage2(appendSpan(b, s), body)
}

// endMessage2 is endMessage for a body with two bytes kept before it.
func endMessage2(b []byte, body int) []byte {
	if n := len(b) - body; n >= 0x80 && n < 0x4000 {
		b[body-2], b[body-1] = byte(n)|0x80, byte(n>>7)
		return b
	}
	return placeLength(b, body, 2)
}

// placeLength writes the length of the sub-message whose body starts at
// body and ends at len(b) into the reserved bytes before body, moving
// the body down or up when its length's varint is shorter or longer.
func placeLength(b []byte, body, reserved int) []byte {
	n := len(b) - body
	var l [binary.MaxVarintLen64]byte
	k := binary.PutUvarint(l[:], uint64(n))
	if k > reserved {
		b = append(b, l[:k-reserved]...) // room for the longer length
	}
	start := body - reserved
	copy(b[start+k:], b[body:body+n])
	copy(b[start:], l[:k])
	return b[:start+k+n]
}

// appendSpan appends the fields of a trace/v1 Span.
func appendSpan(b []byte, s *record) []byte {
	b = appendBytesField(b, 1, s.tid[:])
	b = appendBytesField(b, 2, s.sid[:])
	if s.ts != nil {
		b = appendStringField(b, 3, s.ts.String())
	}
	if s.psid.IsValid() {
		b = appendBytesField(b, 4, s.psid[:])
	}
	b = appendSpanName(b, s.op, s.name)
	b = appendVarintField(b, 6, uint64(s.kind))
	b = appendFixed64Field(b, 7, uint64(s.start))
	b = appendFixed64Field(b, 8, uint64(s.end))
	b = append(b, s.attrs.buf...) // the attributes fields (attrs.go)
	b = appendVarintField(b, 10, uint64(s.attrs.dropped))
	for _, ev := range s.events {
		var e int
		b, e = beginMessage(b, 11)
		b = appendFixed64Field(b, 1, unixNano(ev.time))
		b = appendStringField(b, 2, ev.name)
		for _, kv := range ev.attrs {
			b = encodeKeyValue(b, 3, kv)
		}
		b = appendVarintField(b, 4, uint64(ev.dropped))
		b = endMessage(b, e)
	}
	b = appendVarintField(b, 12, uint64(s.droppedEvents))
	for _, l := range s.links {
		var m int
		b, m = beginMessage(b, 13)
		ltid, lsid := l.sc.TraceID(), l.sc.SpanID()
		b = appendBytesField(b, 1, ltid[:])
		b = appendBytesField(b, 2, lsid[:])
		if ts := l.sc.TraceState(); ts.Len() > 0 {
			b = appendStringField(b, 3, ts.String())
		}
		for _, kv := range l.attrs {
			b = encodeKeyValue(b, 4, kv)
		}
		b = appendVarintField(b, 5, uint64(l.dropped))
		b = appendFixed32Field(b, 6, spanFlags(l.sc.TraceFlags(), l.sc.IsRemote()))
		b = endMessage(b, m)
	}
	b = appendVarintField(b, 14, uint64(s.droppedLinks))
	if s.status != codes.Unset {
		var m int
		b, m = beginMessage(b, 15)
		b = appendStringField(b, 2, s.statusDesc)
		code := uint64(1) // STATUS_CODE_OK
		if s.status == codes.Error {
			code = 2 // STATUS_CODE_ERROR
		}
		b = appendVarintField(b, 3, code)
		b = endMessage(b, m)
	}
	return appendFixed32Field(b, 16, spanFlags(s.flags, s.parentRemote))
}

// appendSpanName appends a Span's name (5): "op name" (spanName).
func appendSpanName(b []byte, op, name string) []byte {
	if op == "" || name == "" {
		return appendStringField(b, 5, op+name)
	}
	b = appendTag(b, 5, wireBytes)
	b = binary.AppendUvarint(b, uint64(len(op)+1+len(name)))
	b = append(b, op...)
	b = append(b, ' ')
	return append(b, name...)
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

// encodeKeyValue appends kv as field, a common/v1 KeyValue.
func encodeKeyValue(b []byte, field int, kv attribute.KeyValue) []byte {
	var m, v int
	b, m = beginMessage(b, field)
	b = appendStringField(b, 1, string(kv.Key))
	b, v = beginMessage(b, 2) // AnyValue
	b = appendAnyValue(b, kv.Value)
	b = endMessage(b, v)
	return endMessage(b, m)
}

// appendAnyValue appends the fields of a common/v1 AnyValue.
func appendAnyValue(b []byte, v attribute.Value) []byte {
	switch v.Type() {
	case attribute.BOOL:
		return appendBool(b, v.AsBool())
	case attribute.INT64:
		return appendInt(b, v.AsInt64())
	case attribute.FLOAT64:
		return appendDouble(b, v.AsFloat64())
	case attribute.STRING:
		return appendString(b, v.AsString())
	case attribute.BOOLSLICE:
		return appendArray(b, v.AsBoolSlice(), appendBool)
	case attribute.INT64SLICE:
		return appendArray(b, v.AsInt64Slice(), appendInt)
	case attribute.FLOAT64SLICE:
		return appendArray(b, v.AsFloat64Slice(), appendDouble)
	case attribute.STRINGSLICE:
		return appendArray(b, v.AsStringSlice(), appendString)
	}
	return appendString(b, v.Emit())
}

// The AnyValue oneof fields (zero values are written too: the oneof
// says which it is).

func appendString(b []byte, x string) []byte { // string_value = 1
	b = appendTag(b, 1, wireBytes)
	b = binary.AppendUvarint(b, uint64(len(x)))
	return append(b, x...)
}

func appendBool(b []byte, x bool) []byte { // bool_value = 2
	v := uint64(0)
	if x {
		v = 1
	}
	return binary.AppendUvarint(appendTag(b, 2, wireVarint), v)
}

func appendInt(b []byte, x int64) []byte { // int_value = 3
	return binary.AppendUvarint(appendTag(b, 3, wireVarint), uint64(x))
}

func appendDouble(b []byte, x float64) []byte { // double_value = 4
	return binary.LittleEndian.AppendUint64(appendTag(b, 4, wireFixed64), math.Float64bits(x))
}

// appendArray appends an AnyValue's array_value (5): an ArrayValue whose
// values (1) are xs, each an AnyValue appendOne writes.
func appendArray[T any](b []byte, xs []T, appendOne func([]byte, T) []byte) []byte {
	var a int
	b, a = beginMessage(b, 5)
	for _, x := range xs {
		var v int
		b, v = beginMessage(b, 1)
		b = endMessage(appendOne(b, x), v)
	}
	return endMessage(b, a)
}
