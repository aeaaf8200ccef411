package sessions

import (
	"fmt"
	"unicode"
	"unicode/utf8"
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
