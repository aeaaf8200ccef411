package export

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/skein-dev/skein/sessions"
	"github.com/skein-dev/skein/sessions/message"
)

// ForensicLog is a sessions.EventSink that writes one forensic log per session
// into a directory while the sessions run: a session's file is created
// with its header at the session's first event, gets one record per event
// as the event is logged (one write each, so a process killed at any
// moment leaves every earlier record in the file), and gets its footer
// from Close. The file of session id is <id>.jsonl, the id path-escaped
// (a workflow stage's "run/node" is run%2Fnode.jsonl); when that file
// exists (an earlier run logged the session), <id>.2.jsonl, <id>.3.jsonl,
// and so on; an id whose escaped form is longer than 200 bytes is cut
// and given a hash of the whole id (see logBase). Files are created
// readable by their owner only.
type ForensicLog struct {
	dir string

	mu    sync.Mutex
	files map[string]*forensicFile
	err   error // the first write error
}

type forensicFile struct {
	f         *os.File
	w         *ForensicWriter
	meta      *sessions.Record // the session's state after its last write
	lastError string           // of its newest error or cancelled event
}

var _ sessions.EventSink = (*ForensicLog)(nil)

// NewForensicLog returns a log writing into dir, which it creates (0700)
// if missing.
func NewForensicLog(dir string) (*ForensicLog, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	return &ForensicLog{dir: dir, files: map[string]*forensicFile{}}, nil
}

// Logged writes the events' records, creating the session's file first.
// A write error stops the log (Close reports it); the sessions go on.
func (l *ForensicLog) Logged(rec *sessions.Record, events []sessions.Event, appended []message.Message) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.err != nil {
		return
	}
	if err := l.logged(rec, events, appended); err != nil {
		l.err = fmt.Errorf("event log of session '%s': %v", rec.ID, err)
	}
}

func (l *ForensicLog) logged(rec *sessions.Record, events []sessions.Event, appended []message.Message) error {
	ff, ok := l.files[rec.ID]
	if !ok {
		f, err := l.create(rec.ID)
		if err != nil {
			return err
		}
		ff = &forensicFile{f: f, w: NewForensicWriter(f)}
		l.files[rec.ID] = ff
		if err := ff.w.Header(rec); err != nil {
			return err
		}
	}
	ff.meta = rec
	k := 0
	for i := range events {
		e := &events[i]
		var m *message.Message
		if e.Type == sessions.EventMessage && k < len(appended) {
			m = &appended[k]
			k++
		}
		if err := ff.w.Event(e, m); err != nil {
			return err
		}
		if last := LastError(events[i : i+1]); last != "" {
			ff.lastError = last
		}
	}
	return nil
}

// maxLogBase bounds the part of a log's file name taken from the
// session id, leaving room for ".NNN.jsonl" within the 255 bytes most
// file systems allow a name.
const maxLogBase = 200

// logBase is the file name of session id's log without its suffix: the
// id path-escaped, or, when that is longer than maxLogBase (an id may
// have 512 bytes, three times as many escaped), its first bytes, "~"
// and 16 hex digits of the id's SHA-256, so distinct ids keep distinct
// names (the full id is in the file's header).
func logBase(id string) string {
	base := url.PathEscape(id)
	if len(base) <= maxLogBase {
		return base
	}
	sum := sha256.Sum256([]byte(id))
	cut := maxLogBase - 17
	// Do not split an escape (%XX).
	if i := strings.LastIndexByte(base[max(0, cut-2):cut], '%'); i >= 0 {
		cut = max(0, cut-2) + i
	}
	return base[:cut] + "~" + hex.EncodeToString(sum[:8])
}

// create makes the file of session id, the first free name.
func (l *ForensicLog) create(id string) (*os.File, error) {
	base := logBase(id)
	for n := 1; ; n++ {
		name := base + ".jsonl"
		if n > 1 {
			name = base + "." + strconv.Itoa(n) + ".jsonl"
		}
		f, err := os.OpenFile(filepath.Join(l.dir, name), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if errors.Is(err, os.ErrExist) {
			continue
		}
		return f, err
	}
}

// Close writes each file's footer, with the session's state from store
// (its status and current messages; the last state the log saw, without
// messages, when the store no longer has the session), and closes the
// files. It returns the first error of the whole log.
func (l *ForensicLog) Close(ctx context.Context, store *sessions.Store) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	ids := make([]string, 0, len(l.files))
	for id := range l.files {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	errs := []error{l.err}
	for _, id := range ids {
		ff := l.files[id]
		rec := ff.meta
		if snap, err := store.Snapshot(ctx, id); err == nil {
			rec = snap
		}
		if l.err == nil {
			if err := ff.w.Footer(rec, ff.lastError); err != nil {
				errs = append(errs, fmt.Errorf("event log of session '%s': %v", id, err))
			}
		}
		errs = append(errs, ff.f.Close())
	}
	l.files = map[string]*forensicFile{}
	return errors.Join(errs...)
}
