package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/skein-dev/skein/sessions"
	"github.com/skein-dev/skein/sessions/export"
	"github.com/skein-dev/skein/sessions/message"
	"github.com/skein-dev/skein/workflow"
	"github.com/skein-dev/skein/workspace"
)

// Export formats of `skein sessions export`.
const (
	formatJSONL    = "jsonl"    // the event log with the transcript (export.WriteJSONL)
	formatJSON     = "json"     // the snapshot (export.WriteJSON)
	formatForensic = "forensic" // the forensic log (export.WriteForensic)
	formatStar     = "star"     // a runnable pipeline (export.ExportStar)
	formatWorkflow = "workflow" // a workflow file (workflow.FromSession)
)

// exportFormats lists the formats for the usage error.
const exportFormats = "jsonl, json, forensic, star or workflow"

// sessionsExport implements `skein sessions export ID`.
func sessionsExport(args []string, std stdio) int {
	var store storeFlag
	fs := sessionsFlags("export", &store)
	format := fs.String("format", formatJSONL, "jsonl (a header, then one record per event, then the transcript), json (the snapshot), forensic (header, events and footer records), star (a runnable pipeline NAME.star with NAME.llm.jsonl) or workflow (a workflow file, one agent node per completed turn)")
	output := fs.String("o", "", "write to this file (user-only; an existing one is replaced only when the export succeeds) instead of stdout; for star, NAME.star (default: the title's kebab slug, else exported-session)")
	withTest := fs.Bool("with-test", false, "star: also write NAME_test.star, a skein test of the replay")
	id, code, stop := parseOne(fs, args, "session ID", std)
	if stop {
		return code
	}
	switch *format {
	case formatJSONL, formatJSON, formatForensic, formatStar, formatWorkflow:
	default:
		return usageError(std, fs.Name(), fmt.Sprintf("--format %q: want %s", *format, exportFormats))
	}
	if *withTest && *format != formatStar {
		return usageError(std, fs.Name(), "--with-test is for --format star")
	}
	b, err := storedBackend(&store, storeRead)
	if err != nil {
		return fail(std, fs.Name(), err)
	}
	defer b.Close()
	ctx := context.Background()
	rec, err := b.Load(ctx, id)
	if err != nil {
		return fail(std, fs.Name(), sessionError(&store, id, err))
	}
	if *format == formatStar {
		return exportStar(std, fs.Name(), rec, *output, *withTest)
	}
	var appended map[int64]message.Message
	if hb, ok := b.(sessions.HistoryBackend); ok && *format != formatJSON {
		if appended, err = hb.LoadAppended(ctx, id); err != nil {
			return fail(std, fs.Name(), sessionError(&store, id, err))
		}
	}
	write := func(w io.Writer) error {
		switch *format {
		case formatJSON:
			return export.WriteJSON(w, rec)
		case formatWorkflow:
			g, err := workflow.FromSession(rec)
			if err != nil {
				return err
			}
			_, err = w.Write(workflow.Dump(g))
			return err
		case formatForensic:
			return export.WriteForensic(w, rec, appended)
		}
		return export.WriteJSONL(w, rec, appended)
	}
	if *output != "" {
		// A refused or failed export leaves an existing file as it was.
		err = replaceFile(*output, write)
	} else {
		err = write(std.out)
	}
	if err != nil {
		return fail(std, fs.Name(), fmt.Errorf("session '%s': %v", id, err))
	}
	return exitOK
}

