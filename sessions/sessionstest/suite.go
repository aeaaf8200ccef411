// Package sessionstest is the conformance suite for sessions.Backend
// implementations. A backend's tests call RunBackendTests, and a durable
// backend's tests call RunDurableTests as well:
//
//	func TestBackend(t *testing.T) {
//		sessionstest.RunBackendTests(t, func(t *testing.T) sessions.Backend {
//			return newEmptyBackend(t)
//		})
//	}
//
// The suite pins the behaviour every backend shares, with the in-memory
// backend as the reference (sessions.ApplyToTranscript and
// sessions.ApplyToRecord define how a Change applies):
//
//   - Create, Load, LoadMeta, Exists, and the sentinel errors (ErrNotFound,
//     ErrExists, ErrConflict, ErrHasChildren) testable with errors.Is, each
//     naming the session id.
//   - Every part of a Change (title, metadata and first prompt included;
//     DropLast, a rewind, never touching a fork's messages), the version
//     bump, and a stale base version (ErrConflict) or an impossible change
//     writing nothing; several changes in one Write (a loop step's group
//     commit) applying in order, the version moving once per change, all
//     or none written.
//   - Forks share their source's first KeepFirst messages: later writes to
//     either side (append, DropFirst, Replace) never show on the other, down
//     to grandchildren; lineage (ParentID, ChildIDs in fork order,
//     BranchedAt).
//   - List: filters (status, parent, repoId and agent, creation and update
//     time ranges, Text in the id or title, After for keyset paging),
//     newest first (CreatedAt, then id, descending), Limit and Offset, the
//     total (stopped at CountLimit), and the summary fields.
//   - Delete: ErrHasChildren unless recursive, lineage kept consistent. A
//     session cannot be deleted while a fork of it is stored, so a fork's
//     shared messages can never lose their source through Delete; a
//     backend that can drop a session without deleting it (a
//     sessions.Forgetter, the memory backend's LRU eviction) must keep the
//     forks' shared messages readable.
//   - Store.OpenWith of a new id from several stores and goroutines at
//     once: every open succeeds (create or resume), exactly one creates.
//   - (durable) Cold opens of many stored sessions at once through a
//     Store smaller than their number, and opens, writes, unloads and
//     evictions of one session racing: every open succeeds, interrupted
//     sessions are healed once, no write is lost (run under -race, this
//     checks the Store's per-session locking against the backend).
//   - (durable) A compaction's summary message keeps its mark
//     (message.MetaSummary) through a reopen and is never the session's
//     first prompt, also when a later rewind or trim recomputes it.
//   - Create refuses a ParentID that would close a cycle through the
//     stored parents, or a session's own id (ErrCycle).
//   - Concurrent writers: one write wins per base version, the others get
//     ErrConflict, and the result is a valid transcript.
//   - Message ids and times (message.Message's ID and CreatedAt): a
//     backend stores and returns them unchanged (times compared with
//     Equal), so through a Store every message has a UUIDv7 id unique in
//     its session and its write's time, the same on every load and after
//     reopening; a fork shares its source's ids for the shared prefix and
//     a compaction keeps those of the messages it keeps.
//   - Exact round trips of messages (content blocks, tool calls with nested
//     arguments, int64 and float64 values, usage) and events.
//   - Run records (sessions.RunBackend, required): create, duplicate and
//     unknown ids, updates that replace the header and append steps,
//     listing newest first with filters and paging, and (durable
//     backends) records that survive reopening.
//   - Repository records (sessions.RepoBackend, optional): create,
//     duplicate and unknown ids, put replacing a path, listing by id,
//     delete, and (durable backends) records that survive reopening.
//   - Checksums (RunChecksumTests, for durable backends): a message whose
//     stored bytes were changed behind the backend fails to load with
//     sessions.ErrCorrupt naming the session and the message's index, in
//     the session and in its forks; every backend stores
//     sessions.Checksum of the message's body and checks it on load.
//   - Optional interfaces, tested when the backend has them: a
//     sessions.PartialLoader's LoadTranscript and LoadEvents agree with
//     Load after every write of the suite; a sessions.HistoryBackend keeps
//     every message a "message" event appended, through trims, resets,
//     compactions and forks, and CreateWithHistory restores such a history.
//
// Records and messages in the suite are in the canonical form the JSON
// encodings of package sessions produce (absent maps are nil, not empty),
// so a backend that stores them as JSON gives them back unchanged. Times
// are compared with time.Time.Equal; a backend may return them in another
// location. A loaded event's SessionID is the session's id.
package sessionstest

