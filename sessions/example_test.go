package sessions_test

import (
	"context"
	"fmt"

	"github.com/skein-dev/skein/sessions"
	"github.com/skein-dev/skein/sessions/message"
)

// A Store over a backend: the in-memory one here; sqlite.Open gives a
// durable one with the same API.
func ExampleNewStore() {
	ctx := context.Background()
	store, err := sessions.NewStore(sessions.NewMemoryBackend())
	if err != nil {
		panic(err)
	}
	if _, err := store.Open(ctx, "trip", 0); err != nil {
		panic(err)
	}
	events, err := store.Apply(ctx, "trip", &sessions.Change{Append: []message.Message{
		{Role: message.RoleUser, Text: "Where to?"},
		{Role: message.RoleAssistant, Text: "Lisbon."},
	}})
	if err != nil {
		panic(err)
	}
	rec, err := store.Snapshot(ctx, "trip")
	if err != nil {
		panic(err)
	}
	fmt.Println(len(events), "events;", len(rec.Messages), "messages; last:", rec.Messages[1].Text)
	_, err = store.Snapshot(ctx, "nope")
	fmt.Println(err)
	// Output:
	// 2 events; 2 messages; last: Lisbon.
	// unknown session id 'nope'
}
