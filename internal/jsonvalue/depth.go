package jsonvalue

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// MaxDepth is how deeply JSON values may nest wherever they enter skein:
// a message's tool arguments, metadata and usage, session metadata, an
// imported export, a stored row, a value converted from Starlark. A list
// or object inside another is one level deeper; a value nested more than
// MaxDepth levels is refused with a DepthError naming where. Deeper data
// would cost quadratic memory to convert and overflow the stack of
// recursive encoders, and no provider accepts it anyway.
const MaxDepth = 1000

// DepthError is the refusal of a value nested more than MaxDepth levels.
type DepthError struct {
	// Path leads to the first list or object past the limit: ".a[0][0]"
	// from the value checked ("" when unknown). Long paths are shortened
	// in the middle.
	Path string
}

func (e *DepthError) Error() string {
	where := ""
	if e.Path != "" {
		where = "at " + shortPath(e.Path) + ": "
	}
	return fmt.Sprintf("%svalue nested deeper than %d levels", where, MaxDepth)
}

// shortPath keeps the two ends of a long path.
func shortPath(p string) string {
	const keep = 60
	if len(p) <= 2*keep+3 {
		return p
	}
	return p[:keep] + "..." + p[len(p)-keep:]
}

// ErrDeep is the fast Parser's refusal of a value past MaxDepth; the
// caller finds the path with deepPath.
var ErrDeep = errors.New("jsonvalue: value nested too deeply")

// checkDepth checks that v, a JSON value, nests at most MaxDepth levels
// below depth, returning a DepthError with the path from v otherwise. It
// recurses at most MaxDepth levels.
func checkDepth(v any, depth int) error {
	switch v := v.(type) {
	case []any:
		if depth >= MaxDepth {
			return &DepthError{}
		}
		for i, x := range v {
			if err := checkDepth(x, depth+1); err != nil {
				return prependPath(err, "["+strconv.Itoa(i)+"]")
			}
		}
	case map[string]any:
		if depth >= MaxDepth {
			return &DepthError{}
		}
		for k, x := range v {
			if err := checkDepth(x, depth+1); err != nil {
				return prependPath(err, pathKey(k))
			}
		}
	}
	return nil
}

// prependPath adds a step in front of a DepthError's path.
func prependPath(err error, step string) error {
	var de *DepthError
	if errors.As(err, &de) {
		return &DepthError{Path: step + de.Path}
	}
	return err
}

// pathKey writes an object key as a path step: ".name", or `["a b"]`
// when it is not a plain name.
func pathKey(k string) string {
	plain := k != ""
	for _, r := range k {
		if !(r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9') {
			plain = false
			break
		}
	}
	if plain {
		return "." + k
	}
	return "[" + strconv.Quote(k) + "]"
}

// CheckTextDepth checks that the JSON text data nests at most MaxDepth
// levels, without decoding it: a DepthError naming the path otherwise.
// Text that is not JSON passes (the decoder will say what is wrong).
func CheckTextDepth(data []byte) error {
	if path := deepPath(data); path != "" {
		return &DepthError{Path: path}
	}
	return nil
}

// deepPath scans the JSON text data, without recursion, for the first
// list or object nested deeper than MaxDepth and returns its path (as
// checkDepth writes it). It returns "" if there is none or data is not
// JSON enough to tell.
func deepPath(data []byte) string {
	type level struct {
		object bool
		key    string
		index  int
	}
	var stack []level
	var lastString string
	path := func() string {
		var b strings.Builder
		for _, l := range stack[:len(stack)-1] {
			if l.object {
				b.WriteString(pathKey(l.key))
			} else {
				b.WriteString("[" + strconv.Itoa(l.index) + "]")
			}
		}
		return b.String()
	}
	for i := 0; i < len(data); i++ {
		switch c := data[i]; c {
		case '"':
			j := i + 1
			for j < len(data) && data[j] != '"' {
				if data[j] == '\\' {
					j++
				}
				j++
			}
			if j >= len(data) {
				return ""
			}
			lastString, _ = strconv.Unquote(string(data[i : j+1]))
			i = j
		case ':':
			if n := len(stack); n > 0 && stack[n-1].object {
				stack[n-1].key = lastString
			}
		case ',':
			if n := len(stack); n > 0 && !stack[n-1].object {
				stack[n-1].index++
			}
		case '[', '{':
			stack = append(stack, level{object: c == '{'})
			if len(stack) > MaxDepth {
				return path()
			}
		case ']', '}':
			if len(stack) == 0 {
				return ""
			}
			stack = stack[:len(stack)-1]
		}
	}
	return ""
}
