package vm

import (
	"encoding/binary"
	"fmt"
	"sync"
	"time"

	"github.com/google/uuid"
)

// UUIDv7 mints a time-ordered random UUIDv7 string: the default id source.
func UUIDv7() string {
	id, err := uuid.NewV7()
	if err != nil {
		// NewV7 fails only if the system's random source does.
		panic(fmt.Sprintf("vm: minting a UUIDv7: %v", err))
	}
	return id.String()
}

// SeededIDs returns a deterministic id source for tests: UUIDv7-shaped
// strings whose timestamp comes from clock and whose remaining bits are
// seed and a counter, so a run mints the same ids every time.
func SeededIDs(seed uint64, clock func() time.Time) func() string {
	var mu sync.Mutex
	var n uint64
	return func() string {
		mu.Lock()
		n++
		count := n
		mu.Unlock()
		var b [16]byte
		ms := uint64(clock().UnixMilli())
		b[0], b[1], b[2], b[3], b[4], b[5] = byte(ms>>40), byte(ms>>32), byte(ms>>24), byte(ms>>16), byte(ms>>8), byte(ms)
		binary.BigEndian.PutUint16(b[6:8], uint16(seed&0x0fff)|0x7000) // version 7
		binary.BigEndian.PutUint64(b[8:16], count&0x3fffffffffffffff|0x8000000000000000)
		return uuid.UUID(b).String()
	}
}

// FixedClock returns a clock that always reports t: tests use it so
// timestamps are reproducible.
func FixedClock(t time.Time) func() time.Time {
	return func() time.Time { return t }
}
