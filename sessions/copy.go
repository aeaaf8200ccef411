package sessions

import (
	"context"
	"errors"
	"fmt"
	"github.com/skein-dev/skein/sessions/message"
	"slices"
	"strings"
)

// CopyStats counts what Copy copied.
type CopyStats struct {
	Sessions, Messages, Events, History, Runs, RunSteps, Repos int
}

// ErrNotEmpty is Copy's refusal of a target that already holds sessions
// or runs, unless CopyOptions.Merge.
var ErrNotEmpty = errors.New("the target store is not empty")

// CopyOptions configures Copy.
type CopyOptions struct {
	// Merge copies into a target that already holds sessions or runs;
	// an id both stores hold is still refused, before anything is copied.
	Merge bool
	// Progress, if not nil, is called after each session and run copied.
	Progress func(CopyStats)
	// IDPrefix, if not empty, is put before the id of every session
	// copied (and of its parent, when the parent is copied too), and
	// runs and repository records are not copied: skein test stores each
	// test's sessions under the run and the test.
	IDPrefix string
}

// Copy copies every session of from into to, with its messages, events,
// summary, metadata, status, turns, version and lineage (parent ids;
// children follow from them), and the history a HistoryBackend keeps of
// messages no longer current (to must keep history too when from has
// any), then every run record when from keeps them (to must too). First
// it copies the repository records (RepoBackend) when from keeps any (to
// must too): the repositories skein serve's sessions are bound to. It
// refuses a target that holds anything unless opts.Merge, and ids the
// target already holds in any case (a repository registered there with
// the same path is left as it is), before writing. Each session and run
// is copied in one write, parents before their forks; after the copy it
// reloads each from to and checks its counts against from's, and returns
// what it copied. A fork's shared messages are copied as the fork's own:
// the target holds the same transcripts, not the same sharing.
func Copy(ctx context.Context, from, to Backend, opts CopyOptions) (CopyStats, error) {
	var stats CopyStats
	ids, err := copyOrder(ctx, from)
	if err != nil {
		return stats, err
	}
	fromRuns, _ := from.(RunBackend)
	toRuns, _ := to.(RunBackend)
	var runs []RunSummary
	if fromRuns != nil && opts.IDPrefix == "" {
		if runs, _, err = fromRuns.ListRuns(ctx, RunFilter{}); err != nil {
			return stats, err
		}
		if len(runs) > 0 && toRuns == nil {
			return stats, fmt.Errorf("the source holds %d run records, which the target cannot keep", len(runs))
		}
	}
	repos, err := copiedRepos(ctx, from, to, opts)
	if err != nil {
		return stats, err
	}
	copied := map[string]bool{}
	targets := make([]string, len(ids))
	for i, id := range ids {
		copied[id], targets[i] = true, opts.IDPrefix+id
	}
	if err := checkTarget(ctx, to, toRuns, targets, runs, repos, opts.Merge); err != nil {
		return stats, err
	}
	if stats.Repos, err = copyRepos(ctx, to, repos); err != nil {
		return stats, err
	}
	fromHistory, _ := from.(HistoryBackend)
	toHistory, _ := to.(HistoryBackend)
	for _, id := range ids {
		rec, err := from.Load(ctx, id)
		if err != nil {
			return stats, err
		}
		var appended map[int64]message.Message
		if fromHistory != nil {
			if appended, err = fromHistory.LoadAppended(ctx, id); err != nil {
				return stats, err
			}
		}
		rec.ChildIDs = nil
		if opts.IDPrefix != "" {
			rename(rec, opts.IDPrefix, copied)
		}
		switch {
		case len(appended) > 0 && toHistory == nil:
			return stats, IDError(id, errors.New("it has a history of messages no longer current, which the target cannot keep"))
		case toHistory != nil:
			err = toHistory.CreateWithHistory(ctx, rec, appended)
		default:
			err = to.Create(ctx, rec)
		}
		if err != nil {
			return stats, err
		}
		if err := verifyCopy(ctx, to, toHistory, rec, len(appended)); err != nil {
			return stats, err
		}
		stats.Sessions++
		stats.Messages += len(rec.Messages)
		stats.Events += len(rec.Events)
		stats.History += len(appended)
		if opts.Progress != nil {
			opts.Progress(stats)
		}
	}
	for _, r := range runs {
		rec, err := fromRuns.LoadRun(ctx, r.ID)
		if err != nil {
			return stats, wrapRun(r.ID, err)
		}
		if err := toRuns.CreateRun(ctx, rec); err != nil {
			return stats, wrapRun(r.ID, err)
		}
		got, err := toRuns.LoadRun(ctx, r.ID)
		if err != nil {
			return stats, wrapRun(r.ID, err)
		}
		if len(got.Steps) != len(rec.Steps) || got.Status != rec.Status {
			return stats, wrapRun(r.ID, fmt.Errorf("copied with %d steps (status %s), want %d (status %s)", len(got.Steps), got.Status, len(rec.Steps), rec.Status))
		}
		stats.Runs++
		stats.RunSteps += len(rec.Steps)
		if opts.Progress != nil {
			opts.Progress(stats)
		}
	}
	return stats, nil
}

// rename puts prefix before rec's id, its events' session id, and its
// parent's id when copied holds the parent.
func rename(rec *Record, prefix string, copied map[string]bool) {
	rec.ID = prefix + rec.ID
	for i := range rec.Events {
		rec.Events[i].SessionID = rec.ID
	}
	if copied[rec.ParentID] {
		rec.ParentID = prefix + rec.ParentID
	}
}

