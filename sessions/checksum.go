package sessions

import (
	"errors"
	"fmt"
	"hash/crc32"
	"sync"
)

// ErrCorrupt means stored data failed its checksum: the storage under a
// backend (a damaged disk page, a file edited by hand) changed it after
// it was written. Loads return it instead of the altered data.
var ErrCorrupt = errors.New("stored data is damaged")

// castagnoli is the CRC-32C table, made on first use: making it costs
// about 0.2 ms, which a run that stores nothing durably need not pay at
// start-up.
var castagnoli = sync.OnceValue(func() *crc32.Table { return crc32.MakeTable(crc32.Castagnoli) })

// Checksum returns the checksum a durable backend stores beside a
// message's stored body (its JSON, as MarshalJSON writes it), computed
// once when the message is appended, and beside every other stored
// payload (title, summary, first prompt, metadata, event data) that is
// not sealed with a store key: CRC-32C, which the processors skein
// runs on compute in hardware. Every backend uses this function, so a
// body moved from one backend to another keeps its checksum.
func Checksum(body []byte) uint32 { return crc32.Checksum(body, castagnoli()) }

// VerifyChecksum checks body, read back from storage as message index of
// a session's messages, against the checksum stored with it. A mismatch
// is ErrCorrupt, naming the index; the caller adds the session id.
func VerifyChecksum(index int, body []byte, sum uint32) error {
	return VerifyFieldChecksum(fmt.Sprintf("message %d", index), body, sum)
}

// VerifyFieldChecksum checks the stored value of field (what a message
// names it: "title", "summary", "metadata", "event 12 data", ...)
// against the checksum stored with it. A mismatch is ErrCorrupt naming
// the field; the caller adds the session id.
func VerifyFieldChecksum(field string, value []byte, sum uint32) error {
	if got := Checksum(value); got != sum {
		return fmt.Errorf("%s: %w: its checksum does not match (crc32c %08x stored, %08x computed), so the storage changed it after it was written (a damaged disk, an edit by hand): restore the store from a backup", field, ErrCorrupt, sum, got)
	}
	return nil
}
