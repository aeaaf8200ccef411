// Package servetest holds what the tests of skein serve share across
// packages: a reader of a session's event stream
// (GET /api/sessions/{id}/events).
package servetest

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
)

// Event is a stored event read from a session's event stream.
type Event struct {
	Seq       int64
	Type      string
	Role      string
	Timestamp time.Time
}

// ScanEvents reads a session's SSE stream until it ends: it closes ready
// at the stream's ": ready" comment and gives each stored event (a frame
// with an id; text_delta frames carry none and are skipped) to each. A
// frame whose id or data cannot be read stops it with an error naming
// the frame. A read error ends the stream like its end does: tests end a
// stream by closing its body or cancelling its request.
func ScanEvents(r io.Reader, ready chan<- struct{}, each func(Event)) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	var seq int64
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == ": ready":
			close(ready)
		case strings.HasPrefix(line, "id: "):
			n, err := strconv.ParseInt(line[4:], 10, 64)
			if err != nil || n <= 0 {
				return fmt.Errorf("event stream: frame id %q is not a positive number", line[4:])
			}
			seq = n
		case strings.HasPrefix(line, "data: ") && seq > 0:
			var e Event
			if err := json.Unmarshal([]byte(line[6:]), &e); err != nil {
				return fmt.Errorf("event stream: event %d: %v", seq, err)
			}
			e.Seq = seq
			each(e)
			seq = 0
		}
	}
	return nil
}
