package vm

import (
	"errors"
	"fmt"
	"sort"
	"strings"

	"go.starlark.net/resolve"
	"go.starlark.net/starlark"

	"github.com/skein-dev/skein/internal/didyoumean"
)

// hintUndefined adds "did you mean" to the "undefined: x" errors of a
// resolve error list, from the predeclared and universal names and the
// globals given (the REPL's); other errors are returned as they are.
func (s *State) hintUndefined(err error, globals starlark.StringDict) error {
	var list resolve.ErrorList
	if !errors.As(err, &list) {
		return err
	}
	var names []string
	for _, d := range []starlark.StringDict{s.predeclared, starlark.Universe, globals} {
		for k := range d {
			names = append(names, k)
		}
	}
	sort.Strings(names) // ties go to the first name, whatever the map order
	for i, e := range list {
		name, ok := strings.CutPrefix(e.Msg, "undefined: ")
		if !ok {
			continue
		}
		if near := didyoumean.Closest(name, names); near != "" {
			list[i].Msg += fmt.Sprintf(" (did you mean %s?)", near)
		}
	}
	return err
}
