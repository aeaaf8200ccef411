package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/skein-dev/skein/sessions"
)

// sessionsLs implements `skein sessions ls`: a page of the stored
// sessions, newest first, without their messages.
func sessionsLs(args []string, std stdio) int {
	var store storeFlag
	fs := sessionsFlags("ls", &store)
	status := fs.String("status", "", "only sessions with one of these statuses, comma-separated (active, cancelled, completed, error)")
	parent := fs.String("parent", "", "only the forks of this session")
	limit := fs.Int("limit", 20, "sessions per page (0: all)")
	offset := fs.Int("offset", 0, "sessions to skip before the page")
	where := fs.String("where", "", "only sessions for which this expr-lang condition holds, over id, title, status, messages, turns, created, updated, parent, metadata (e.g. 'metadata.repo == \"api\" && turns > 3')")
	repo := fs.String("repo", "", `only sessions of this repository (metadata "repoId", skein serve's; indexed)`)
	agent := fs.String("agent", "", `only sessions of this agent (metadata "agent", skein serve's; indexed)`)
	text := fs.String("q", "", "only sessions whose id or title (else first prompt) contains this text, ignoring case")
	cursor := fs.String("cursor", "", "only the sessions after the last of the page that printed this cursor (the table's last line names it; --json's next_cursor): paging by cursor costs the same at any depth, unlike --offset; the total then counts the sessions after it")
	var f sessions.ListFilter
	for _, t := range []struct {
		name, usage string
		dst         *time.Time
	}{
		{"created-after", "only sessions created at or after this time (RFC 3339, e.g. 2026-11-27T09:30:00Z)", &f.CreatedAfter},
		{"created-before", "only sessions created before this time (RFC 3339)", &f.CreatedBefore},
		{"updated-after", "only sessions last written at or after this time (RFC 3339)", &f.UpdatedAfter},
		{"updated-before", "only sessions last written before this time (RFC 3339)", &f.UpdatedBefore},
	} {
		fs.Func(t.name, t.usage, func(v string) error {
			at, err := time.Parse(time.RFC3339Nano, v)
			if err != nil {
				return fmt.Errorf("want an RFC 3339 time such as 2026-11-27T09:30:00Z")
			}
			*t.dst = at
			return nil
		})
	}
	asJSON := fs.Bool("json", false, `print {"sessions": [...], "total", "limit", "offset", "next_cursor"} as JSON`)
	rest, code, stop := parseInterleaved(fs, args, std)
	if stop {
		return code
	}
	if len(rest) > 0 {
		return usageError(std, fs.Name(), fmt.Sprintf("unexpected argument %q", rest[0]))
	}
	if *limit < 0 {
		return usageError(std, fs.Name(), fmt.Sprintf("--limit must be >= 0, got %d", *limit))
	}
	if *offset < 0 {
		return usageError(std, fs.Name(), fmt.Sprintf("--offset must be >= 0, got %d", *offset))
	}
	statuses, err := parseStatuses("status", *status)
	if err != nil {
		return fail(std, fs.Name(), err)
	}
	if *cursor != "" {
		if f.After, err = sessions.ParseCursor(*cursor); err != nil {
			return usageError(std, fs.Name(), fmt.Sprintf("--cursor %q: %v", *cursor, err))
		}
	}
	var filter *sessions.Where
	if flagSet(fs, "where") {
		if filter, err = sessions.CompileWhere(*where); err != nil {
			return usageError(std, fs.Name(), "--where: "+err.Error())
		}
	}
	b, err := storedBackend(&store, storeRead)
	if err != nil {
		return fail(std, fs.Name(), err)
	}
	defer b.Close()
	f.Statuses, f.ParentID, f.RepoID, f.Agent, f.Text, f.Offset = statuses, *parent, *repo, *agent, *text, *offset
	if *limit > 0 {
		f.Limit = *limit + 1 // one more: is there a next page?
	}
	page, total, err := sessions.ListWhere(context.Background(), b, f, filter)
	if err != nil {
		return fail(std, fs.Name(), err)
	}
	var next string
	if *limit > 0 && len(page) > *limit {
		page = page[:*limit]
		next = sessions.CursorOf(&page[len(page)-1]).String()
	}
	if *asJSON {
		return printListJSON(std, page, total, *limit, *offset, next)
	}
	if len(page) > 0 {
		tw := tabwriter.NewWriter(std.out, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "ID\tSTATUS\tMESSAGES\tTURNS\tFORKS\tPARENT\tCREATED\tUPDATED\tTITLE")
		for _, s := range page {
			fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%s\t%s\t%s\t%s\n", printable(s.ID), s.Status, s.Length, s.Turns, s.Children,
				printable(orDash(s.ParentID)), listTime(s.CreatedAt), listTime(s.UpdatedAt), printable(orDash(s.Label())))
		}
		tw.Flush()
	}
	if total == 0 && !storeExists(&store) {
		fmt.Fprintf(std.out, "no session store at %s: nothing has been stored there yet (skein run and skein repl create it when they first store a session; --store names another)\n", &store)
		return exitOK
	}
	pageSummary(std.out, "session", len(page), total, *offset, next)
	return exitOK
}

