package telemetry

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/sdk/resource"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
)

// recordingExporter keeps the names of the spans of each export; while
// hold is non-nil an export says so on entered and waits for hold to
// close.
type recordingExporter struct {
	mu       sync.Mutex
	batches  [][]string
	hold     chan struct{}
	entered  chan struct{}
	shutdown bool
}

func (e *recordingExporter) ExportSpans(_ context.Context, chunks [][]byte, n int) (bool, error) {
	e.mu.Lock()
	hold := e.hold
	e.mu.Unlock()
	if hold != nil {
		e.entered <- struct{}{}
		<-hold
	}
	var ss tracepb.ScopeSpans // chunks hold its spans fields
	if err := proto.Unmarshal(bytes.Join(chunks, nil), &ss); err != nil || len(ss.Spans) != n {
		return true, fmt.Errorf("%d spans (want %d): %v", len(ss.Spans), n, err)
	}
	names := make([]string, n)
	for i, s := range ss.Spans {
		names[i] = s.Name
	}
	e.mu.Lock()
	e.batches = append(e.batches, names)
	e.mu.Unlock()
	return true, nil
}

func (e *recordingExporter) Shutdown(context.Context) error {
	e.mu.Lock()
	e.shutdown = true
	e.mu.Unlock()
	return nil
}

func (e *recordingExporter) got() (batches []string, shutdown bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, b := range e.batches {
		batches = append(batches, strings.Join(b, ","))
	}
	return batches, e.shutdown
}

// waitFor polls cond for up to 5 seconds.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

func endSpans(r *recorder, names ...string) {
	for _, n := range names {
		_, s := r.Start(context.Background(), n)
		s.End()
	}
}

// TestBatcherBatches: a full batch is exported at once, the rest on
// ForceFlush (the schedule delay being an hour), in order; Shutdown
// shuts the exporter down and later spans are not exported.
func TestBatcherBatches(t *testing.T) {
	exp := &recordingExporter{}
	tp := newRecorder(resource.Empty(), exp, batchOptions{delay: time.Hour, timeout: time.Second, maxQueue: 100, batchSize: 3})
	b := tp.proc
	endSpans(tp, "1", "2", "3", "4", "5", "6", "7")
	waitFor(t, "two full batches", func() bool { got, _ := exp.got(); return len(got) == 2 })
	if err := b.ForceFlush(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got, _ := exp.got(); strings.Join(got, " ") != "1,2,3 4,5,6 7" {
		t.Errorf("batches %q", got)
	}
	endSpans(tp, "8")
	if err := b.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	endSpans(tp, "9")
	got, shutdown := exp.got()
	if strings.Join(got, " ") != "1,2,3 4,5,6 7 8" || !shutdown {
		t.Errorf("after shutdown: batches %q, exporter shut down %v", got, shutdown)
	}
	if err := b.ForceFlush(context.Background()); err != nil {
		t.Errorf("ForceFlush after Shutdown: %v", err)
	}
}

// TestBatcherDelay: a span is exported within the schedule delay without
// a full batch.
func TestBatcherDelay(t *testing.T) {
	exp := &recordingExporter{}
	tp := newRecorder(resource.Empty(), exp, batchOptions{delay: 20 * time.Millisecond, timeout: time.Second, maxQueue: 100, batchSize: 50})
	defer tp.proc.Shutdown(context.Background())
	endSpans(tp, "a")
	waitFor(t, "the delayed export", func() bool { got, _ := exp.got(); return len(got) == 1 && got[0] == "a" })
}

// TestBatcherQueueFull: while the exporter is stuck, spans beyond the
// queue's size are dropped and the drop is reported.
func TestBatcherQueueFull(t *testing.T) {
	var mu sync.Mutex
	var reported []error
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) { mu.Lock(); reported = append(reported, err); mu.Unlock() }))
	defer otel.SetErrorHandler(otel.ErrorHandlerFunc(func(error) {}))
	exp := &recordingExporter{hold: make(chan struct{}), entered: make(chan struct{}, 1)}
	tp := newRecorder(resource.Empty(), exp, batchOptions{delay: time.Hour, timeout: time.Second, maxQueue: 4, batchSize: 2})
	endSpans(tp, "1", "2") // a full batch: the exporter takes it and is stuck
	<-exp.entered
	endSpans(tp, "3", "4", "5", "6", "7", "8") // 4 wait, 2 are dropped
	exp.mu.Lock()
	close(exp.hold)
	exp.hold = nil
	exp.mu.Unlock()
	if err := tp.proc.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	got, _ := exp.got()
	if strings.Join(got, " ") != "1,2 3,4 5,6" {
		t.Errorf("batches %q", got)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(reported) != 1 || !strings.Contains(reported[0].Error(), "2 spans dropped") {
		t.Errorf("reported %v", reported)
	}
}

