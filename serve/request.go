package serve

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"reflect"
	"strconv"
	"strings"

	"github.com/skein-dev/skein/sessions"
)

// maxIDLength bounds a session id.
const maxIDLength = 128

// checkID validates a session id from a path or a body: 1 to 128
// characters from letters, digits and "-_.:", not "." or "..", so an id
// never names a path and never needs escaping.
func checkID(id string) *apiError {
	if id == "" || len(id) > maxIDLength || id == "." || id == ".." {
		return errorf(http.StatusBadRequest, "bad_id", "session id must be 1 to %d characters from letters, digits and -_.: (got %q)", maxIDLength, truncate(id, 40))
	}
	for _, c := range id {
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.ContainsRune("-_.:", c)
		if !ok {
			return errorf(http.StatusBadRequest, "bad_id", "session id must be 1 to %d characters from letters, digits and -_.: (got %q)", maxIDLength, truncate(id, 40))
		}
	}
	return nil
}

// pathID returns the {id} of the request's path, validated: a session id
// as checkID allows, or the id of a workflow stage's session,
// "RUN/NODE" (written %2F in the path), whose parts it allows.
func pathID(r *http.Request) (string, error) {
	id := r.PathValue("id")
	if run, node, ok := strings.Cut(id, "/"); ok && len(id) <= 2*maxIDLength+1 && checkID(run) == nil && checkID(node) == nil {
		return id, nil
	}
	if e := checkID(id); e != nil {
		return "", e
	}
	return id, nil
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n] + "..."
	}
	return s
}

// decodeBody decodes the request's JSON body into v (a pointer to a
// struct): one object, known fields only, matched case-sensitively
// (encoding/json alone would take {"TITLE": ...} for title). An empty
// body decodes as {} when emptyOK.
func decodeBody(r *http.Request, v any, emptyOK bool) error {
	data, err := io.ReadAll(r.Body)
	if err != nil {
		return badJSON(err)
	}
	if len(bytes.TrimSpace(data)) == 0 {
		if emptyOK {
			return nil
		}
		return errorf(http.StatusBadRequest, "bad_json", "request body is empty, want a JSON object")
	}
	if err := checkFieldNames(data, v); err != nil {
		return err
	}
	if err := checkNumbers(data); err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return badJSON(err)
	}
	if _, err := dec.Token(); err != io.EOF {
		if err != nil {
			return badJSON(err)
		}
		return errorf(http.StatusBadRequest, "bad_json", "request body has data after the JSON object")
	}
	return nil
}

// checkFieldNames refuses a member of the JSON object data whose name is
// not exactly the JSON name of a field of the struct v points to. Data
// that is not an object is left to the decoder, which says what it is.
func checkFieldNames(data []byte, v any) error {
	var members map[string]json.RawMessage
	if json.Unmarshal(data, &members) != nil {
		return nil
	}
	known := map[string]bool{}
	t := reflect.TypeOf(v).Elem()
	for i := range t.NumField() {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		if name == "" {
			name = t.Field(i).Name
		}
		known[name] = true
	}
	for name := range members {
		if known[name] {
			continue
		}
		for k := range known {
			if strings.EqualFold(k, name) {
				return errorf(http.StatusBadRequest, "unknown_field", "unknown field '%s' (field names are case-sensitive: '%s')", sessions.Escape(truncate(name, 40)), k)
			}
		}
		return errorf(http.StatusBadRequest, "unknown_field", "unknown field '%s'", sessions.Escape(truncate(name, 40)))
	}
	return nil
}

// badJSON turns a decoding error into a 400 (or 413 for a body over the
// limit).
func badJSON(err error) error {
	var mbe *http.MaxBytesError
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &mbe):
		return err
	case errors.As(err, &syn):
		return errorf(http.StatusBadRequest, "bad_json", "request body is not valid JSON: %v (at byte %d)", syn, syn.Offset)
	case errors.As(err, &typ):
		if typ.Field == "" {
			return errorf(http.StatusBadRequest, "bad_json", "request body must be a JSON object, got %s", typ.Value)
		}
		return errorf(http.StatusBadRequest, "bad_field", "field %s must be %s, got %s", typ.Field, jsonType(typ.Type.Kind().String()), typ.Value)
	case errors.Is(err, io.ErrUnexpectedEOF):
		return errorf(http.StatusBadRequest, "bad_json", "request body is truncated JSON")
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		name := strings.TrimPrefix(err.Error(), "json: unknown field ")
		if n, err := strconv.Unquote(name); err == nil {
			name = n
		}
		return errorf(http.StatusBadRequest, "unknown_field", "unknown field '%s'", sessions.Escape(truncate(name, 40)))
	}
	return errorf(http.StatusBadRequest, "bad_json", "request body is not valid JSON: %v", err)
}

func jsonType(kind string) string {
	switch kind {
	case "string":
		return "a string"
	case "map", "struct":
		return "an object"
	case "slice":
		return "an array"
	case "bool":
		return "a boolean"
	}
	return "a number"
}

// Paging limits of the list endpoint.
const (
	defaultLimit = 20
	maxLimit     = 1000
)

// queryInt parses the query parameter name as an int in [min, max],
// def when absent.
func queryInt(r *http.Request, name string, def, min, max int) (int, error) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < min || n > max {
		return 0, errorf(http.StatusBadRequest, "bad_query", "query parameter %s must be an integer from %d to %d, got %q", name, min, max, truncate(v, 40))
	}
	return n, nil
}

// errNotFound is the 404 of an unknown session.
func errNotFound(id string) error {
	return errorf(http.StatusNotFound, "not_found", "unknown session id '%s'", id)
}

// pageQuery returns a list's limit (1 to maxLimit, default defaultLimit)
// and offset (default 0) query parameters.
func pageQuery(r *http.Request) (limit, offset int, err error) {
	if limit, err = queryInt(r, "limit", defaultLimit, 1, maxLimit); err != nil {
		return 0, 0, err
	}
	offset, err = queryInt(r, "offset", 0, 0, 1<<31-1)
	return limit, offset, err
}

// checkNumbers refuses a body holding a number no float64 holds
// (1e999999): stored as metadata it would fail later, as a 500.
func checkNumbers(data []byte) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	for {
		tok, err := dec.Token()
		if err != nil {
			return nil // the decoder reports malformed JSON
		}
		if n, ok := tok.(json.Number); ok {
			if _, err := strconv.ParseFloat(string(n), 64); err != nil {
				return errorf(http.StatusBadRequest, "bad_json", "request body: number %s is out of range", truncateNumber(string(n)))
			}
		}
	}
}

// truncateNumber shortens a long number for a message.
func truncateNumber(n string) string {
	if len(n) > 40 {
		return n[:40] + "..."
	}
	return n
}
