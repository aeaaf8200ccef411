package serve

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/skein-dev/skein/sessions"
)

// unreadable is a memory backend whose store always holds events beyond
// what a stream sent (LastSeqs) and cannot read them (EventsAfter).
type unreadable struct{ *sessions.MemoryBackend }

func (unreadable) EventsAfter(context.Context, string, int64, int) ([]sessions.Event, error) {
	return nil, errors.New("disk on fire")
}

func (unreadable) LastSeqs(_ context.Context, ids []string) (map[string]int64, error) {
	out := map[string]int64{}
	for _, id := range ids {
		out[id] = 1 << 40
	}
	return out, nil
}

// syncBuffer is a bytes.Buffer safe for the server's logger and the test.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestCatchUpErrorLogged: a stream that cannot read the events another
// process wrote ends, and the server logs why.
func TestCatchUpErrorLogged(t *testing.T) {
	store, err := sessions.NewStore(unreadable{sessions.NewMemoryBackend()})
	if err != nil {
		t.Fatal(err)
	}
	var logs syncBuffer
	ts := newTestServer(t, Config{Store: store, PollInterval: 10 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	id := ts.create(map[string]any{"id": "s1"})
	s := ts.events(id, "")
	deadline := time.After(10 * time.Second)
	for ended := false; !ended; { // the stream ends after the failed catch-up
		select {
		case _, ok := <-s.frames:
			ended = !ok
		case <-deadline:
			t.Fatal("the stream did not end within 10s")
		}
	}
	if got := logs.String(); !strings.Contains(got, "disk on fire") || !strings.Contains(got, "id="+id) {
		t.Fatalf("log does not name the failed read:\n%s", got)
	}
}
