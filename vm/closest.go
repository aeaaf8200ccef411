package vm

import (
	"errors"
	"fmt"
	"sort"
	"strings"

	"go.starlark.net/resolve"
	"go.starlark.net/starlark"
)

// Closest returns the name of names nearest to key when it is near enough
// to be a likely typo (an edit distance of at most a third of its length,
// at least 1), else "": the "did you mean" of unknown option keys,
// undefined names, flags and providers.
func Closest(key string, names []string) string {
	best, bestDist := "", max(1, len(key)/3)+1
	for _, n := range names {
		if d := editDistance(key, n); d < bestDist {
			best, bestDist = n, d
		}
	}
	return best
}

// editDistance is the Levenshtein distance of a and b.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

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
		if near := Closest(name, names); near != "" {
			list[i].Msg += fmt.Sprintf(" (did you mean %s?)", near)
		}
	}
	return err
}
