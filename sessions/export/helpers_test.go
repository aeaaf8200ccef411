package export

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/skein-dev/skein/sessions"
	"github.com/skein-dev/skein/sessions/message"
)

var ctx = context.Background()

func newTestStore(t *testing.T, b sessions.Backend, capacity int) *sessions.Store {
	t.Helper()
	n := 0
	ids := func() string { n++; return fmt.Sprintf("m%d", n) }
	s, err := sessions.NewStore(b, sessions.WithCap(capacity), sessions.WithIDs(ids), sessions.WithClock(func() time.Time { return time.Unix(1700000000, 0) }))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func mustOpen(t *testing.T, s *sessions.Store, id string) {
	t.Helper()
	if _, err := s.Open(ctx, id, 0); err != nil {
		t.Fatal(err)
	}
}

func mustAppend(t *testing.T, s *sessions.Store, id string, ms ...message.Message) {
	t.Helper()
	if _, err := s.Apply(ctx, id, &sessions.Change{Append: ms}); err != nil {
		t.Fatal(err)
	}
}
