package sqlite

import (
	"context"
	"sync"
	"sync/atomic"
)

// Checkpoints copy the pages of the write-ahead log back into the
// database file, so that the log can start over. SQLite's default runs
// one inside the commit that takes the log past 1,000 pages: that
// commit, an agent loop step or an inject, then waits for the copy and
// for its fsyncs (a checkpoint syncs the log and the file, whatever the
// synchronous mode). A writable Backend turns that off
// (wal_autocheckpoint=0, see dsn) and checkpoints on a goroutine of its
// own instead, with SQLite's PASSIVE checkpoint, which never blocks a
// writer or a reader: about a fifth of a durable append's time moves off
// the writer (BenchmarkW2).
//
// A passive checkpoint copies what the log held when it began; the log
// starts over only at a write that finds every page of it copied. Under
// a steady stream of writes the copy rarely catches up on its own, so
// each round ends with one more pass made while holding the Backend's
// write lock (short: only the pages of the writes made during the round
// are left), and the Backend's next write starts the log over. A writer
// that finds checkpointBehind pages waiting (the goroutine has not run)
// checkpoints itself, as SQLite would: the log stays bounded.
const (
	// checkpointPages is how many log pages a round waits for: SQLite's
	// default threshold.
	checkpointPages = 1000
	// checkpointBehind is how many log pages make a write checkpoint
	// itself.
	checkpointBehind = 4 * checkpointPages
	// checkpointPasses bounds a round's passes before its last.
	checkpointPasses = 3
)

// checkpointer is a writable Backend's checkpointing goroutine, started
// by the first round due.
type checkpointer struct {
	// pending is an estimate of the log pages written since the last
	// round began: each commit adds the pages its rows take, plus one
	// for the leaf of table writes it changes.
	pending atomic.Int64
	// written is the bytes of rows inserted by the write in progress.
	// Guarded by Backend.wmu.
	written int
	rounds  atomic.Int64 // rounds done, for tests
	once    sync.Once    // starts the goroutine
	stopped sync.Once
	wake    chan struct{} // a round is due (buffered: one is enough)
	stop    chan struct{} // closed by Close
	done    chan struct{} // closed when the goroutine has returned
}

// inserted records n bytes of rows inserted by the write in progress.
// The caller holds b.wmu.
func (b *Backend) inserted(n int) { b.ckpt.written += n }

// committed records the commit of the write in progress and starts a
// checkpoint when one is due. The caller holds b.wmu.
func (b *Backend) committed(ctx context.Context) {
	c := &b.ckpt
	pending := c.pending.Add(int64(1 + c.written/pageSize))
	c.written = 0
	switch {
	case pending >= checkpointBehind:
		c.pending.Store(0)
		b.checkpointPass(ctx)
	case pending >= checkpointPages:
		c.once.Do(func() {
			c.wake, c.stop, c.done = make(chan struct{}, 1), make(chan struct{}), make(chan struct{})
			go b.checkpoints()
		})
		select {
		case c.wake <- struct{}{}:
		default:
		}
	}
}

// begun starts counting the rows of a write (a write that did not
// commit leaves its count behind). The caller holds b.wmu.
func (b *Backend) begun() { b.ckpt.written = 0 }

// checkpoints runs a round of passes each time one is due, until Close.
func (b *Backend) checkpoints() {
	c := &b.ckpt
	defer close(c.done)
	ctx := context.Background()
	for {
		select {
		case <-c.stop:
			return
		case <-c.wake:
		}
		c.pending.Store(0)
		for range checkpointPasses {
			if complete := b.checkpointPass(ctx); complete {
				break
			}
		}
		select {
		case <-c.stop:
			return
		default:
		}
		b.wmu.Lock()
		b.checkpointPass(ctx)
		b.wmu.Unlock()
		c.rounds.Add(1)
	}
}

// checkpointPass runs one passive checkpoint and reports whether it
// copied the whole log. A failure (SQLITE_BUSY while another connection
// checkpoints) leaves the pages for the next round.
func (b *Backend) checkpointPass(ctx context.Context) bool {
	var busy, log, copied int
	err := b.db.QueryRowContext(ctx, "PRAGMA wal_checkpoint(PASSIVE)").Scan(&busy, &log, &copied)
	return err == nil && busy == 0 && log == copied
}

// stopCheckpoints stops the goroutine, if it was started, and waits for
// it. The caller does not hold b.wmu.
func (b *Backend) stopCheckpoints() {
	c := &b.ckpt
	c.stopped.Do(func() {
		c.once.Do(func() {}) // no round starts the goroutine from now on
		if c.stop != nil {
			close(c.stop)
			<-c.done
		}
	})
}