// pageSummary ends a listing: how many there are and where the next page
// starts (next: its --cursor, when the listing has one).
func pageSummary(w io.Writer, noun string, shown, total, offset int, next string) {
	switch {
	case total == 0:
		fmt.Fprintf(w, "no %ss\n", noun)
	case shown == 0:
		fmt.Fprintf(w, "none of %s at offset %d\n", plural(total, noun), offset)
	case shown == total:
		fmt.Fprintln(w, plural(total, noun))
	case next != "":
		fmt.Fprintf(w, "%d-%d of %s (--offset %d or --cursor %s for the next page)\n", offset+1, offset+shown, plural(total, noun), offset+shown, next)
	default:
		fmt.Fprintf(w, "%d-%d of %s (--offset %d for the next page)\n", offset+1, offset+shown, plural(total, noun), offset+shown)
	}
}

// listJSON is a session in `ls --json`.
type listJSON struct {
	ID        string  `json:"id"`
	Status    string  `json:"status"`
	CreatedAt string  `json:"created_at"`
	UpdatedAt string  `json:"updated_at"`
	ParentID  *string `json:"parent_id"`
	Messages  int     `json:"messages"`
	Turns     int     `json:"turns"`
	Forks     int     `json:"forks"`
	// Title is the session's title; Label what the table shows (the
	// title, else the first user message's first line).
	Title    *string        `json:"title"`
	Label    string         `json:"label"`
	Metadata map[string]any `json:"metadata"`
}

func printListJSON(std stdio, page []sessions.Summary, total, limit, offset int, next string) int {
	out := struct {
		Sessions []listJSON `json:"sessions"`
		Total    int        `json:"total"`
		Limit    int        `json:"limit"`
		Offset   int        `json:"offset"`
		// NextCursor is --cursor of the next page; null on the last.
		NextCursor *string `json:"next_cursor"`
	}{Sessions: []listJSON{}, Total: total, Limit: limit, Offset: offset}
	if next != "" {
		out.NextCursor = &next
	}
	for _, s := range page {
		j := listJSON{ID: s.ID, Status: string(s.Status), CreatedAt: s.CreatedAt.UTC().Format(sessions.TimeFormat),
			UpdatedAt: s.UpdatedAt.UTC().Format(sessions.TimeFormat), Messages: s.Length, Turns: s.Turns, Forks: s.Children}
		if s.ParentID != "" {
			j.ParentID = &s.ParentID
		}
		if s.Title != "" {
			j.Title = &s.Title
		}
		j.Label, j.Metadata = s.Label(), s.Metadata
		if j.Metadata == nil {
			j.Metadata = map[string]any{}
		}
		out.Sessions = append(out.Sessions, j)
	}
	enc := json.NewEncoder(std.out)
	enc.SetIndent("", "  ")
	if err := enc.Encode(out); err != nil {
		return fail(std, "skein sessions ls", err)
	}
	return exitOK
}

