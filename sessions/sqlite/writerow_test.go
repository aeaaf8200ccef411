package sqlite

import (
	"errors"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/skein-dev/skein/sessions"
	"github.com/skein-dev/skein/sessions/internal/rowstore"
)

func ptr[T any](v T) *T { return &v }

// TestWriteRowBlobs encodes a write's messages and events and reads them
// back: seqs with gaps, NULL and empty strings, a message without a
// checksum; and refuses positions that are not consecutive and seqs that
// do not increase.
func TestWriteRowBlobs(t *testing.T) {
	rows := []rowstore.MessageRow{{Pos: 7, Body: rowstore.Body{JSON: `{"role":"user","content":"a"}`, Sum: 1}},
		{Pos: 8, Body: rowstore.Body{JSON: `{"role":"user","content":"b"}`, Sum: 2}}}
	msgs, err := encodeMessages(nil, rows)
	if err != nil {
		t.Fatal(err)
	}
	msgs = appendMessage(msgs, "unchecked", nil)
	var got []string
	var sums []*int64
	if err := eachMessage(msgs, func(m storedMessage) error {
		got, sums = append(got, string(m.body)), append(sums, m.sum)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, []string{rows[0].Body.JSON, rows[1].Body.JSON, "unchecked"}) ||
		*sums[0] != 1 || *sums[1] != 2 || sums[2] != nil {
		t.Fatalf("messages read back: %q, %v", got, sums)
	}

	events := []rowstore.EventRow{
		{Seq: 5, Type: "message", Time: -3, CorrID: ptr("c"), Data: ptr(`{"index":7}`), Pos: ptr(int64(7))},
		{Seq: 6, Type: "t", Time: 1 << 62, Data: ptr("")},
		{Seq: 9, Type: "", Time: 0, CorrID: ptr("")},
	}
	evs, err := encodeEvents(nil, 5, events)
	if err != nil {
		t.Fatal(err)
	}
	var back []rowstore.EventRow
	if err := eachEvent(evs, 5, func(e *storedEvent) error {
		r := rowstore.EventRow{Seq: e.seq, Type: string(e.typ), Time: e.time}
		if e.corrID != nil {
			r.CorrID = ptr(string(e.corrID))
		}
		if e.data != nil {
			r.Data = ptr(string(e.data))
		}
		if e.pos >= 0 {
			r.Pos = ptr(e.pos)
		}
		back = append(back, r)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, events) {
		t.Fatalf("events read back:\n%+v\nwant\n%+v", back, events)
	}

	if _, err := encodeMessages(nil, []rowstore.MessageRow{rows[0], {Pos: 9}}); err == nil {
		t.Error("message rows at positions 7 and 9 were encoded as one write's")
	}
	for _, bad := range [][]rowstore.EventRow{{events[0], events[0]}, {events[1], events[0]}} {
		if _, err := encodeEvents(nil, bad[0].Seq, bad); err == nil {
			t.Errorf("events with seqs %d, %d were encoded", bad[0].Seq, bad[1].Seq)
		}
	}
	// Every cut of a blob short of its end fails as damaged data, and
	// never reads past the end.
	for n := range len(evs) {
		if err := eachEvent(evs[:n], 5, func(*storedEvent) error { return nil }); err != nil && !errors.Is(err, sessions.ErrCorrupt) {
			t.Fatalf("events cut at %d: %v", n, err)
		}
	}
	for n := range len(msgs) {
		if err := eachMessage(msgs[:n], func(storedMessage) error { return nil }); err != nil && !errors.Is(err, sessions.ErrCorrupt) {
			t.Fatalf("messages cut at %d: %v", n, err)
		}
	}
}

// FuzzWriteRowBlobs reads arbitrary bytes as blobs: a blob that does not
// parse is ErrCorrupt, and no input panics or reads past its end.
func FuzzWriteRowBlobs(f *testing.F) {
	msgs, _ := encodeMessages(nil, []rowstore.MessageRow{{Pos: 0, Body: rowstore.Body{JSON: `{"role":"user"}`, Sum: 9}}})
	evs, _ := encodeEvents(nil, 1, []rowstore.EventRow{{Seq: 1, Type: "x", Data: ptr("{}")}, {Seq: 3, Type: "y", CorrID: ptr("c")}})
	f.Add(msgs)
	f.Add(evs)
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01})
	f.Fuzz(func(t *testing.T, blob []byte) {
		if err := eachMessage(blob, func(m storedMessage) error { _ = len(m.body); return nil }); err != nil && !errors.Is(err, sessions.ErrCorrupt) {
			t.Fatalf("messages: %v", err)
		}
		if err := eachEvent(blob, 1, func(e *storedEvent) error { _ = len(e.data) + len(e.corrID) + len(e.typ); return nil }); err != nil && !errors.Is(err, sessions.ErrCorrupt) {
			t.Fatalf("events: %v", err)
		}
	})
}

// TestEventSeqsIncrease refuses a write whose first event's seq is not
// after the session's last, with nothing written.
func TestEventSeqsIncrease(t *testing.T) {
	be := openTest(t, filepath.Join(t.TempDir(), "sessions.db"))
	ctx := t.Context()
	now := time.Now()
	if err := be.Create(ctx, &sessions.Record{ID: "s", Status: sessions.StatusActive, CreatedAt: now, UpdatedAt: now}); err != nil {
		t.Fatal(err)
	}
	event := func(seq int64) *sessions.Change {
		return &sessions.Change{UpdatedAt: now, Events: []sessions.Event{{Seq: seq, Type: "e", Time: now}}}
	}
	if err := be.Write(ctx, "s", 0, event(1)); err != nil {
		t.Fatal(err)
	}
	if err := be.Write(ctx, "s", 1, event(1)); err == nil || !strings.Contains(err.Error(), "is not after the session's last, 1") {
		t.Fatalf("a second event seq 1: %v", err)
	}
	if rec, err := be.Load(ctx, "s"); err != nil || rec.Version != 1 || len(rec.Events) != 1 {
		t.Fatalf("after the refused write: %+v, %v", rec, err)
	}
}
