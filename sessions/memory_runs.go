package sessions

import (
	"context"
	"slices"
	"sort"
)

var _ RunBackend = (*MemoryBackend)(nil)

// memRun is a run record held by the memory backend.
type memRun struct {
	rec RunRecord
}

func cloneRun(r *RunRecord, withSteps bool) *RunRecord {
	out := *r
	out.Head = slices.Clone(r.Head)
	out.Steps = nil
	if withSteps {
		out.Steps = make([][]byte, len(r.Steps))
		for i, s := range r.Steps {
			out.Steps[i] = slices.Clone(s)
		}
	}
	return &out
}

// CreateRun stores a new run record in memory.
func (b *MemoryBackend) CreateRun(_ context.Context, rec *RunRecord) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.runs == nil {
		b.runs = map[string]*memRun{}
	}
	if _, ok := b.runs[rec.ID]; ok {
		return ErrRunExists
	}
	b.runs[rec.ID] = &memRun{rec: *cloneRun(rec, true)}
	return nil
}

// UpdateRun applies u to a run record in memory.
func (b *MemoryBackend) UpdateRun(_ context.Context, id string, u *RunUpdate) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	r, ok := b.runs[id]
	if !ok {
		return ErrRunNotFound
	}
	r.rec.Status, r.rec.UpdatedAt, r.rec.Head = u.Status, u.UpdatedAt, slices.Clone(u.Head)
	for _, s := range u.Steps {
		r.rec.Steps = append(r.rec.Steps, slices.Clone(s))
	}
	return nil
}

// LoadRun returns a copy of a run record.
func (b *MemoryBackend) LoadRun(_ context.Context, id string) (*RunRecord, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	r, ok := b.runs[id]
	if !ok {
		return nil, ErrRunNotFound
	}
	return cloneRun(&r.rec, true), nil
}

// ListRuns lists the run records in memory, newest first.
func (b *MemoryBackend) ListRuns(_ context.Context, f RunFilter) ([]RunSummary, int, error) {
	b.mu.Lock()
	var all []RunSummary
	for _, r := range b.runs {
		if len(f.Statuses) > 0 && !slices.Contains(f.Statuses, r.rec.Status) {
			continue
		}
		if f.Workflow != "" && r.rec.Workflow != f.Workflow {
			continue
		}
		all = append(all, RunSummary{ID: r.rec.ID, Workflow: r.rec.Workflow, Fingerprint: r.rec.Fingerprint, Status: r.rec.Status,
			CreatedAt: r.rec.CreatedAt, UpdatedAt: r.rec.UpdatedAt, Steps: len(r.rec.Steps)})
	}
	b.mu.Unlock()
	sort.Slice(all, func(i, j int) bool {
		if !all[i].CreatedAt.Equal(all[j].CreatedAt) {
			return all[i].CreatedAt.After(all[j].CreatedAt)
		}
		return all[i].ID > all[j].ID
	})
	return pageRuns(all, f), len(all), nil
}

// pageRuns applies f's Offset and Limit.
func pageRuns(all []RunSummary, f RunFilter) []RunSummary {
	if f.Offset >= len(all) {
		return nil
	}
	all = all[f.Offset:]
	if f.Limit > 0 && f.Limit < len(all) {
		all = all[:f.Limit]
	}
	return all
}
