package telemetry

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/embedded"
)

// The span recorder.
//
// skein records its spans itself rather than with the OpenTelemetry
// SDK's TracerProvider: on an in-memory agent loop (a model call and a
// tool call per iteration, tens of microseconds each) the SDK's span
// (a new recording span, an attribute slice grown per call and
// de-duplicated through a map, and a copy of it all when it ends, for
// each span) cost more than the target of a tenth of the iteration. The
// recorder implements the OpenTelemetry trace API (trace.Tracer,
// trace.Span), so spans travel in contexts as the API's do and the W3C
// TraceContext propagator reads and writes them; it keeps the SDK's
// semantics where skein's spans use them:
//
//   - the sampler is the SDK's, chosen by OTEL_TRACES_SAMPLER and
//     OTEL_TRACES_SAMPLER_ARG as the SDK chooses it (default
//     parentbased_always_on);
//   - the span limits are the SDK's (sdktrace.NewSpanLimits, which reads
//     OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT, OTEL_SPAN_ATTRIBUTE_VALUE_LENGTH_LIMIT,
//     OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT, OTEL_SPAN_EVENT_COUNT_LIMIT, ...):
//     an attribute set again replaces the earlier value, attributes over
//     the count limit are dropped and counted, string values are cut to
//     the length limit, the oldest events and links are evicted;
//   - the resource is the SDK's (OTEL_SERVICE_NAME,
//     OTEL_RESOURCE_ATTRIBUTES);
//   - RecordError adds an "exception" event with exception.type and
//     exception.message, SetStatus keeps Ok over Error over Unset.
//
// A span's record is taken from a pool and returned to it when the span
// ends, once encoded for export (batch.go); the trace.Span a context
// holds is a small handle naming the record and its generation, so that
// a handle kept after its span ended finds its record reused and does
// nothing.

// recorder is skein's trace.Tracer: it starts spans and hands the ended,
// sampled ones to its batcher.
//
// (Its first 64 bytes are what every span reads, kept together: on a
// loop, a span's start finds most of what it reads evicted since the
// last span, and each cache line it reads then costs about as much as
// the rest of its work. So the limits a span applies are copied there,
// and the wall clock's reading is kept there rather than behind a
// pointer.)
type recorder struct {
	proc                  *batcher
	attrCount, attrLength int // limits.AttributeCountLimit and AttributeValueLengthLimit
	// the wall clock as now last read it: unix nanoseconds minus the
	// monotonic reading then, until the monotonic reading wallUntil
	wallOffset, wallUntil atomic.Int64
	base                  time.Time // the reference of the monotonic readings spans keep (one reading: time.Since(base))

	embedded.Tracer
	sampler sdktrace.Sampler
	limits  sdktrace.SpanLimits
	res     *resource.Resource
	tp      *tracerProvider
}

var _ trace.Tracer = (*recorder)(nil)

// tracerProvider is what a span's TracerProvider method returns: every
// tracer it gives is the recorder.
type tracerProvider struct {
	embedded.TracerProvider
	r *recorder
}

func (p *tracerProvider) Tracer(string, ...trace.TracerOption) trace.Tracer { return p.r }

func newRecorder(res *resource.Resource, exp spanExporter, o batchOptions) *recorder {
	r := &recorder{sampler: samplerFromEnv(), limits: sdktrace.NewSpanLimits(), res: res, base: time.Now()}
	r.attrCount, r.attrLength = r.limits.AttributeCountLimit, r.limits.AttributeValueLengthLimit
	r.tp = &tracerProvider{r: r}
	r.proc = newBatcher(exp, o)
	return r
}

