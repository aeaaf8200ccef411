package postgres

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/skein-dev/skein/sessions"
)

// NewNotifier returns a Notifier that LISTENs, on a connection of its
// own, on the channel of each watched session; every write that
// appends events notifies the session's channel in its transaction (see
// Backend.Write) while a listener other than its own Backend's is
// registered. A broken connection is re-established, and every channel
// listened to again, after a second.
//
// Each listening connection registers itself before it listens to
// anything: it holds an advisory lock on a key drawn at random as long as
// it lives, and records the key in table skein_listeners (deleting the
// rows of listeners whose connection is gone: their key's lock is free).
// A write notifies only if that table has a row other than its own
// Backend's listeners (one index-less scan of a table of a row per
// process, in the write's statement): a process that is the only one
// listening does not wake its own listener for each of its writes, whose
// events its streams get from the store's observer, and a write that
// starts after a listener registered notifies it. So Watch's promise
// holds whoever writes: an event committed after it returns is notified,
// by a write of another Backend. A listener's row is deleted when its
// notifier closes the connection; a row left by a connection that died
// only makes the writes notify for nothing until the next listener
// registers.
func (b *Backend) NewNotifier() (sessions.Notifier, error) {
	ctx, cancel := context.WithCancel(context.Background())
	n := &notifier{b: b, channels: map[string]*channel{},
		kick: make(chan struct{}, 1), cancel: cancel, done: make(chan struct{})}
	go n.run(ctx)
	return n, nil
}

// notifier is a sessions.Notifier over LISTEN/NOTIFY.
type notifier struct {
	b      *Backend
	kick   chan struct{} // the channels to listen to changed
	cancel context.CancelFunc
	done   chan struct{}

	mu       sync.Mutex
	channels map[string]*channel // watched channels
	next     int
}

// channel is a watched channel.
type channel struct {
	fns   map[int]func(int64)
	ready chan struct{} // closed once the channel is listened to
}

// reconnectDelay is how long the notifier waits before it connects again
// after a failure.
const reconnectDelay = time.Second

// listenWait bounds how long Watch waits for its LISTEN to take effect.
const listenWait = 2 * time.Second

// Watch returns once the session's channel is listened to (so that
// every event committed after it returns is notified), or after
// listenWait while the connection is down. The channel is named after
// the session's row id: a session that is not stored (or cannot be
// read now) is not watched, and its watcher relies on polling.
func (n *notifier) Watch(id string, fn func(seq int64)) (stop func()) {
	ctx, cancel := context.WithTimeout(context.Background(), listenWait)
	defer cancel()
	sid, err := sessionRow(ctx, n.b.pool, id)
	if err != nil {
		return func() {}
	}
	name := eventChannel(n.b.schema, sid)
	n.mu.Lock()
	ch := n.channels[name]
	if ch == nil {
		ch = &channel{fns: map[int]func(int64){}, ready: make(chan struct{})}
		n.channels[name] = ch
	}
	k := n.next
	n.next++
	ch.fns[k] = fn
	n.mu.Unlock()
	n.poke()
	select {
	case <-ch.ready:
	case <-time.After(listenWait):
	case <-n.done:
	}
	return func() {
		n.mu.Lock()
		delete(ch.fns, k)
		if len(ch.fns) == 0 && n.channels[name] == ch {
			delete(n.channels, name)
		}
		n.mu.Unlock()
		n.poke()
	}
}

// poke wakes the listening loop to LISTEN or UNLISTEN.
func (n *notifier) poke() {
	select {
	case n.kick <- struct{}{}:
	default:
	}
}

func (n *notifier) Close() error {
	n.cancel()
	<-n.done
	return nil
}

// dispatch hands a notification to the watchers of its channel.
func (n *notifier) dispatch(_ *pgconn.PgConn, note *pgconn.Notification) {
	seq, err := strconv.ParseInt(note.Payload, 10, 64)
	if err != nil {
		return
	}
	n.mu.Lock()
	var fns []func(int64)
	if ch := n.channels[note.Channel]; ch != nil {
		for _, fn := range ch.fns {
			fns = append(fns, fn)
		}
	}
	n.mu.Unlock()
	for _, fn := range fns {
		fn(seq)
	}
}

// run keeps a listening connection until ctx ends.
func (n *notifier) run(ctx context.Context) {
	defer close(n.done)
	for ctx.Err() == nil {
		n.listen(ctx)
		select {
		case <-ctx.Done():
		case <-time.After(reconnectDelay):
		}
	}
}