import (
	"path/filepath"
	"sync"
	"testing"

	"github.com/skein-dev/skein/sessions"
)

// RunBackendTests runs the conformance suite against the backends
// newBackend returns. Each subtest calls newBackend once and expects an
// empty backend; the suite closes it when the subtest ends.
func RunBackendTests(t *testing.T, newBackend func(t *testing.T) sessions.Backend) {
	tests := []struct {
		name string
		run  func(h *harness)
	}{
		{"CreateLoad", testCreateLoad},
		{"NotFound", testNotFound},
		{"WriteParts", testWriteParts},
		{"WriteCombined", testWriteCombined},
		{"WriteBatch", testWriteBatch},
		{"WriteConflict", testWriteConflict},
		{"WriteImpossible", testWriteImpossible},
		{"LoadReturnsCopies", testLoadReturnsCopies},
		{"RoundTrip", testRoundTrip},
		{"Fork", testFork},
		{"ForkErrors", testForkErrors},
		{"ForkIsolation", testForkIsolation},
		{"ForkDropLast", testForkDropLast},
		{"ForkGrandchildren", testForkGrandchildren},
		{"ForkModel", testForkModel},
		{"List", testList},
		{"ListPaging", testListPaging},
		{"Delete", testDelete},
		{"DeleteRecursive", testDeleteRecursive},
		{"ForgetKeepsForks", testForgetKeepsForks},
		{"ConcurrentWriters", testConcurrentWriters},
		{"ConcurrentForks", testConcurrentForks},
		{"PartialNotFound", testPartialNotFound},
		{"History", testHistory},
		{"ParentCycle", testParentCycle},
		{"Runs", testRuns},
		{"RunsList", testRunsList},
		{"Repos", testRepos},
		{"OpenConcurrently", testOpenConcurrently},
		{"MessageIDs", testMessageIDs},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := newBackend(t)
			closeOnce(t, b)
			tc.run(&harness{t: t, b: b})
		})
	}
}

// RunDurableTests runs the tests of a durable backend: open must open the
// storage named by path (a file path in a fresh t.TempDir(), or whatever
// the backend makes of it), creating it if missing; opening the same path
// again, after a Close or while another backend has it open, must reach the
// same sessions; a Store over each such handle opens a new id as create or
// resume, whichever handle wins. The suite closes every backend it opens.
func RunDurableTests(t *testing.T, open func(t *testing.T, path string) sessions.Backend) {
	tests := []struct {
		name string
		run  func(t *testing.T, open opener)
	}{
		{"Durable", testDurableFlag},
		{"Reopen", testReopen},
		{"BoundReopen", testBoundReopen},
		{"TwoHandles", testTwoHandles},
		{"TwoHandlesRace", testTwoHandlesRace},
		{"RunsReopen", testRunsReopen},
		{"ReposReopen", testReposReopen},
		{"OpenRace", testOpenRace},
		{"OpenReopened", testOpenReopened},
		{"MessageIDsReopen", testMessageIDsReopen},
		{"RenamedEventTypes", testRenamedEventTypes},
		{"SummaryNeverFirstPrompt", testSummaryNeverFirstPrompt},
		{"ColdOpens", testColdOpens},
		{"OpenEvictSameID", testOpenEvictSameID},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "sessions.db")
			tc.run(t, func() (*harness, func()) {
				b := open(t, path)
				return &harness{t: t, b: b}, closeOnce(t, b)
			})
		})
	}
}

// opener opens the durable test's storage; the function it returns closes
// that backend (the test's cleanup closes it otherwise).
type opener func() (*harness, func())

// closeOnce closes b when the test ends, unless it was closed already
// through the returned function.
func closeOnce(t *testing.T, b sessions.Backend) func() {
	var once sync.Once
	closeFn := func() {
		once.Do(func() {
			if err := b.Close(); err != nil {
				t.Errorf("Close: %v", err)
			}
		})
	}
	t.Cleanup(closeFn)
	return closeFn
}

// harness is one subtest's backend with helpers that fail the test on
// unexpected errors.
type harness struct {
	t *testing.T
	b sessions.Backend
}