// samplerFromEnv is the sampler OTEL_TRACES_SAMPLER and
// OTEL_TRACES_SAMPLER_ARG choose, as the SDK reads them: an unknown
// sampler or a bad argument is reported through otel.Handle and the
// default (or a ratio of 1) used. The default, parentbased_always_on,
// is nil: the recorder decides it itself, without the SDK's context
// look-ups.
func samplerFromEnv() sdktrace.Sampler {
	name := strings.ToLower(strings.TrimSpace(os.Getenv("OTEL_TRACES_SAMPLER")))
	arg := strings.TrimSpace(os.Getenv("OTEL_TRACES_SAMPLER_ARG"))
	ratio := func() sdktrace.Sampler {
		if arg == "" {
			return sdktrace.TraceIDRatioBased(1)
		}
		v, err := strconv.ParseFloat(arg, 64)
		switch {
		case err != nil:
			otel.Handle(fmt.Errorf("parsing sampler argument: %v", err))
			v = 1
		case v < 0:
			otel.Handle(fmt.Errorf("invalid trace ID ratio: less than 0.0"))
			v = 1
		case v > 1:
			otel.Handle(fmt.Errorf("invalid trace ID ratio: greater than 1.0"))
			v = 1
		}
		return sdktrace.TraceIDRatioBased(v)
	}
	switch name {
	case "always_on":
		return sdktrace.AlwaysSample()
	case "always_off":
		return sdktrace.NeverSample()
	case "traceidratio":
		return ratio()
	case "", "parentbased_always_on":
		return nil
	case "parentbased_always_off":
		return sdktrace.ParentBased(sdktrace.NeverSample())
	case "parentbased_traceidratio":
		return sdktrace.ParentBased(ratio())
	}
	otel.Handle(fmt.Errorf("unsupported sampler: %s", name))
	return nil
}

// Start starts a span (trace.Tracer).
func (r *recorder) Start(ctx context.Context, name string, opts ...trace.SpanStartOption) (context.Context, trace.Span) {
	if ctx == nil {
		ctx = context.Background()
	}
	cfg := trace.NewSpanStartConfig(opts...)
	ctx, s, d := r.start(ctx, nil, "", name, cfg.SpanKind(), &cfg)
	if d != nil {
		d.mu.Unlock()
	}
	return ctx, s
}

// start starts a span of kind named "op name" (op or name alone when
// the other is empty: the two are joined when the span is encoded) as
// configured by cfg (nil for the helpers' spans: none of its options),
// returning ctx with it and, when it records, its record still locked
// (the caller sets its attributes, then unlocks it): a span is locked
// once as it starts. t is the Tracer ctx carries (From), which the
// returned context answers without looking further (nil: unknown).
//
// (A span's start reads as little memory as it can besides the span's
// own: on a loop, what it reads has mostly left the processor's caches
// since the last span, and each such read costs about as much as the
// rest of the start. So the helpers pass no SpanConfig, and ids are
// checked against zero values rather than the API's IsValid, which
// reads package variables.)
func (r *recorder) start(ctx context.Context, t *Tracer, op, name string, kind trace.SpanKind, cfg *trace.SpanConfig) (context.Context, *span, *record) {
	var psc trace.SpanContext
	if cfg != nil && cfg.NewRoot() {
		ctx = trace.ContextWithSpanContext(ctx, psc)
	} else {
		psc = parentSpanContext(ctx)
	}
	tid := psc.TraceID()
	parentValid := tid != trace.TraceID{} && psc.SpanID() != trace.SpanID{}
	if tid == (trace.TraceID{}) {
		tid = newTraceID()
	}
	var sr sdktrace.SamplingResult
	if r.sampler == nil {
		// parentbased_always_on, as the SDK's ParentBased(AlwaysSample())
		// decides it: sampled unless the parent was not
		sr.Decision, sr.Tracestate = sdktrace.RecordAndSample, psc.TraceState()
		if parentValid && !psc.IsSampled() {
			sr.Decision = sdktrace.Drop
		}
	} else {
		p := sdktrace.SamplingParameters{ParentContext: ctx, TraceID: tid, Name: spanName(op, name), Kind: kind}
		if cfg != nil {
			p.Attributes, p.Links = cfg.Attributes(), cfg.Links()
		}
		sr = r.sampler.ShouldSample(p)
	}
	flags := psc.TraceFlags() &^ trace.FlagsSampled
	if sr.Decision == sdktrace.RecordAndSample {
		flags |= trace.FlagsSampled
	}
	c := &spanCtx{Context: ctx, t: t, s: span{tid: tid, sid: newSpanID(), flags: flags, r: r}}
	s := &c.s
	if sr.Tracestate.Len() > 0 {
		ts := sr.Tracestate
		s.ts = &ts
	}
	var d *record
	if sr.Decision != sdktrace.Drop {
		var start, mono int64
		if cfg != nil && !cfg.Timestamp().IsZero() {
			start, mono = cfg.Timestamp().UnixNano(), -1
		} else {
			start, mono = r.now()
		}
		d = records.Get().(*record)
		d.mu.Lock()
		d.gen++
		d.tid, d.sid, d.flags, d.ts = tid, s.sid, flags, s.ts
		d.psid, d.parentRemote = psc.SpanID(), psc.IsRemote()
		d.op, d.name, d.kind, d.start, d.mono = op, name, trace.ValidateSpanKind(kind), start, mono
		s.d, s.gen = d, d.gen
		for i := range sr.Attributes {
			r.setAttr(d, &sr.Attributes[i])
		}
		if cfg != nil {
			for _, l := range cfg.Links() {
				r.addLink(d, l)
			}
			kvs := cfg.Attributes()
			for i := range kvs {
				r.setAttr(d, &kvs[i])
			}
		}
	}
	if currentSpanKey == nil {
		return trace.ContextWithSpan(ctx, s), s, d
	}
	return c, s, d
}

