package main

import (
	"context"
	"fmt"
	"sync"

	"github.com/google/uuid"

	"github.com/skein-dev/skein/sessions"
	"github.com/skein-dev/skein/vm"
)

// testRecorder keeps the sessions of every test of a `skein test --store`
// run in a durable store, after the test: each test still runs on its own
// in-memory store (fixed clock, seeded ids, nothing left from another
// test or run), and when it ends its sessions are copied under
// "<run>/<file>::<test>/" (a second run of one test, with -count, adds
// "#2" to the test's name). <run> is "test-" and a new UUIDv7 per
// invocation, so shards and reruns never collide.
type testRecorder struct {
	store   *storeFlag
	backend sessions.Backend
	run     string

	mu     sync.Mutex
	seen   map[string]int // runs of each test so far
	copied int            // sessions stored
	errs   []error
}

// newTestRecorder opens store's backend for a test run.
func newTestRecorder(store *storeFlag) (*testRecorder, error) {
	b, err := store.openNow()
	if err != nil {
		return nil, err
	}
	id, err := uuid.NewV7()
	if err != nil {
		b.Close()
		return nil, err
	}
	return &testRecorder{store: store, backend: b, run: "test-" + id.String(), seen: map[string]int{}}, nil
}

// done copies the sessions of the test that just ended on st.
func (r *testRecorder) done(st *vm.State, res vm.TestResult) {
	key := res.File + "::" + res.Name
	r.mu.Lock()
	r.seen[key]++
	if n := r.seen[key]; n > 1 {
		key = fmt.Sprintf("%s#%d", key, n)
	}
	r.mu.Unlock()
	stats, err := sessions.Copy(context.Background(), st.Store.Backend(), r.backend, sessions.CopyOptions{Merge: true, IDPrefix: r.run + "/" + key + "/"})
	r.mu.Lock()
	defer r.mu.Unlock()
	r.copied += stats.Sessions
	if err != nil {
		r.errs = append(r.errs, fmt.Errorf("storing the sessions of %s: %w", key, err))
	}
}

// close reports what was stored, or what failed, and releases the store;
// it returns an error when a test's sessions could not be stored.
func (r *testRecorder) close(std stdio, summary func(string)) error {
	defer r.backend.Close()
	for _, err := range r.errs {
		fmt.Fprintf(std.err, "skein test: %v\n", err)
	}
	summary(fmt.Sprintf("stored %s in %s under %s/", plural(r.copied, "session"), r.store, r.run))
	if len(r.errs) > 0 {
		return fmt.Errorf("%d tests' sessions not stored", len(r.errs))
	}
	return nil
}
