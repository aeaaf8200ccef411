package serve

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
)

// apiError is an error a handler answers with: its status, a stable
// machine-readable code and a message for people. It is written as
// {"error": {"code", "message"}}.
type apiError struct {
	status     int
	code       string
	message    string
	retryAfter int // seconds; sets Retry-After when > 0
}

func (e *apiError) Error() string { return e.message }

// errorf returns an apiError with a formatted message.
func errorf(status int, code, format string, args ...any) *apiError {
	return &apiError{status: status, code: code, message: fmt.Sprintf(format, args...)}
}

// errorBody is the JSON shape of every error response.
type errorBody struct {
	Error errorDetail `json:"error"`
}

type errorDetail struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// writeAPIError writes e as the response.
func writeAPIError(w http.ResponseWriter, e *apiError) {
	if e.retryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(e.retryAfter))
	}
	writeJSON(w, e.status, errorBody{Error: errorDetail{Code: e.code, Message: e.message}})
}

// writeJSON writes v as the JSON response with the given status.
func writeJSON(w http.ResponseWriter, status int, v any) {
	body, err := json.Marshal(v)
	if err != nil {
		status = http.StatusInternalServerError
		body = []byte(`{"error":{"code":"internal","message":"internal error"}}`)
	}
	h := w.Header()
	h.Set("Content-Type", "application/json; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	w.Write(body)
	w.Write([]byte("\n"))
}