// parentSpanContext is the span context of ctx's current span
// (trace.SpanContextFromContext), read straight from the span when it
// is one of skein's.
func parentSpanContext(ctx context.Context) trace.SpanContext {
	if currentSpanKey == nil {
		return trace.SpanContextFromContext(ctx)
	}
	switch p := ctx.Value(currentSpanKey).(type) {
	case *span:
		return p.SpanContext()
	case trace.Span:
		return p.SpanContext()
	}
	return trace.SpanContext{}
}

// now is the time a span starts, in unix nanoseconds, and the monotonic
// clock then (since r.base): the wall clock read at most every
// clockPeriod, advanced by the monotonic clock in between (time.Now
// reads both clocks, several times the cost of reading the monotonic
// one, and a loop of quick calls starts two spans an iteration). A step
// of the wall clock shows in the spans within clockPeriod.
func (r *recorder) now() (unix, mono int64) {
	mono = int64(time.Since(r.base))
	if mono < r.wallUntil.Load() {
		return mono + r.wallOffset.Load(), mono
	}
	t := time.Now()
	mono = int64(t.Sub(r.base))
	r.wallOffset.Store(t.UnixNano() - mono)
	r.wallUntil.Store(mono + int64(clockPeriod))
	return t.UnixNano(), mono
}

const clockPeriod = time.Second

// spanCtx is the context a span starts: its parent's, with the span as
// its current span (trace.SpanFromContext). The span's handle and the
// context are one allocation, where the handle and
// trace.ContextWithSpan's context would be two: a loop of quick model
// and tool calls starts two spans an iteration. It keeps the Tracer its
// parent carries (when known), so that From and the next span's start
// stop at the nearest span instead of walking every context below it.
type spanCtx struct {
	context.Context
	t *Tracer
	s span
}

// Value is the span for the OpenTelemetry API's current-span key, the
// Tracer for With's, else the parent's value.
func (c *spanCtx) Value(key any) any {
	if _, ok := key.(tracerKey); ok { // (a type check: no comparison of values)
		if c.t != nil {
			return c.t
		}
	} else if key == currentSpanKey {
		return &c.s
	}
	return c.Context.Value(key)
}

// currentSpanKey is the context key under which the OpenTelemetry API
// keeps the current span (unexported: it is read once, by asking a
// context that notes the key trace.SpanFromContext looks up). When it
// cannot be found (nil), spans use trace.ContextWithSpan.
// TestSpanContextKey checks that a started span is the current span of
// its context, as trace.SpanFromContext sees it.
var currentSpanKey = func() any {
	p := &keyProbe{Context: context.Background()}
	trace.SpanFromContext(p)
	if len(p.keys) != 1 {
		return nil
	}
	return p.keys[0]
}()