// copyOrder returns the ids of from's sessions, each parent before its
// forks (oldest first otherwise).
func copyOrder(ctx context.Context, from Backend) ([]string, error) {
	list, _, err := from.List(ctx, ListFilter{})
	if err != nil {
		return nil, err
	}
	slices.Reverse(list) // oldest first
	parent := map[string]string{}
	for _, s := range list {
		parent[s.ID] = s.ParentID
	}
	var out []string
	done := map[string]bool{}
	var visit func(id string, depth int) error
	visit = func(id string, depth int) error {
		if done[id] {
			return nil
		}
		if depth > len(list) {
			return IDError(id, ErrCycle)
		}
		if p, ok := parent[id]; ok && p != "" {
			if _, stored := parent[p]; stored {
				if err := visit(p, depth+1); err != nil {
					return err
				}
			}
		}
		done[id] = true
		out = append(out, id)
		return nil
	}
	for _, s := range list {
		if err := visit(s.ID, 0); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// copiedRepos returns the repository records Copy copies: from's, unless
// opts.IDPrefix; an error when to cannot keep them.
func copiedRepos(ctx context.Context, from, to Backend, opts CopyOptions) ([]Repo, error) {
	fromRepos, _ := from.(RepoBackend)
	if fromRepos == nil || opts.IDPrefix != "" {
		return nil, nil
	}
	repos, err := fromRepos.ListRepos(ctx)
	if err != nil {
		return nil, err
	}
	if _, ok := to.(RepoBackend); len(repos) > 0 && !ok {
		return nil, fmt.Errorf("the source holds %d repository records, which the target cannot keep", len(repos))
	}
	return repos, nil
}

// copyRepos stores repos in to (checked by checkTarget: each is new
// there or registered with the same path, and then left alone), reloads
// each and checks it, and returns how many it stored.
func copyRepos(ctx context.Context, to Backend, repos []Repo) (int, error) {
	n := 0
	for _, r := range repos {
		toRepos := to.(RepoBackend)
		if _, err := toRepos.LoadRepo(ctx, r.ID); err == nil {
			continue
		}
		if err := toRepos.CreateRepo(ctx, &r); err != nil {
			return n, fmt.Errorf("repository '%s': %w", r.ID, err)
		}
		got, err := toRepos.LoadRepo(ctx, r.ID)
		if err != nil {
			return n, fmt.Errorf("repository '%s': %w", r.ID, err)
		}
		if got.Path != r.Path || !got.CreatedAt.Equal(r.CreatedAt) {
			return n, fmt.Errorf("repository '%s': copied as %s (registered %s), want %s (%s)", r.ID, got.Path, got.CreatedAt, r.Path, r.CreatedAt)
		}
		n++
	}
	return n, nil
}

// checkTarget refuses a target that holds sessions, runs or repository
// records (unless merge), any of the ids to copy, or one of repos' ids
// with another path.
func checkTarget(ctx context.Context, to Backend, toRuns RunBackend, ids []string, runs []RunSummary, repos []Repo, merge bool) error {
	_, n, err := to.List(ctx, ListFilter{Limit: 1})
	if err != nil {
		return err
	}
	nRuns := 0
	if toRuns != nil {
		if _, nRuns, err = toRuns.ListRuns(ctx, RunFilter{Limit: 1}); err != nil {
			return err
		}
	}
	var held []Repo
	if toRepos, ok := to.(RepoBackend); ok {
		if held, err = toRepos.ListRepos(ctx); err != nil {
			return err
		}
	}
	if (n > 0 || nRuns > 0 || len(held) > 0) && !merge {
		if len(held) > 0 {
			return fmt.Errorf("%w (sessions: %d, runs: %d, repositories: %d)", ErrNotEmpty, n, nRuns, len(held))
		}
		return fmt.Errorf("%w (sessions: %d, runs: %d)", ErrNotEmpty, n, nRuns)
	}
	var taken []string
	for _, r := range repos {
		if i := slices.IndexFunc(held, func(h Repo) bool { return h.ID == r.ID }); i >= 0 && held[i].Path != r.Path {
			taken = append(taken, fmt.Sprintf("repository '%s' (at %s, not %s)", r.ID, held[i].Path, r.Path))
		}
	}
	for _, id := range ids {
		ok, err := to.Exists(ctx, id)
		if err != nil {
			return err
		}
		if ok {
			taken = append(taken, "'"+id+"'")
		}
	}
	for _, r := range runs {
		if toRuns == nil {
			break
		}
		_, err := toRuns.LoadRun(ctx, r.ID)
		if err == nil {
			taken = append(taken, "run '"+r.ID+"'")
		} else if !errors.Is(err, ErrRunNotFound) {
			return err
		}
	}
	if len(taken) > 0 {
		return fmt.Errorf("the target already holds %s", strings.Join(taken, ", "))
	}
	return nil
}

// verifyCopy reloads rec's copy from to and checks its counts.
func verifyCopy(ctx context.Context, to Backend, toHistory HistoryBackend, rec *Record, history int) error {
	got, err := to.Load(ctx, rec.ID)
	if err != nil {
		return err
	}
	if len(got.Messages) != len(rec.Messages) || len(got.Events) != len(rec.Events) || got.ParentID != rec.ParentID || got.Version != rec.Version {
		return IDError(rec.ID, fmt.Errorf("copied with %d messages, %d events, parent %q, version %d; want %d, %d, %q, %d",
			len(got.Messages), len(got.Events), got.ParentID, got.Version, len(rec.Messages), len(rec.Events), rec.ParentID, rec.Version))
	}
	if toHistory != nil {
		appended, err := toHistory.LoadAppended(ctx, rec.ID)
		if err != nil {
			return err
		}
		if len(appended) != history {
			return IDError(rec.ID, fmt.Errorf("copied with %d messages of history, want %d", len(appended), history))
		}
	}
	return nil
}