// listen connects, then listens to the watched channels (following
// Watch's changes) until the connection fails or ctx ends.
func (n *notifier) listen(ctx context.Context) {
	cfg := n.b.pool.Config().ConnConfig.Copy()
	cfg.OnNotification = n.dispatch
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return
	}
	defer conn.Close(context.Background())
	key, err := n.register(ctx, conn)
	if err != nil {
		return
	}
	defer n.unregister(conn, key)
	listened := map[string]*channel{}
	for {
		var sql strings.Builder
		var added []*channel
		n.mu.Lock()
		for name, ch := range n.channels {
			if listened[name] != ch {
				sql.WriteString("LISTEN " + pgx.Identifier{name}.Sanitize() + ";")
				listened[name] = ch
				added = append(added, ch)
			}
		}
		for name := range listened {
			if n.channels[name] == nil {
				sql.WriteString("UNLISTEN " + pgx.Identifier{name}.Sanitize() + ";")
				delete(listened, name)
			}
		}
		n.mu.Unlock()
		if sql.Len() > 0 {
			if _, err := conn.Exec(ctx, sql.String()); err != nil {
				return
			}
		}
		for _, ch := range added {
			select {
			case <-ch.ready:
			default:
				close(ch.ready)
			}
		}
		wctx, wcancel := context.WithCancel(ctx)
		go func() {
			select {
			case <-n.kick:
				wcancel()
			case <-wctx.Done():
			}
		}()
		// Wait for notifications until Watch changes the channels: the
		// channels are compared again only then, not after each
		// notification (a server with many streams gets one per write).
		var err error
		for err == nil {
			err = conn.PgConn().WaitForNotification(wctx)
		}
		interrupted := wctx.Err() != nil
		wcancel()
		switch {
		case ctx.Err() != nil:
			return
		case err != nil && !interrupted:
			return // the connection failed: connect again
		}
	}
}

// registerSQL records the listener whose key is $1 in skein_listeners
// (the caller's connection holds the key's advisory lock) and deletes the
// rows of listeners whose connection is gone, from one reading of
// pg_locks. (Built on use, as the other statements made of locksCTE:
// see interruptSQL.)
func registerSQL() string {
	return `WITH ` + locksCTE + `,
	d AS (DELETE FROM skein_listeners WHERE NOT ` + keyIn("key") + `)
INSERT INTO skein_listeners (key) VALUES ($1)`
}

// register makes conn a registered listener (see NewNotifier) and
// returns its key.
func (n *notifier) register(ctx context.Context, conn *pgx.Conn) (int64, error) {
	key := rand.Int64()
	if _, err := conn.Exec(ctx, `SELECT pg_advisory_lock($1::bigint)`, key); err != nil {
		return 0, err
	}
	if _, err := conn.Exec(ctx, registerSQL(), key); err != nil {
		return 0, err
	}
	n.b.listeners.add(key)
	return key, nil
}

// unregister deletes the row of conn, the listener of key, before conn
// is closed (through the pool when the notifier's end broke conn). A
// failure leaves it to the next listener that registers.
func (n *notifier) unregister(conn *pgx.Conn, key int64) {
	n.b.listeners.remove(key)
	ctx, cancel := context.WithTimeout(context.Background(), listenWait)
	defer cancel()
	const sql = `DELETE FROM skein_listeners WHERE key = $1`
	if conn.IsClosed() {
		n.b.pool.Exec(ctx, sql, key)
		return
	}
	conn.Exec(ctx, sql, key)
}

// othersListen is an SQL condition that is true when skein_listeners has
// a listener other than those whose keys are in parameter $n (a bigint
// array: the writing Backend's own, see NewNotifier).
func othersListen(n int) string {
	return fmt.Sprintf(`EXISTS (SELECT 1 FROM skein_listeners WHERE key <> ALL($%d::bigint[]))`, n)
}

// ownListeners are the keys of a Backend's listening connections.
type ownListeners struct {
	mu sync.Mutex
	// list is replaced, never changed, so that keys can hand it out.
	list []int64
}

// keys returns the keys (not to be changed); never nil, so that it is
// an empty array, not NULL, in SQL.
func (o *ownListeners) keys() []int64 {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.list == nil {
		return []int64{}
	}
	return o.list
}

func (o *ownListeners) add(key int64) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.list = append(slices.Clone(o.list), key)
}

func (o *ownListeners) remove(key int64) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.list = slices.DeleteFunc(slices.Clone(o.list), func(k int64) bool { return k == key })
}
