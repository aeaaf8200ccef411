package sessions

import (
	"context"
	"errors"
	"fmt"
	"strings"
)

// Lineage walks. Parent links are data: an import or an older version may
// have stored a cycle (A's parent B, B's parent A). Every walk here is
// iterative with a visited set, and one that meets a cycle stops with
// ErrCycle instead of recursing or looping for ever.

// CheckParentChain checks, for a backend's Create, that a new session id
// with parent parent does not close a cycle: walking up from parent
// through parentOf (the stored parent of an id; false when the id is not
// stored) must not reach id. A cycle already stored above parent is
// ErrCycle too. A backend calls it where the check and the insert are
// atomic (under its lock, in its transaction).
func CheckParentChain(id, parent string, parentOf func(id string) (parent string, stored bool, err error)) error {
	path := []string{id}
	seen := map[string]bool{id: true}
	for p := parent; p != ""; {
		path = append(path, p)
		if seen[p] {
			return cycleError(id, path)
		}
		seen[p] = true
		next, ok, err := parentOf(p)
		if err != nil || !ok {
			return err
		}
		p = next
	}
	return nil
}

// cycleError describes the cycle at the end of path, whose last id is
// the one seen twice.
func cycleError(id string, path []string) error {
	return IDError(id, fmt.Errorf("%w: %s", ErrCycle, strings.Join(path, " -> ")))
}

// Descendants returns the forks of id and their forks, depth first in
// fork order, walking the stored ChildIDs. A fork that is not stored
// (deleted meanwhile) is listed without its forks. A stored cycle stops
// the walk with ErrCycle, and the ids found so far.
func Descendants(ctx context.Context, b Backend, id string) ([]string, error) {
	meta, err := b.LoadMeta(ctx, id)
	if err != nil {
		return nil, err
	}
	var out []string
	seen := map[string]bool{id: true}
	// stack holds, for each level of the walk, the ids still to visit,
	// in reverse.
	type frame struct {
		path     []string
		children []string
	}
	stack := []frame{{path: []string{id}, children: meta.ChildIDs}}
	for len(stack) > 0 {
		top := &stack[len(stack)-1]
		if len(top.children) == 0 {
			stack = stack[:len(stack)-1]
			continue
		}
		c := top.children[0]
		top.children = top.children[1:]
		path := append(append([]string{}, top.path...), c)
		if seen[c] {
			return out, cycleError(id, path)
		}
		seen[c] = true
		out = append(out, c)
		m, err := b.LoadMeta(ctx, c)
		if errors.Is(err, ErrNotFound) {
			continue
		}
		if err != nil {
			return out, err
		}
		stack = append(stack, frame{path: path, children: m.ChildIDs})
	}
	return out, nil
}
