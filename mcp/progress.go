package mcp

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
)

// Progress notifications are taken off the wire as the SDK reads it, not
// from the SDK's notification handler: the SDK runs handlers on a
// goroutine of their own, so a call's last notifications could be handled
// after its result had been returned. A sniffer sees every message before
// the SDK has read it, so the notifications of a call are all delivered
// before its result is.

// progressMarker is in every progress notification's JSON.
var progressMarker = []byte(`"notifications/progress"`)

// maxSniffLine caps the line a sniffer keeps to look at: a progress
// notification is far smaller; longer lines (an image result) pass
// unexamined.
const maxSniffLine = 64 << 10

// sniffer passes a stream of newline-delimited JSON messages (stdio) or
// server-sent events (Streamable HTTP) through, handing each progress
// notification to onProgress first.
type sniffer struct {
	r          io.ReadCloser
	onProgress func(token string, p Progress)
	line       []byte
	skipping   bool // the current line went over maxSniffLine
}

func (s *sniffer) Read(p []byte) (int, error) {
	n, err := s.r.Read(p)
	s.scan(p[:n])
	return n, err
}

func (s *sniffer) Close() error { return s.r.Close() }

func (s *sniffer) scan(b []byte) {
	for len(b) > 0 {
		i := bytes.IndexByte(b, '\n')
		chunk := b
		if i >= 0 {
			chunk = b[:i]
		}
		if !s.skipping {
			if len(s.line)+len(chunk) > maxSniffLine {
				s.skipping, s.line = true, s.line[:0]
			} else {
				s.line = append(s.line, chunk...)
			}
		}
		if i < 0 {
			return
		}
		if !s.skipping {
			s.message(s.line)
		}
		s.line, s.skipping = s.line[:0], false
		b = b[i+1:]
	}
}

// message looks at one line: a JSON message, or an event's "data:" line.
func (s *sniffer) message(line []byte) {
	if !bytes.Contains(line, progressMarker) {
		return
	}
	if data, ok := bytes.CutPrefix(line, []byte("data:")); ok {
		line = data
	}
	var msg struct {
		Method string `json:"method"`
		Params struct {
			ProgressToken any     `json:"progressToken"`
			Progress      float64 `json:"progress"`
			Total         float64 `json:"total"`
			Message       string  `json:"message"`
		} `json:"params"`
	}
	if json.Unmarshal(bytes.TrimSpace(line), &msg) != nil || msg.Method != "notifications/progress" {
		return
	}
	token, ok := msg.Params.ProgressToken.(string)
	if !ok {
		return
	}
	s.onProgress(token, Progress{Progress: msg.Params.Progress, Total: msg.Params.Total, Message: msg.Params.Message})
}

// sniffing wraps an HTTP transport so that event-stream response bodies
// pass through a sniffer.
type sniffing struct {
	next       http.RoundTripper
	onProgress func(token string, p Progress)
}

func (s *sniffing) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := s.next.RoundTrip(req)
	if err == nil && strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		resp.Body = &sniffer{r: resp.Body, onProgress: s.onProgress}
	}
	return resp, err
}
