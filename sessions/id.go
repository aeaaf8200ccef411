package sessions

import (
	"crypto/sha256"
	"fmt"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/google/uuid"
)

// MaxIDLen is the longest session id, in bytes.
const MaxIDLen = 512

// CheckID checks a new session id: not empty, at most MaxIDLen bytes of
// valid UTF-8, and no control characters (an id is printed in listings,
// where an escape sequence would redraw the terminal and a newline would
// break the table).
func CheckID(id string) error {
	switch {
	case id == "":
		return fmt.Errorf("session id must not be empty")
	case len(id) > MaxIDLen:
		return fmt.Errorf("session id is %d bytes long, more than %d", len(id), MaxIDLen)
	case !utf8.ValidString(id):
		return fmt.Errorf("session id %q is not valid UTF-8", id)
	}
	for _, r := range id {
		if unicode.IsControl(r) {
			return fmt.Errorf("session id %q contains a control character (%U)", id, r)
		}
	}
	return nil
}

// NewMessageID mints a message id: a random UUIDv7, the store's default
// id source (see WithIDs).
func NewMessageID() string { return uuid.Must(uuid.NewV7()).String() }

// DerivedMessageID returns the id of a message that was stored or
// exported before messages had ids: UUIDv7-shaped, its timestamp t's
// milliseconds and its other bits a SHA-256 of key (what identifies the
// message where it is kept, such as its storage position), so the same
// message always gets the same id and different keys get different ids.
func DerivedMessageID(t time.Time, key string) string {
	var b [16]byte
	sum := sha256.Sum256([]byte(key))
	copy(b[6:], sum[:10])
	ms := uint64(max(t.UnixMilli(), 0))
	b[0], b[1], b[2], b[3], b[4], b[5] = byte(ms>>40), byte(ms>>32), byte(ms>>24), byte(ms>>16), byte(ms>>8), byte(ms)
	b[6] = b[6]&0x0f | 0x70 // version 7
	b[8] = b[8]&0x3f | 0x80 // variant 10
	return uuid.UUID(b).String()
}