// listTime formats a time for listings: UTC, to the second.
func listTime(t time.Time) string { return t.UTC().Format(time.RFC3339) }

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// sessionsRm implements `skein sessions rm ID...`.
func sessionsRm(args []string, std stdio) int {
	var store storeFlag
	fs := sessionsFlags("rm", &store)
	recursive := fs.Bool("recursive", false, "also delete the session's forks, and theirs")
	ids, code, stop := parseInterleaved(fs, args, std)
	if stop {
		return code
	}
	if len(ids) == 0 {
		return usageError(std, fs.Name(), "missing session ID")
	}
	b, err := storedBackend(&store, storeWrite)
	if err != nil {
		return fail(std, fs.Name(), err)
	}
	defer b.Close()
	ctx := context.Background()
	for _, id := range ids {
		forks, err := sessions.Descendants(ctx, b, id)
		if err == nil || (*recursive && errors.Is(err, sessions.ErrCycle)) {
			// A recursive delete removes a stored cycle whole.
			err = b.Delete(ctx, id, *recursive)
		}
		switch {
		case errors.Is(err, sessions.ErrHasChildren):
			return fail(std, fs.Name(), fmt.Errorf("session '%s' has forks (%s): delete them first, or use --recursive", id, printableList(forks)))
		case err != nil:
			return fail(std, fs.Name(), cycleHint(sessionError(&store, id, err)))
		case len(forks) > 0:
			fmt.Fprintf(std.out, "removed %s and its forks %s\n", printable(id), printableList(forks))
		default:
			fmt.Fprintf(std.out, "removed %s\n", printable(id))
		}
	}
	return exitOK
}

// sessionsGC implements `skein sessions gc --older-than DURATION`.
func sessionsGC(args []string, std stdio) int {
	var store storeFlag
	fs := sessionsFlags("gc", &store)
	olderThan := fs.String("older-than", "", "delete sessions last updated longer ago than this: a Go duration (36h, 90m) or days (30d); required")
	status := fs.String("status", "", "only sessions with one of these statuses, comma-separated (active, cancelled, completed, error)")
	dryRun := fs.Bool("dry-run", false, "print what would be deleted, delete nothing")
	rest, code, stop := parseInterleaved(fs, args, std)
	if stop {
		return code
	}
	if len(rest) > 0 {
		return usageError(std, fs.Name(), fmt.Sprintf("unexpected argument %q", rest[0]))
	}
	if *olderThan == "" {
		return usageError(std, fs.Name(), "--older-than is required (for example --older-than 30d)")
	}
	age, err := parseAge(*olderThan)
	if err != nil {
		return usageError(std, fs.Name(), err.Error())
	}
	statuses, err := parseStatuses("status", *status)
	if err != nil {
		return fail(std, fs.Name(), err)
	}
	b, err := storedBackend(&store, storeWrite)
	if err != nil {
		return fail(std, fs.Name(), err)
	}
	defer b.Close()
	filter := sessions.ListFilter{Statuses: statuses, UpdatedBefore: time.Now().Add(-age)}
	c, err := sessions.Collect(context.Background(), b, filter, *dryRun)
	verb := "removed"
	if *dryRun {
		verb = "would remove"
	}
	if c != nil {
		for _, id := range c.Deleted {
			fmt.Fprintf(std.out, "%s %s\n", verb, printable(id))
		}
	}
	if err != nil {
		return fail(std, fs.Name(), cycleHint(err))
	}
	fmt.Fprintf(std.out, "%s %s", verb, plural(len(c.Deleted), "session"))
	if len(c.Kept) > 0 {
		fmt.Fprintf(std.out, "; kept %s with forks that are not old enough or filtered out: %s", plural(len(c.Kept), "session"), printableList(c.Kept))
	}
	fmt.Fprintln(std.out)
	return exitOK
}

// parseAge parses --older-than: a positive Go duration, or a whole
// number of days ("30d").
func parseAge(s string) (time.Duration, error) {
	var d time.Duration
	if days, ok := strings.CutSuffix(s, "d"); ok && days != "" && strings.Trim(days, "0123456789") == "" {
		n, err := strconv.Atoi(days)
		if err != nil || n > 100_000 {
			return 0, fmt.Errorf("--older-than %s: too many days", s)
		}
		d = time.Duration(n) * 24 * time.Hour
	} else {
		var err error
		if d, err = time.ParseDuration(s); err != nil {
			return 0, fmt.Errorf("--older-than %s: want a duration like 36h or 30d", s)
		}
	}
	if d <= 0 {
		return 0, fmt.Errorf("--older-than must be positive, got %s", s)
	}
	return d, nil
}

func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
