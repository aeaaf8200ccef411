package servetest

import (
	"strings"
	"testing"
	"time"
)

func TestScanEvents(t *testing.T) {
	stream := ": ready\n\n" +
		"id: 1\nevent: message\ndata: {\"type\":\"message\",\"role\":\"user\",\"timestamp\":\"2026-11-27T10:00:00Z\"}\n\n" +
		"event: text_delta\ndata: {\"type\":\"text_delta\"}\n\n" +
		"id: 2\ndata: {\"type\":\"session:turn_completed\"}\n\n"
	ready := make(chan struct{})
	var got []Event
	if err := ScanEvents(strings.NewReader(stream), ready, func(e Event) { got = append(got, e) }); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ready:
	default:
		t.Fatal("ready was not closed at the stream's \": ready\"")
	}
	want := []Event{{Seq: 1, Type: "message", Role: "user", Timestamp: time.Date(2026, 11, 27, 10, 0, 0, 0, time.UTC)},
		{Seq: 2, Type: "session:turn_completed"}}
	if len(got) != len(want) {
		t.Fatalf("events %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i].Seq != want[i].Seq || got[i].Type != want[i].Type || got[i].Role != want[i].Role || !got[i].Timestamp.Equal(want[i].Timestamp) {
			t.Fatalf("event %d: %+v, want %+v", i, got[i], want[i])
		}
	}
}

func TestScanEventsBadFrames(t *testing.T) {
	for stream, want := range map[string]string{
		"id: x\ndata: {}\n\n":    `frame id "x" is not a positive number`,
		"id: 3\ndata: {oops\n\n": "event 3:",
	} {
		err := ScanEvents(strings.NewReader(stream), make(chan struct{}), func(Event) {})
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: error %v, want one containing %q", stream, err, want)
		}
	}
}
