package sqlite

import (
	"database/sql"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/skein-dev/skein/sessions"
	"github.com/skein-dev/skein/sessions/internal/rowstore"
)

// A row of table writes holds what one write stored (see the package
// doc): the message rows it appended, at positions [pos, pos_end), and
// its events, with seqs in [seq, seq_end), each kind packed into a blob
// of its own, beside the session's state after the write. The blobs'
// layouts:
//
//	messages: per message, in position order:
//	  flags byte (1: a checksum follows), the checksum (uint32, little
//	  endian; sessions.Checksum of the body), the body's length
//	  (uvarint) and the body (JSON of message.Message)
//	events: per event, in seq order:
//	  the seq's distance from the previous event's (uvarint; the first's
//	  from the row's seq), the type's length (uvarint) and the type, the
//	  time (varint, Unix nanoseconds), corr_id and data, each as 0 for
//	  NULL or its length plus one (uvarint) and its bytes, and pos (a
//	  "message" event's message row; varint, -1 for none)
//
// Message positions within a row are consecutive, as a write appends
// them; event seqs only increase.

// The key of a writes row is its session's sid and the version the write
// was made on (its base; a negative one for the rows a session's creation
// or migration 9 stored), one integer so that the table is SQLite's
// rowid b-tree: a session's rows are in write order, the newest session's
// writes append to the last page, which SQLite then splits without
// rewriting it (an index b-tree, as a WITHOUT ROWID table is, rewrites
// two or three pages a split), and the key's uniqueness is the version
// check of a write. View session_heads (migrate_writes.go) computes a session's
// range with the same shift.
const (
	keySessionShift = 32
	keyBaseOffset   = 1 << 31 // base -2^31 is key 0 of the session's range
)

// writeKey returns the key of the row of session row sid made on version
// base.
func writeKey(sid, base int64) (int64, error) {
	if base < -keyBaseOffset || base >= keyBaseOffset {
		return 0, fmt.Errorf("version %d is out of the range a session's writes can have", base)
	}
	return sid<<keySessionShift + base + keyBaseOffset, nil
}

// sessionKeys returns the range [lo, hi) of the keys of session row sid's
// writes rows.
func sessionKeys(sid int64) (lo, hi int64) {
	return sid << keySessionShift, (sid + 1) << keySessionShift
}

// messageHasSum is the flags bit of a message stored with its checksum.
const messageHasSum = 1

// errRowLayout is a writes row whose blob does not parse.
var errRowLayout = fmt.Errorf("%w: a row of the writes table does not parse", sessions.ErrCorrupt)

// encodeMessages returns the messages blob of rows, which must take
// consecutive positions, and the position after the last.
func encodeMessages(dst []byte, rows []rowstore.MessageRow) ([]byte, error) {
	for i, r := range rows {
		if i > 0 && r.Pos != rows[0].Pos+int64(i) {
			return nil, fmt.Errorf("message rows of one write at positions %d and %d are not consecutive", rows[0].Pos, r.Pos)
		}
		sum := int64(r.Body.Sum)
		dst = appendMessage(dst, r.Body.JSON, &sum)
	}
	return dst, nil
}

// appendMessage appends one message to a messages blob: body, with its
// checksum sum unless sum is nil.
func appendMessage[B string | []byte](dst []byte, body B, sum *int64) []byte {
	if sum == nil {
		dst = append(dst, 0)
	} else {
		dst = append(dst, messageHasSum)
		dst = binary.LittleEndian.AppendUint32(dst, uint32(*sum))
	}
	dst = binary.AppendUvarint(dst, uint64(len(body)))
	return append(dst, body...)
}

// storedMessage is one message of a messages blob.
type storedMessage struct {
	body []byte // within the blob
	sum  *int64 // nil when stored without a checksum
}

// eachMessage calls fn with each message of blob in order. The body it
// gets is part of blob.
func eachMessage(blob []byte, fn func(m storedMessage) error) error {
	for len(blob) > 0 {
		flags := blob[0]
		blob = blob[1:]
		var m storedMessage
		if flags&messageHasSum != 0 {
			if len(blob) < 4 {
				return errRowLayout
			}
			sum := int64(binary.LittleEndian.Uint32(blob))
			m.sum, blob = &sum, blob[4:]
		}
		var err error
		if m.body, blob, err = lengthPrefixed(blob); err != nil {
			return err
		}
		if err := fn(m); err != nil {
			return err
		}
	}
	return nil
}