// keyProbe notes the keys asked of it.
type keyProbe struct {
	context.Context
	keys []any
}

func (p *keyProbe) Value(key any) any {
	p.keys = append(p.keys, key)
	return nil
}

// spanName is "op name", or op or name alone when the other is empty.
func spanName(op, name string) string {
	switch {
	case op == "":
		return name
	case name == "":
		return op
	}
	return op + " " + name
}

// newTraceID and newSpanID are random, non-zero ids.
func newTraceID() (id trace.TraceID) {
	for !id.IsValid() {
		a, b := rand.Uint64(), rand.Uint64()
		for i := range 8 {
			id[i], id[8+i] = byte(a>>(8*i)), byte(b>>(8*i))
		}
	}
	return id
}

func newSpanID() (id trace.SpanID) {
	for !id.IsValid() {
		a := rand.Uint64()
		for i := range 8 {
			id[i] = byte(a >> (8 * i))
		}
	}
	return id
}

// record is what a recording span holds: written under mu until the span
// ends, then encoded for export. (Its fields are ordered by use: every
// span writes the first three cache lines and its attributes; the last
// fields only spans with events, links or an error status.)
type record struct {
	mu  sync.Mutex
	gen uint64 // incremented each time the record is reused
	// the span context (a span's own is never remote) and the parent's
	// span id
	tid        trace.TraceID
	sid, psid  trace.SpanID
	start, end int64 // unix nanoseconds
	mono       int64 // the monotonic clock at start (since the recorder's base), or -1 for a start given by the caller

	kind         trace.SpanKind
	status       codes.Code
	flags        trace.TraceFlags
	parentRemote bool
	ended        bool
	op, name     string  // the span's name is "op name" (spanName)
	attrs        attrSet // encoded (attrs.go)
	attrsAt      [16]attrPos
	attrsBuf     [512]byte

	ts            *trace.TraceState // the span's trace state, nil when empty
	events        []event
	links         []link
	statusDesc    string
	droppedEvents int
	droppedLinks  int
}

type event struct {
	name    string
	time    time.Time
	attrs   []attribute.KeyValue
	dropped int
}

type link struct {
	sc      trace.SpanContext
	attrs   []attribute.KeyValue
	dropped int
}

var records = sync.Pool{New: func() any {
	d := new(record)
	d.attrs.buf, d.attrs.at = d.attrsBuf[:0], d.attrsAt[:0]
	return d
}}

// reset empties an ended span's record for reuse (with mu held): handles
// still held find it no longer theirs.
func (d *record) reset() {
	d.gen++
	d.ended = false
	d.attrs.buf, d.attrs.at, d.attrs.dropped, d.attrs.lengths = d.attrs.buf[:0], d.attrs.at[:0], 0, 0
	if cap(d.attrs.buf) > 64<<10 { // (content captured on a span)
		d.attrs.buf = d.attrsBuf[:0]
	}
	clear(d.events)
	d.events = d.events[:0]
	clear(d.links)
	d.links = d.links[:0]
	d.droppedEvents, d.droppedLinks = 0, 0
	d.status = codes.Unset // (statusDesc goes with Error only, and the next start sets the span contexts and name)
}

// span is the trace.Span skein's spans are: the span context, and the
// record while the span is recording (nil when the sampler dropped it).
// It is allocated with its context (spanCtx), twice a loop iteration:
// its fields are kept to 72 bytes (the span context's, a span's own
// being never remote, and its trace state only when there is one).
type span struct {
	*spanAPI
	tid   trace.TraceID
	sid   trace.SpanID
	flags trace.TraceFlags
	ts    *trace.TraceState // nil when empty
	r     *recorder
	d     *record
	gen   uint64
}