// stallingExporter answers an export when its context ends, with the
// context's error; it notes whether the batcher's goroutine had
// returned when the export started.
type stallingExporter struct {
	done     <-chan struct{}
	mu       sync.Mutex
	exports  []bool // per export: the goroutine had returned
	shutdown bool
}

func (e *stallingExporter) ExportSpans(ctx context.Context, _ [][]byte, _ int) (bool, error) {
	returned := false
	select {
	case <-e.done:
		returned = true
	default:
	}
	e.mu.Lock()
	e.exports = append(e.exports, returned)
	e.mu.Unlock()
	<-ctx.Done()
	return true, ctx.Err()
}

func (e *stallingExporter) Shutdown(context.Context) error {
	e.mu.Lock()
	e.shutdown = true
	e.mu.Unlock()
	return nil
}

// TestBatcherShutdownDeadline: Shutdown's last export is made on the
// calling goroutine (after the batcher's own has returned) within
// Shutdown's context: a collector that does not answer makes Shutdown
// return the context's error at its deadline, reported by the caller
// only (not also through otel.Handle), and the exporter is shut down.
func TestBatcherShutdownDeadline(t *testing.T) {
	var mu sync.Mutex
	var reported []error
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) { mu.Lock(); reported = append(reported, err); mu.Unlock() }))
	defer otel.SetErrorHandler(otel.ErrorHandlerFunc(func(error) {}))
	exp := &stallingExporter{}
	tp := newRecorder(resource.Empty(), exp, batchOptions{delay: time.Hour, timeout: time.Hour, maxQueue: 100, batchSize: 10})
	exp.done = tp.proc.done
	endSpans(tp, "1", "2", "3")
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	err := tp.proc.Shutdown(ctx)
	if !errors.Is(err, context.DeadlineExceeded) || time.Since(start) > 5*time.Second {
		t.Errorf("Shutdown: %v after %v, want the deadline's error at the deadline", err, time.Since(start))
	}
	exp.mu.Lock()
	defer exp.mu.Unlock()
	if len(exp.exports) != 1 || !exp.exports[0] || !exp.shutdown {
		t.Errorf("exports (the goroutine had returned): %v, exporter shut down %v", exp.exports, exp.shutdown)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(reported) != 0 {
		t.Errorf("reported through otel.Handle too: %v", reported)
	}
}

func TestBatchOptionsFromEnv(t *testing.T) {
	for _, tc := range []struct {
		env  map[string]string
		want batchOptions
	}{
		{map[string]string{}, batchOptions{5 * time.Second, 30 * time.Second, 2048, 512}},
		{map[string]string{"OTEL_BSP_SCHEDULE_DELAY": "100", "OTEL_BSP_EXPORT_TIMEOUT": "2000", "OTEL_BSP_MAX_QUEUE_SIZE": "64", "OTEL_BSP_MAX_EXPORT_BATCH_SIZE": "16"},
			batchOptions{100 * time.Millisecond, 2 * time.Second, 64, 16}},
		{map[string]string{"OTEL_BSP_SCHEDULE_DELAY": "soon", "OTEL_BSP_MAX_QUEUE_SIZE": "-1"}, batchOptions{5 * time.Second, 30 * time.Second, 2048, 512}},
		{map[string]string{"OTEL_BSP_MAX_QUEUE_SIZE": "100"}, batchOptions{5 * time.Second, 30 * time.Second, 100, 100}},
	} {
		for _, k := range []string{"OTEL_BSP_SCHEDULE_DELAY", "OTEL_BSP_EXPORT_TIMEOUT", "OTEL_BSP_MAX_QUEUE_SIZE", "OTEL_BSP_MAX_EXPORT_BATCH_SIZE"} {
			t.Setenv(k, tc.env[k])
		}
		if got := batchOptionsFromEnv(); got != tc.want {
			t.Errorf("%v: %+v, want %+v", tc.env, got, tc.want)
		}
	}
}