// encodeEvents returns the events blob of events, whose seqs must
// increase, the first being at least seq.
func encodeEvents(dst []byte, seq int64, events []rowstore.EventRow) ([]byte, error) {
	prev := seq
	for i, e := range events {
		if e.Seq < prev || (i > 0 && e.Seq == prev) {
			return nil, fmt.Errorf("event seq %d does not follow %d", e.Seq, prev)
		}
		dst = binary.AppendUvarint(dst, uint64(e.Seq-prev))
		prev = e.Seq
		dst = binary.AppendUvarint(dst, uint64(len(e.Type)))
		dst = append(dst, e.Type...)
		dst = binary.AppendVarint(dst, e.Time)
		dst = appendNullable(dst, e.CorrID)
		dst = appendNullable(dst, e.Data)
		pos := int64(-1)
		if e.Pos != nil {
			pos = *e.Pos
		}
		dst = binary.AppendVarint(dst, pos)
	}
	return dst, nil
}

// appendNullable appends s as 0 for nil or its length plus one and its
// bytes.
func appendNullable(dst []byte, s *string) []byte {
	if s == nil {
		return append(dst, 0)
	}
	dst = binary.AppendUvarint(dst, uint64(len(*s))+1)
	return append(dst, *s...)
}

// storedEvent is one event of an events blob.
type storedEvent struct {
	seq, time int64
	typ       []byte
	corrID    []byte // nil for NULL
	data      []byte // nil for NULL
	pos       int64  // -1 for none
}

// eachEvent calls fn with each event of blob, whose first seq is counted
// from seq, in order. The bytes it gets are part of blob.
func eachEvent(blob []byte, seq int64, fn func(e *storedEvent) error) error {
	var e storedEvent
	e.seq = seq
	for len(blob) > 0 {
		d, n := binary.Uvarint(blob)
		if n <= 0 {
			return errRowLayout
		}
		e.seq += int64(d)
		var err error
		if e.typ, blob, err = lengthPrefixed(blob[n:]); err != nil {
			return err
		}
		if e.time, n = binary.Varint(blob); n <= 0 {
			return errRowLayout
		}
		if e.corrID, blob, err = nullablePrefixed(blob[n:]); err != nil {
			return err
		}
		if e.data, blob, err = nullablePrefixed(blob); err != nil {
			return err
		}
		if e.pos, n = binary.Varint(blob); n <= 0 {
			return errRowLayout
		}
		blob = blob[n:]
		if err := fn(&e); err != nil {
			return err
		}
	}
	return nil
}

// lengthPrefixed splits blob into the bytes its uvarint length prefix
// counts and the rest.
func lengthPrefixed(blob []byte) (field, rest []byte, err error) {
	n, k := binary.Uvarint(blob)
	if k <= 0 || n > uint64(len(blob)-k) {
		return nil, nil, errRowLayout
	}
	return blob[k : k+int(n)], blob[k+int(n):], nil
}

// nullablePrefixed is lengthPrefixed for appendNullable's form: field is
// nil for NULL, never nil otherwise.
func nullablePrefixed(blob []byte) (field, rest []byte, err error) {
	n, k := binary.Uvarint(blob)
	switch {
	case k <= 0 || (n > 0 && n-1 > uint64(len(blob)-k)):
		return nil, nil, errRowLayout
	case n == 0:
		return nil, blob[k:], nil
	}
	end := k + int(n-1)
	return blob[k:end:end], blob[end:], nil
}

// eventsSum returns the events_crc column of an events blob: its
// sessions.Checksum, NULL for no events.
func eventsSum(blob []byte) *int64 {
	if len(blob) == 0 {
		return nil
	}
	sum := int64(sessions.Checksum(blob))
	return &sum
}

// verifyEvents checks an events blob against its events_crc column (NULL
// for a row written before version 11, or without events: unchecked).
func verifyEvents(blob []byte, sum sql.NullInt64) error {
	if !sum.Valid {
		return nil
	}
	return sessions.VerifyFieldChecksum("events (type, time, correlation id, data)", blob, uint32(sum.Int64))
}

// rowError names the writes row of key in err.
func rowError(key int64, err error) error {
	if errors.Is(err, sessions.ErrCorrupt) {
		return fmt.Errorf("session row %d, write on version %d: %w", key>>keySessionShift, key&(1<<keySessionShift-1)-keyBaseOffset, err)
	}
	return err
}