// spanAPI makes span a trace.Span (the API's embedded interface, behind
// a pointer that stays nil: its one method is never called).
type spanAPI struct{ embedded.Span }

var _ trace.Span = (*span)(nil)

// lock locks and returns the span's record when it is still recording,
// else returns nil.
func (s *span) lock() *record {
	if s == nil || s.d == nil {
		return nil
	}
	s.d.mu.Lock()
	if s.d.gen != s.gen || s.d.ended {
		s.d.mu.Unlock()
		return nil
	}
	return s.d
}

func (s *span) SpanContext() trace.SpanContext {
	c := trace.SpanContextConfig{TraceID: s.tid, SpanID: s.sid, TraceFlags: s.flags}
	if s.ts != nil {
		c.TraceState = *s.ts
	}
	return trace.NewSpanContext(c)
}

func (s *span) IsRecording() bool {
	d := s.lock()
	if d == nil {
		return false
	}
	d.mu.Unlock()
	return true
}

func (s *span) TracerProvider() trace.TracerProvider { return s.r.tp }

func (s *span) SetName(name string) {
	if d := s.lock(); d != nil {
		d.op, d.name = "", name
		d.mu.Unlock()
	}
}

// SetStatus sets the status: Ok is kept over Error and Error over Unset;
// the description only goes with Error.
func (s *span) SetStatus(code codes.Code, description string) {
	d := s.lock()
	if d == nil {
		return
	}
	if d.status <= code {
		d.status, d.statusDesc = code, ""
		if code == codes.Error {
			d.statusDesc = description
		}
	}
	d.mu.Unlock()
}

// SetAttributes sets attributes: a key set again takes the new value;
// invalid attributes and those over the count limit are dropped (and
// counted); values are cut to the length limit.
func (s *span) SetAttributes(kvs ...attribute.KeyValue) {
	if len(kvs) == 0 {
		return
	}
	d := s.lock()
	if d == nil {
		return
	}
	for i := range kvs {
		s.r.setAttr(d, &kvs[i]) // (a KeyValue is 64 bytes: not copied)
	}
	d.mu.Unlock()
}

// addAttrs adds kvs to the attributes of an event or link, attrs
// (limit: the count limit, negative for none), returning them and the
// number dropped.
func (r *recorder) addAttrs(attrs []attribute.KeyValue, dropped, limit int, kvs []attribute.KeyValue) ([]attribute.KeyValue, int) {
	lengthLimit := r.limits.AttributeValueLengthLimit
next:
	for i := range kvs {
		kv := &kvs[i] // (a KeyValue is 64 bytes: not copied more than once)
		if !kv.Valid() {
			dropped++
			continue
		}
		j := 0
		for j < len(attrs) && attrs[j].Key != kv.Key {
			j++
		}
		switch {
		case j < len(attrs):
			attrs[j] = *kv
		case limit >= 0 && len(attrs) >= limit:
			dropped++
			continue next
		default:
			attrs = append(attrs, *kv)
		}
		if lengthLimit >= 0 {
			attrs[j] = truncateAttr(attrs[j], lengthLimit)
		}
	}
	return attrs, dropped
}

// truncateAttr cuts a string (or string slice) value to limit
// characters; a negative limit is none.
func truncateAttr(kv attribute.KeyValue, limit int) attribute.KeyValue {
	if limit < 0 {
		return kv
	}
	switch kv.Value.Type() {
	case attribute.STRING:
		if v := kv.Value.AsString(); len(v) > limit {
			kv.Value = attribute.StringValue(truncate(v, limit))
		}
	case attribute.STRINGSLICE:
		vs := kv.Value.AsStringSlice()
		if slices.ContainsFunc(vs, func(v string) bool { return len(v) > limit }) {
			for i, v := range vs {
				vs[i] = truncate(v, limit)
			}
			kv.Value = attribute.StringSliceValue(vs)
		}
	}
	return kv
}

