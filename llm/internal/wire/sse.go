package wire

import (
	"bufio"
	"bytes"
	"errors"
	"io"
)

// EventReader reads server-sent events (the text/event-stream format) from
// a response body. It follows the format's rules for the fields that model
// APIs use: `event:` names the event, `data:` lines are joined with
// newlines, lines starting with ':' are comments, and a blank line ends an
// event. Other fields (id, retry) are ignored.
type EventReader struct {
	r     *bufio.Reader
	long  []byte // a line longer than the buffer, assembled
	event []byte
	data  []byte
	eof   bool
	// terminator names the event a complete stream ends with; "": none.
	terminator string
}

// NewEventReader returns a reader of the events in r. A stream that must
// end with an event names it as terminator: the reader's caller returns
// on it, so reaching the end of the stream before it is an error (see
// Next).
func NewEventReader(r io.Reader, terminator string) *EventReader {
	return &EventReader{r: bufio.NewReaderSize(r, 32<<10), terminator: terminator}
}

// Next returns the next event: its name (empty when the event has no
// `event:` field) and its data. Both slices are valid until the next call.
// At the end of the stream Next returns io.EOF, or with a terminator the
// transient error Truncated(terminator): the reply is incomplete. An event whose last line
// is complete but which lacks the closing blank line is still returned (a
// server that stops right after its last line); a line cut short by the end
// of the stream is dropped, as are events without data.
func (s *EventReader) Next() (event, data []byte, err error) {
	s.event, s.data = s.event[:0], s.data[:0]
	hasData := false
	for {
		if s.eof {
			if hasData {
				return s.event, s.data, nil
			}
			if s.terminator != "" {
				return nil, nil, Truncated(s.terminator)
			}
			return nil, nil, io.EOF
		}
		line, err := s.readLine()
		if err != nil {
			return nil, nil, err
		}
		if line == nil { // the end of the stream
			s.eof = true
			continue
		}
		if len(line) == 0 {
			if hasData {
				return s.event, s.data, nil
			}
			s.event = s.event[:0]
			continue
		}
		if line[0] == ':' {
			continue
		}
		field, value := line, []byte(nil)
		if i := bytes.IndexByte(line, ':'); i >= 0 {
			field, value = line[:i], line[i+1:]
			if len(value) > 0 && value[0] == ' ' {
				value = value[1:]
			}
		}
		switch string(field) {
		case "event":
			s.event = append(s.event[:0], value...)
		case "data":
			if hasData {
				s.data = append(s.data, '\n')
			}
			s.data = append(s.data, value...)
			hasData = true
		}
	}
}

// readLine returns the next complete line without its line ending, or nil
// (and no error) at the end of the stream. A final line without a line
// ending is incomplete and is dropped.
func (s *EventReader) readLine() ([]byte, error) {
	line, err := s.r.ReadSlice('\n')
	if errors.Is(err, bufio.ErrBufferFull) {
		s.long = append(s.long[:0], line...)
		for errors.Is(err, bufio.ErrBufferFull) {
			line, err = s.r.ReadSlice('\n')
			s.long = append(s.long, line...)
		}
		line = s.long
	}
	if err == io.EOF {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	line = line[:len(line)-1]
	if n := len(line); n > 0 && line[n-1] == '\r' {
		line = line[:n-1]
	}
	return line, nil
}
