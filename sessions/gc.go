package sessions

import (
	"context"
	"errors"
	"slices"
)

// Collection is the outcome of Collect.
type Collection struct {
	// Deleted lists the deleted sessions (with a dry run, those that
	// would be), each after its forks.
	Deleted []string
	// Kept lists the matching sessions that were not deleted because a
	// fork of theirs does not match (deleting them would delete it), in
	// id order.
	Kept []string
}

// Collect deletes the stored sessions that match f (its Limit and Offset
// are ignored), for garbage collection. A session is deleted only with
// all its forks, so one that has a fork that does not match f is kept,
// with its ancestors; Collect never deletes a session f does not match.
// With dryRun it only reports what it would delete. A session deleted or
// forked meanwhile by another process is skipped (kept, if forked).
func Collect(ctx context.Context, b Backend, f ListFilter, dryRun bool) (*Collection, error) {
	f.Limit, f.Offset = 0, 0
	matches, _, err := b.List(ctx, f)
	if err != nil {
		return nil, err
	}
	children := map[string][]string{}
	matched := map[string]bool{}
	for _, s := range matches {
		matched[s.ID] = true
		if s.Children > 0 {
			meta, err := b.LoadMeta(ctx, s.ID)
			if errors.Is(err, ErrNotFound) {
				continue
			}
			if err != nil {
				return nil, err
			}
			children[s.ID] = meta.ChildIDs
		}
	}
	// A session is deletable when it and all its forks match. The walk
	// is iterative (post-order: forks before their parent) and stops with
	// ErrCycle on a cycle stored by an older version.
	c := &Collection{}
	deletable := map[string]bool{}
	for _, s := range matches {
		if err := judge(s.ID, matched, children, deletable, &c.Deleted); err != nil {
			return nil, err
		}
		if !deletable[s.ID] {
			c.Kept = append(c.Kept, s.ID)
		}
	}
	slices.Sort(c.Kept)
	if dryRun {
		return c, nil
	}
	deleted := c.Deleted[:0:0]
	for _, id := range c.Deleted {
		switch err := b.Delete(ctx, id, false); {
		case err == nil:
			deleted = append(deleted, id)
		case errors.Is(err, ErrHasChildren):
			c.Kept = append(c.Kept, id) // forked meanwhile
		case errors.Is(err, ErrNotFound):
			// deleted meanwhile
		default:
			c.Deleted = deleted
			return c, err
		}
	}
	c.Deleted = deleted
	slices.Sort(c.Kept)
	return c, nil
}

// judge decides, for root and its forks not yet in verdict, whether each
// matches with all its forks, appending the deletable ones to deleted,
// forks first. It walks with an explicit stack: a fork tree as deep as
// the store allows does not grow the Go stack, and a cycle is ErrCycle.
func judge(root string, matched map[string]bool, children map[string][]string, verdict map[string]bool, deleted *[]string) error {
	if _, ok := verdict[root]; ok {
		return nil
	}
	type frame struct {
		id   string
		next int // index of the next child to visit
		ok   bool
	}
	onPath := map[string]bool{root: true}
	stack := []frame{{id: root, ok: matched[root]}}
	for len(stack) > 0 {
		top := &stack[len(stack)-1]
		if kids := children[top.id]; top.next < len(kids) {
			child := kids[top.next]
			top.next++
			if v, ok := verdict[child]; ok {
				top.ok = top.ok && v
				continue
			}
			if onPath[child] {
				path := make([]string, 0, len(stack)+1)
				for _, f := range stack {
					path = append(path, f.id)
				}
				return cycleError(root, append(path, child))
			}
			onPath[child] = true
			stack = append(stack, frame{id: child, ok: matched[child]})
			continue
		}
		done := *top
		stack = stack[:len(stack)-1]
		delete(onPath, done.id)
		verdict[done.id] = done.ok
		if done.ok {
			*deleted = append(*deleted, done.id)
		}
		if len(stack) > 0 {
			parent := &stack[len(stack)-1]
			parent.ok = parent.ok && done.ok
		}
	}
	return nil
}
