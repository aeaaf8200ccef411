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
// appends a span to a slice under a mutex and wakes the goroutine once a
// batch.

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

// batcher is an sdktrace.SpanProcessor that exports ended, sampled spans
// in batches.
type batcher struct {
	exp sdktrace.SpanExporter
	o   batchOptions

	mu      sync.Mutex
	pending []sdktrace.ReadOnlySpan // ended, not yet taken by the goroutine
	spare   []sdktrace.ReadOnlySpan // the goroutine's last slice, for reuse
	dropped int
	closed  bool

	kick    chan struct{}      // a batch is full (buffered: one wake-up pending at most)
	flushes chan chan struct{} // export everything, then close the channel
	stop    chan struct{}
	done    chan struct{} // the goroutine has returned
	once    sync.Once
}

var _ sdktrace.SpanProcessor = (*batcher)(nil)

func newBatcher(exp sdktrace.SpanExporter, o batchOptions) *batcher {
	b := &batcher{exp: exp, o: o, kick: make(chan struct{}, 1), flushes: make(chan chan struct{}),
		stop: make(chan struct{}), done: make(chan struct{})}
	go b.run()
	return b
}

// OnStart does nothing: spans are exported when they end.
func (b *batcher) OnStart(context.Context, sdktrace.ReadWriteSpan) {}

// OnEnd queues s for export.
func (b *batcher) OnEnd(s sdktrace.ReadOnlySpan) {
	if !s.SpanContext().IsSampled() {
		return
	}
	b.mu.Lock()
	switch {
	case b.closed:
	case len(b.pending) >= b.o.maxQueue:
		b.dropped++
	default:
		b.pending = append(b.pending, s)
		if len(b.pending) == b.o.batchSize {
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
	n := len(b.pending)
	if !all {
		n -= n % b.o.batchSize
	}
	spans := b.pending[:n]
	b.pending = append(b.spare[:0], b.pending[n:]...)
	b.spare = nil
	dropped := b.dropped
	b.dropped = 0
	b.mu.Unlock()
	if dropped > 0 {
		otel.Handle(fmt.Errorf("telemetry: %d spans dropped: more than OTEL_BSP_MAX_QUEUE_SIZE=%d were waiting for the exporter", dropped, b.o.maxQueue))
	}
	for i := 0; i < len(spans); i += b.o.batchSize {
		batch := spans[i:min(i+b.o.batchSize, len(spans))]
		ctx, cancel := context.WithTimeout(context.Background(), b.o.timeout)
		if err := b.exp.ExportSpans(ctx, batch); err != nil {
			otel.Handle(err)
		}
		cancel()
	}
	spans = spans[:cap(spans)]
	clear(spans) // let the spans go
	b.mu.Lock()
	if b.spare == nil {
		b.spare = spans[:0]
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