// truncate is s's first limit characters (invalid UTF-8 removed).
func truncate(s string, limit int) string {
	if len(s) <= limit {
		return s
	}
	if !utf8.ValidString(s) {
		s = strings.ToValidUTF8(s, "")
	}
	n := 0
	for i := range s {
		if n == limit {
			return s[:i]
		}
		n++
	}
	return s
}

// AddEvent adds an event; the oldest is evicted past the event limit.
func (s *span) AddEvent(name string, opts ...trace.EventOption) {
	d := s.lock()
	if d == nil {
		return
	}
	s.addEvent(d, name, opts)
	d.mu.Unlock()
}

func (s *span) addEvent(d *record, name string, opts []trace.EventOption) {
	cfg := trace.NewEventConfig(opts...)
	limits := s.r.limits
	e := event{name: name, time: cfg.Timestamp()}
	e.attrs, e.dropped = s.r.addAttrs(nil, 0, limits.AttributePerEventCountLimit, cfg.Attributes())
	if limits.EventCountLimit == 0 {
		d.droppedEvents++
		return
	}
	if limits.EventCountLimit > 0 && len(d.events) >= limits.EventCountLimit {
		d.events = append(d.events[:0], d.events[1:]...)
		d.droppedEvents++
	}
	d.events = append(d.events, e)
}

// RecordError adds an "exception" event of err (its type and message).
func (s *span) RecordError(err error, opts ...trace.EventOption) {
	if err == nil {
		return
	}
	d := s.lock()
	if d == nil {
		return
	}
	opts = append(opts, trace.WithAttributes(attribute.String("exception.type", typeName(err)),
		attribute.String("exception.message", err.Error())))
	s.addEvent(d, "exception", opts)
	d.mu.Unlock()
}

// typeName is the SDK's exception.type of v: package path and type name.
func typeName(v any) string {
	t := reflect.TypeOf(v)
	if t.PkgPath() == "" && t.Name() == "" {
		return t.String()
	}
	return t.PkgPath() + "." + t.Name()
}

// AddLink adds a link; the oldest is evicted past the link limit.
func (s *span) AddLink(l trace.Link) {
	if !l.SpanContext.IsValid() && len(l.Attributes) == 0 && l.SpanContext.TraceState().Len() == 0 {
		return
	}
	d := s.lock()
	if d == nil {
		return
	}
	s.r.addLink(d, l)
	d.mu.Unlock()
}

// addLink adds l to the record d (locked); the oldest is evicted past
// the link limit.
func (r *recorder) addLink(d *record, l trace.Link) {
	if !l.SpanContext.IsValid() && len(l.Attributes) == 0 && l.SpanContext.TraceState().Len() == 0 {
		return
	}
	limits := r.limits
	k := link{sc: l.SpanContext}
	k.attrs, k.dropped = r.addAttrs(nil, 0, limits.AttributePerLinkCountLimit, l.Attributes)
	switch {
	case limits.LinkCountLimit == 0:
		d.droppedLinks++
	case limits.LinkCountLimit > 0 && len(d.links) >= limits.LinkCountLimit:
		d.links = append(append(d.links[:0], d.links[1:]...), k)
		d.droppedLinks++
	default:
		d.links = append(d.links, k)
	}
}

// End ends the span and hands it to the batcher when sampled (which
// encodes it), then returns its record to the pool; later calls do
// nothing.
func (s *span) End(opts ...trace.SpanEndOption) {
	if s == nil || s.d == nil {
		return
	}
	var end time.Time
	if len(opts) > 0 {
		cfg := trace.NewSpanEndConfig(opts...)
		end = cfg.Timestamp()
	}
	d := s.lock()
	if d == nil {
		return
	}
	switch {
	case !end.IsZero():
		d.end = end.UnixNano()
	case d.mono >= 0: // start + the monotonic time since
		d.end = d.start + int64(time.Since(s.r.base)) - d.mono
	default:
		d.end = time.Now().UnixNano()
	}
	d.ended = true
	if s.flags.IsSampled() {
		s.r.proc.onEnd(d)
	}
	d.reset()
	d.mu.Unlock()
	records.Put(d)
}
