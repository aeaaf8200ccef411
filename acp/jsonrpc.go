package acp

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"sync"
)

// maxMessageBytes bounds one incoming JSON-RPC message (one line): the
// limit of the SDK's own reader, which closes the connection past it.
const maxMessageBytes = 10 << 20

// JSON-RPC error codes this file answers with.
const (
	codeParseError     = -32700
	codeInvalidRequest = -32600
)

// lockedWriter serialises whole-message writes to the peer: the SDK
// writes each message with one Write call under its own lock, and the
// guard writes its error responses through the same writer.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// guard reads the peer's messages from in and passes the well-formed ones
// on through the returned reader, answering every other line itself.
//
// Written by hand because github.com/coder/acp-go-sdk (v0.13) logs a
// line that is not JSON, a JSON-RPC batch or a message with neither id
// nor method, and drops it without a response, and closes the whole
// connection on a line longer than its buffer. JSON-RPC 2.0 asks for an
// error response to each: -32700 (parse error) for invalid JSON, -32600
// (invalid request) for anything that is not a request, notification or
// response object; the id is echoed when it can be read, else null.
// Requests for unknown methods and with bad params reach the SDK, which
// answers them (-32601, -32602).
func guard(in io.Reader, out io.Writer) io.Reader {
	pr, pw := io.Pipe()
	go func() {
		r := bufio.NewReaderSize(in, 64<<10)
		for {
			line, tooLong, err := readLine(r)
			if tooLong {
				writeError(out, nil, codeInvalidRequest, "Invalid request", "message longer than 10 MiB")
			} else if len(bytes.TrimSpace(line)) > 0 {
				if id, code, msg, detail := check(line); code != 0 {
					writeError(out, id, code, msg, detail)
				} else if _, werr := pw.Write(append(line, '\n')); werr != nil {
					return
				}
			}
			if err != nil {
				pw.CloseWithError(err)
				return
			}
		}
	}()
	return pr
}

// readLine reads one line (without its newline) of at most
// maxMessageBytes; a longer line is read to its end and dropped, and
// tooLong reports it. err is io.EOF (or the read error) after the last
// line.
func readLine(r *bufio.Reader) (line []byte, tooLong bool, err error) {
	for {
		chunk, err := r.ReadSlice('\n')
		if !tooLong {
			if len(line)+len(chunk) > maxMessageBytes+1 {
				tooLong, line = true, nil
			} else {
				line = append(line, chunk...)
			}
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		return bytes.TrimSuffix(line, []byte("\n")), tooLong, err
	}
}

// check validates one message. code is 0 for a well-formed one;
// otherwise the error to answer, with the message's id when it has a
// readable one.
func check(line []byte) (id json.RawMessage, code int, message, detail string) {
	if !json.Valid(line) {
		return nil, codeParseError, "Parse error", "the message is not valid JSON"
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(line, &m); err != nil {
		if bytes.HasPrefix(bytes.TrimSpace(line), []byte("[")) {
			return nil, codeInvalidRequest, "Invalid request", "JSON-RPC batches are not supported by ACP"
		}
		return nil, codeInvalidRequest, "Invalid request", "a JSON-RPC message must be an object"
	}
	rawID, hasID := m["id"]
	if hasID && !validID(rawID) {
		return nil, codeInvalidRequest, "Invalid request", "id must be a string, a number or null"
	}
	if hasID {
		id = rawID
	}
	if v, ok := m["jsonrpc"]; !ok || string(bytes.TrimSpace(v)) != `"2.0"` {
		return id, codeInvalidRequest, "Invalid request", `jsonrpc must be "2.0"`
	}
	method, hasMethod := m["method"]
	_, hasResult := m["result"]
	_, hasErr := m["error"]
	switch {
	case hasMethod:
		var s string
		if json.Unmarshal(method, &s) != nil || s == "" {
			return id, codeInvalidRequest, "Invalid request", "method must be a non-empty string"
		}
		if p, ok := m["params"]; ok {
			if t := bytes.TrimSpace(p); len(t) == 0 || t[0] != '{' && t[0] != '[' && string(t) != "null" {
				return id, codeInvalidRequest, "Invalid request", "params must be an object"
			}
		}
	case hasID && (hasResult || hasErr):
		// a response to one of our requests
	default:
		return id, codeInvalidRequest, "Invalid request", "a message needs a method (request or notification) or a result or error (response)"
	}
	return nil, 0, "", ""
}

// validID reports whether raw is a JSON-RPC id: a string, a number or
// null.
func validID(raw json.RawMessage) bool {
	t := bytes.TrimSpace(raw)
	if len(t) == 0 {
		return false
	}
	switch t[0] {
	case '"', 'n', '-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
		return true
	}
	return false
}

// writeError writes one JSON-RPC error response (id null when id is nil).
func writeError(w io.Writer, id json.RawMessage, code int, message, detail string) {
	if id == nil {
		id = json.RawMessage("null")
	}
	type rpcError struct {
		Code    int            `json:"code"`
		Message string         `json:"message"`
		Data    map[string]any `json:"data,omitempty"`
	}
	b, err := json.Marshal(struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Error   rpcError        `json:"error"`
	}{"2.0", id, rpcError{code, message, map[string]any{"details": detail}}})
	if err != nil {
		return
	}
	w.Write(append(b, '\n'))
}