// sessionsImport implements `skein sessions import FILE`.
func sessionsImport(args []string, std stdio) int {
	var store storeFlag
	fs := sessionsFlags("import", &store)
	newID := fs.String("id", "", "store the session under this id instead of the exported one")
	maxRead := fs.Int64("max-read-bytes", workspace.DefaultMaxReadBytes, "the largest export FILE (or standard input) read, in bytes")
	files, code, stop := parseInterleaved(fs, args, std)
	if stop {
		return code
	}
	if *maxRead < 1 {
		return usageError(std, fs.Name(), fmt.Sprintf("--max-read-bytes must be >= 1, got %d", *maxRead))
	}
	switch {
	case len(files) == 0:
		return usageError(std, fs.Name(), "missing FILE to import (- reads stdin)")
	case len(files) > 1:
		return usageError(std, fs.Name(), fmt.Sprintf("takes one FILE, got %d", len(files)))
	}
	in := std.in
	if name := files[0]; name != "-" {
		f, err := os.Open(name)
		if err != nil {
			return usageError(std, fs.Name(), fmt.Sprintf("cannot read %s: %v", name, underlying(err)))
		}
		defer f.Close()
		if fi, err := f.Stat(); err == nil && fi.Mode().IsRegular() && fi.Size() > *maxRead {
			return fail(std, fs.Name(), workspace.TooBig(name, fi.Size(), *maxRead))
		}
		in = f
	}
	// A stream (stdin, a pipe) has no size to check first: it is cut at
	// the limit, and reading past it is the same refusal.
	capped := &cappedReader{r: in, left: *maxRead}
	rec, appended, err := export.ReadExport(capped)
	if capped.over {
		return fail(std, fs.Name(), fmt.Errorf("%s holds more than the %d bytes an import may read (--max-read-bytes raises the limit)", streamName(files[0]), *maxRead))
	}
	if err != nil {
		return fail(std, fs.Name(), fmt.Errorf("%s: %v", files[0], err))
	}
	if *newID != "" {
		if err := sessions.CheckID(*newID); err != nil {
			return usageError(std, fs.Name(), fmt.Sprintf("--id: %v", err))
		}
		export.Rename(rec, *newID)
	}
	b, err := storedBackend(&store, storeWrite)
	if err != nil {
		return fail(std, fs.Name(), err)
	}
	defer b.Close()
	ctx := context.Background()
	if hb, ok := b.(sessions.HistoryBackend); ok && len(appended) > 0 {
		err = hb.CreateWithHistory(ctx, rec, appended)
	} else {
		err = b.Create(ctx, rec)
	}
	if errors.Is(err, sessions.ErrExists) {
		return fail(std, fs.Name(), fmt.Errorf("session '%s' already exists in %s (import it under another id with --id)", rec.ID, &store))
	}
	if err != nil {
		return fail(std, fs.Name(), err)
	}
	fmt.Fprintf(std.out, "imported %s: %s, %s\n", printable(rec.ID), plural(len(rec.Messages), "message"), plural(len(rec.Events), "event"))
	return exitOK
}

// exportStar writes rec as a pipeline: path (NAME.star; "" for the
// default name in the working directory), NAME.llm.jsonl beside it and,
// with withTest, NAME_test.star. It prints the files it wrote.
func exportStar(std stdio, cmd string, rec *sessions.Record, path string, withTest bool) int {
	if path == "" {
		path = sessions.Slug(rec.Title) + ".star"
	}
	name, ok := strings.CutSuffix(filepath.Base(path), ".star")
	if !ok || name == "" {
		return usageError(std, cmd, fmt.Sprintf("-o %s: a star export is written to NAME.star", path))
	}
	out, err := export.ExportStar(rec, name)
	if err != nil {
		return fail(std, cmd, fmt.Errorf("session '%s': %v", rec.ID, err))
	}
	dir := filepath.Dir(path)
	files := []struct {
		name string
		data []byte
	}{{name + ".star", out.Pipeline}, {name + ".llm.jsonl", out.Fixture}}
	if withTest {
		files = append(files, struct {
			name string
			data []byte
		}{name + "_test.star", out.Test})
	}
	var wrote []string
	for _, f := range files {
		p := filepath.Join(dir, f.name)
		if err := replaceFile(p, func(w io.Writer) error { _, err := w.Write(f.data); return err }); err != nil {
			return fail(std, cmd, err)
		}
		wrote = append(wrote, p)
	}
	fmt.Fprintf(std.out, "wrote %s\n", printableList(wrote))
	return exitOK
}

// cappedReader reads at most left bytes of r; a read past them fails
// and sets over, so an import never holds more than the limit in
// memory whatever the file claims.
type cappedReader struct {
	r    io.Reader
	left int64
	over bool
}

func (c *cappedReader) Read(p []byte) (int, error) {
	if c.left <= 0 {
		// One byte more tells a stream that ends exactly at the limit
		// from one that goes on.
		var one [1]byte
		n, err := c.r.Read(one[:])
		if n > 0 {
			c.over = true
			return 0, errImportTooBig
		}
		if err == nil {
			// A reader may return 0, nil: ask again on the next Read.
			return 0, nil
		}
		return 0, err
	}
	if int64(len(p)) > c.left {
		p = p[:c.left]
	}
	n, err := c.r.Read(p)
	c.left -= int64(n)
	return n, err
}

// streamName names an import's input in a message.
func streamName(name string) string {
	if name == "-" {
		return "standard input"
	}
	return "'" + name + "'"
}

// errImportTooBig stops ReadExport at the limit; sessionsImport reports
// the limit itself (cappedReader.over).
var errImportTooBig = errors.New("export larger than --max-read-bytes")
