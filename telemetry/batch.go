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

// spanExporter exports a batch of ended spans (otlpExporter): n of
// them, encoded as an OTLP ScopeSpans's spans fields (appendSpanField)
// in chunks. It reports whether it is done with chunks (false when an
// export was abandoned with the HTTP transport perhaps still reading
// them): only then are they reused.
type spanExporter interface {
	ExportSpans(ctx context.Context, chunks [][]byte, n int) (released bool, err error)
	Shutdown(ctx context.Context) error
}

// batcher exports ended, sampled spans in batches. A span is encoded
// (OTLP protobuf) when it ends, into the chunks of the batch being
// filled: what waits for export is bytes, which the garbage collector
// does not scan, and the span's record goes back to its pool at once.
// Exported chunks are reused for the next batches, the process's other
// tracers' included (freeChunks), so a process allocates about one
// batch's worth of chunks (the exporter sends them as they are, with no
// copy).
type batcher struct {
	exp spanExporter
	o   batchOptions

	mu      sync.Mutex
	cur     spanBatch   // the batch being filled
	full    []spanBatch // full batches, not yet taken by the goroutine
	queued  int         // the spans of cur and full
	dropped int
	closed  bool

	kick    chan struct{}      // a batch is full (buffered: one wake-up pending at most)
	flushes chan chan struct{} // export everything, then close the channel
	stop    chan struct{}
	done    chan struct{} // the goroutine has returned
	once    sync.Once
}

// spanBatch is encoded spans, in chunks.
type spanBatch struct {
	chunks [][]byte
	n      int // spans
}

// A chunk holds chunkSize bytes of spans; a span is encoded into a new
// chunk when the last has less than chunkRoom left (a larger span grows
// its chunk).
const (
	chunkSize = 32 << 10
	chunkRoom = 2 << 10
)

func newBatcher(exp spanExporter, o batchOptions) *batcher {
	b := &batcher{exp: exp, o: o, kick: make(chan struct{}, 1), flushes: make(chan chan struct{}),
		stop: make(chan struct{}), done: make(chan struct{})}
	go b.run()
	return b
}

// onEnd encodes an ended, sampled span for export, or drops it when
// maxQueue spans wait already.
func (b *batcher) onEnd(s *record) {
	b.mu.Lock()
	switch {
	case b.closed:
	case b.queued >= b.o.maxQueue:
		b.dropped++
	default:
		c := len(b.cur.chunks) - 1
		if c < 0 || cap(b.cur.chunks[c])-len(b.cur.chunks[c]) < chunkRoom {
			b.cur.chunks = append(b.cur.chunks, b.chunk())
			c++
		}
		b.cur.chunks[c] = appendSpanField(b.cur.chunks[c], s)
		b.cur.n++
		b.queued++
		if b.cur.n == b.o.batchSize {
			b.full = append(b.full, b.cur)
			b.cur = spanBatch{}
			select {
			case b.kick <- struct{}{}:
			default: // already woken
			}
		}
	}
	b.mu.Unlock()
}

// chunk returns an empty chunk, an exported one if there is one.
func (b *batcher) chunk() []byte {
	freeChunks.mu.Lock()
	defer freeChunks.mu.Unlock()
	if n := len(freeChunks.c); n > 0 {
		c := freeChunks.c[n-1]
		freeChunks.c = freeChunks.c[:n-1]
		return c[:0]
	}
	return make([]byte, 0, chunkSize)
}

// freeChunks are exported chunks, kept for reuse by the process's
// batchers (at most maxFreeChunks: about two full queues of spans of
// the usual size).
var freeChunks struct {
	mu sync.Mutex
	c  [][]byte
}

const maxFreeChunks = 32

// freeChunk keeps an exported chunk for reuse.
func freeChunk(c []byte) {
	if cap(c) > 2*chunkSize { // one a large span grew
		return
	}
	freeChunks.mu.Lock()
	if len(freeChunks.c) < maxFreeChunks {
		freeChunks.c = append(freeChunks.c, c)
	}
	freeChunks.mu.Unlock()
}

// run exports the full batches when one is, and everything pending when
// the schedule delay has passed and on ForceFlush; on stop it returns
// (Shutdown exports what is left).
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
			return
		}
		_ = b.export(context.Background(), all) // never ends
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

// export takes the full batches (and the one being filled when all) and
// exports them, each within the export timeout and ctx, then keeps their
// chunks for reuse. A failed export is reported through otel.Handle,
// except when ctx has ended: export then stops and returns ctx's error
// (Shutdown's caller reports it).
func (b *batcher) export(ctx context.Context, all bool) error {
	b.mu.Lock()
	batches := b.full
	b.full = nil
	if all && b.cur.n > 0 {
		batches = append(batches, b.cur)
		b.cur = spanBatch{}
	}
	for _, batch := range batches {
		b.queued -= batch.n
	}
	dropped := b.dropped
	b.dropped = 0
	b.mu.Unlock()
	if dropped > 0 {
		otel.Handle(fmt.Errorf("telemetry: %d spans dropped: more than OTEL_BSP_MAX_QUEUE_SIZE=%d were waiting for the exporter", dropped, b.o.maxQueue))
	}
	for _, batch := range batches {
		ectx, cancel := context.WithTimeout(ctx, b.o.timeout)
		released, err := b.exp.ExportSpans(ectx, batch.chunks, batch.n)
		cancel()
		if released {
			for _, c := range batch.chunks {
				freeChunk(c)
			}
		}
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			otel.Handle(err)
		}
	}
	return nil
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
// down, within ctx. Spans that end later are not exported. The last
// export is made on the calling goroutine, once the exporting goroutine
// has finished the export it was making: the exit of a short command
// waits for it, and handing it to the other goroutine and back costs
// two thread wake-ups.
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
		err = b.export(ctx, true)
		if serr := b.exp.Shutdown(ctx); err == nil {
			err = serr
		}
	})
	return err
}
