package telemetry

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// The batch span processor.
//
// Ended spans are exported in batches by a goroutine, as the SDK's
// BatchSpanProcessor does, with the same OTEL_BSP_* variables and
// defaults: a batch of OTEL_BSP_MAX_EXPORT_BATCH_SIZE (512) spans is
// exported as soon as it is full, whatever has ended at least every
// OTEL_BSP_SCHEDULE_DELAY (5000 ms), each export within
// OTEL_BSP_EXPORT_TIMEOUT (30000 ms); at most OTEL_BSP_MAX_QUEUE_SIZE
// (2048) spans wait, more are dropped (and counted) while the exporter
// is behind. The difference is the hand-over: the SDK's processor sends
// every span through a channel to its goroutine, which wakes that
// goroutine once per span (on a loop making two spans per iteration, the
// scheduler's work of those wake-ups cost more than the spans); this one
// encodes a span into a buffer under a mutex and wakes the goroutine once
// a batch.

// batchOptions are the OTEL_BSP_* settings.
type batchOptions struct {
	delay, timeout      time.Duration
	maxQueue, batchSize int
}

// batchOptionsFromEnv reads OTEL_BSP_*: an unset, non-numeric or
// non-positive value is the default, as for the SDK.
func batchOptionsFromEnv() batchOptions {
	envInt := func(name string, def int) int {
		if n, err := strconv.Atoi(strings.TrimSpace(os.Getenv(name))); err == nil && n > 0 {
			return n
		}
		return def
	}
	o := batchOptions{
		delay:     time.Duration(envInt("OTEL_BSP_SCHEDULE_DELAY", sdktrace.DefaultScheduleDelay)) * time.Millisecond,
		timeout:   time.Duration(envInt("OTEL_BSP_EXPORT_TIMEOUT", sdktrace.DefaultExportTimeout)) * time.Millisecond,
		maxQueue:  envInt("OTEL_BSP_MAX_QUEUE_SIZE", sdktrace.DefaultMaxQueueSize),
		batchSize: envInt("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", sdktrace.DefaultMaxExportBatchSize),
	}
	o.batchSize = min(o.batchSize, o.maxQueue)
	return o
}

// spanExporter exports a batch of ended spans (otlpExporter): spans
// holds n of them, each encoded as an OTLP ScopeSpans's spans field
// (appendSpanField).
type spanExporter interface {
	ExportSpans(ctx context.Context, spans []byte, n int) error
	Shutdown(ctx context.Context) error
}

// batcher exports ended, sampled spans in batches. A span is encoded
// (OTLP protobuf) when it ends, into the batcher's pending buffer: what
// waits for export is bytes, which the garbage collector does not scan,
// and the span's record goes back to its pool at once.
type batcher struct {
	exp spanExporter
	o   batchOptions

	mu      sync.Mutex
	pending []byte // the spans ended, not yet taken by the goroutine
	ends    []int  // where each span of pending ends
	spare   []byte // the goroutine's last buffers, for reuse
	spareE  []int
	dropped int
	closed  bool

	kick    chan struct{}      // a batch is full (buffered: one wake-up pending at most)
	flushes chan chan struct{} // export everything, then close the channel
	stop    chan struct{}
	done    chan struct{} // the goroutine has returned
	once    sync.Once
}

func newBatcher(exp spanExporter, o batchOptions) *batcher {
	b := &batcher{exp: exp, o: o, kick: make(chan struct{}, 1), flushes: make(chan chan struct{}),
		stop: make(chan struct{}), done: make(chan struct{})}
	go b.run()
	return b
}

// spanBytes is about what an encoded span of skein's takes.
const spanBytes = 512

// onEnd encodes an ended, sampled span for export, or drops it when
// maxQueue spans wait already.
func (b *batcher) onEnd(s *record) {
	b.mu.Lock()
	switch {
	case b.closed:
	case len(b.ends) >= b.o.maxQueue:
		b.dropped++
	default:
		if b.pending == nil {
			// room for a batch of spans of the usual size: less to
			// copy than doubling from nothing
			b.pending = make([]byte, 0, min(b.o.batchSize, b.o.maxQueue)*spanBytes)
		}
		b.pending = appendSpanField(b.pending, s)
		b.ends = append(b.ends, len(b.pending))
		if len(b.ends) == b.o.batchSize {
			select {
			case b.kick <- struct{}{}:
			default: // already woken
			}
		}
	}
	b.mu.Unlock()
}

// run exports the full batches when one is, and everything pending when
// the schedule delay has passed and on ForceFlush; on stop it exports
// what is left and returns.
func (b *batcher) run() {
	defer close(b.done)
	timer := time.NewTimer(b.o.delay)
	defer timer.Stop()
	for {
		var flushed chan struct{}
		all := true
		select {
		case <-b.kick:
			all = false
		case <-timer.C:
		case flushed = <-b.flushes:
		case <-b.stop:
			b.export(true)
			return
		}
		b.export(all)
		if flushed != nil {
			close(flushed)
		}
		if all {
			if !timer.Stop() {
				select {
				case <-timer.C:
				default:
				}
			}
			timer.Reset(b.o.delay)
		}
	}
}

// export takes the pending spans (only whole batches unless all) and
// exports them in batches.
func (b *batcher) export(all bool) {
	b.mu.Lock()
	spans, ends := b.pending, b.ends
	n := len(ends)
	if !all {
		n -= n % b.o.batchSize
	}
	size := 0
	if n > 0 {
		size = ends[n-1]
	}
	// The spans left (of a batch not yet full) move to the spare
	// buffers, which become the pending ones.
	b.pending = append(b.spare[:0], spans[size:]...)
	b.ends = b.spareE[:0]
	for _, e := range ends[n:] {
		b.ends = append(b.ends, e-size)
	}
	b.spare, b.spareE = nil, nil
	dropped := b.dropped
	b.dropped = 0
	b.mu.Unlock()
	if dropped > 0 {
		otel.Handle(fmt.Errorf("telemetry: %d spans dropped: more than OTEL_BSP_MAX_QUEUE_SIZE=%d were waiting for the exporter", dropped, b.o.maxQueue))
	}
	from := 0
	for i := 0; i < n; i += b.o.batchSize {
		j := min(i+b.o.batchSize, n)
		ctx, cancel := context.WithTimeout(context.Background(), b.o.timeout)
		if err := b.exp.ExportSpans(ctx, spans[from:ends[j-1]], j-i); err != nil {
			otel.Handle(err)
		}
		cancel()
		from = ends[j-1]
	}
	b.mu.Lock()
	if b.spare == nil {
		b.spare, b.spareE = spans[:0], ends[:0]
	}
	b.mu.Unlock()
}

// ForceFlush exports every span ended so far, within ctx.
func (b *batcher) ForceFlush(ctx context.Context) error {
	flushed := make(chan struct{})
	select {
	case b.flushes <- flushed:
	case <-b.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case <-flushed:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Shutdown exports the spans not yet exported and shuts the exporter
// down, within ctx. Spans that end later are not exported.
func (b *batcher) Shutdown(ctx context.Context) error {
	var err error
	b.once.Do(func() {
		b.mu.Lock()
		b.closed = true
		b.mu.Unlock()
		close(b.stop)
		select {
		case <-b.done:
		case <-ctx.Done():
			err = ctx.Err()
			return
		}
		err = b.exp.Shutdown(ctx)
	})
	return err
}
