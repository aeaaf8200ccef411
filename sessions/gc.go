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
	// deletable reports whether id and all its forks match, listing
	// them in c.Deleted, forks first.
	c := &Collection{}
	verdict := map[string]bool{}
	var deletable func(id string) bool
	deletable = func(id string) bool {
		if v, ok := verdict[id]; ok {
			return v
		}
		ok := matched[id]
		for _, child := range children[id] {
			ok = deletable(child) && ok
		}
		verdict[id] = ok
		if ok {
			c.Deleted = append(c.Deleted, id)
		}
		return ok
	}
	for _, s := range matches {
		if !deletable(s.ID) {
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
