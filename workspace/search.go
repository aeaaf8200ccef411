package workspace

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"regexp/syntax"
	"strings"
	"unicode/utf8"
)

// DefaultMaxResults is the number of matches Search returns when its
// maxResults is 0 or negative.
const DefaultMaxResults = 100

const (
	// binarySniffLen is how much of a file Search reads to decide whether
	// it is binary: a NUL byte in it means binary, as git decides.
	binarySniffLen = 8000
	// maxSearchLine is the longest line Search reads; a longer line ends
	// the search of its file.
	maxSearchLine = 1 << 20
	// maxMatchText is how much of a matching line a Match keeps.
	maxMatchText = 400
)

// Match is one line found by Search.
type Match struct {
	// File is the file's path relative to Root when it is inside Root,
	// absolute otherwise.
	File string
	// Line is the 1-based line number.
	Line int
	// Text is the line without its line ending, cut to 400 bytes (at a
	// character boundary, marked with "...").
	Text string
}

// String renders the match as `file:line: text`.
func (m Match) String() string { return fmt.Sprintf("%s:%d: %s", m.File, m.Line, m.Text) }

// SearchResult is what Search found.
type SearchResult struct {
	Matches []Match
	// Truncated reports that there were more matches than the limit.
	Truncated bool
}

// String renders the matches one per line, followed by a note when the
// result was truncated. It is "" when nothing matched.
func (r *SearchResult) String() string {
	var b strings.Builder
	for _, m := range r.Matches {
		b.WriteString(m.String())
		b.WriteByte('\n')
	}
	if r.Truncated {
		fmt.Fprintf(&b, "[truncated: showing the first %d matches]\n", len(r.Matches))
	}
	return b.String()
}

// Search looks for lines matching the regular expression pattern (RE2
// syntax) in the files under dir (or in dir itself if it is a file),
// checked against the read scope, in lexical order. If glob is not "",
// only files whose name matches it (path.Match) are searched. .git
// directories, binary files and anything that is not a regular file are
// skipped, and symbolic links are not followed, so nothing outside the
// scope is reached. Unreadable files and directories are skipped. At most
// maxResults matches are returned (DefaultMaxResults if it is 0 or
// negative); Truncated reports more. Search stops early when ctx is done
// and returns its error.
func (p *Policy) Search(ctx context.Context, pattern, dir, glob string, maxResults int) (*SearchResult, error) {
	re, err := regexp.Compile(pattern)
	if err != nil {
		var se *syntax.Error
		if errors.As(err, &se) {
			return nil, fmt.Errorf("invalid regexp %q: %s", pattern, se.Code)
		}
		return nil, fmt.Errorf("invalid regexp %q: %v", pattern, err)
	}
	if err := checkGlob(glob); err != nil {
		return nil, err
	}
	if maxResults <= 0 {
		maxResults = DefaultMaxResults
	}
	t, err := p.resolve(dir, accessRead)
	if err != nil {
		return nil, err
	}
	if !t.exists {
		return nil, ioError("search", t, fs.ErrNotExist)
	}
	res := &SearchResult{Matches: []Match{}}
	errDone := errors.New("done")
	err = p.withRoot(t, func(r *os.Root, start string) error {
		return fs.WalkDir(r.FS(), filepath.ToSlash(start), func(name string, d fs.DirEntry, err error) error {
			if cerr := ctx.Err(); cerr != nil {
				return cerr
			}
			if err != nil {
				if name == filepath.ToSlash(start) {
					return err
				}
				return nil // unreadable: skip
			}
			if d.IsDir() {
				if d.Name() == ".git" && name != filepath.ToSlash(start) {
					return fs.SkipDir
				}
				return nil
			}
			if !d.Type().IsRegular() {
				return nil
			}
			if glob != "" {
				if ok, _ := path.Match(glob, d.Name()); !ok {
					return nil
				}
			}
			file := p.displayPath(filepath.Join(t.scope, filepath.FromSlash(name)))
			if !searchFile(r, filepath.FromSlash(name), file, re, res, maxResults, p.tier == Full) {
				return errDone
			}
			return nil
		})
	})
	switch {
	case err == nil, errors.Is(err, errDone):
		return res, nil
	case errors.Is(err, ErrNotAllowed), ctx.Err() != nil:
		return nil, err
	}
	return nil, ioError("search", t, err)
}

// displayPath returns abs relative to Root if it is inside Root.
func (p *Policy) displayPath(abs string) string {
	if within(abs, p.root) {
		if rel, err := filepath.Rel(p.root, abs); err == nil {
			return rel
		}
	}
	return abs
}

// searchFile adds the matches of re in the file rel of r to res. It
// returns false once res holds more than max matches (then the last one is
// dropped and res.Truncated set). Unless full (the full tier), a file
// with more than one hard link is skipped.
func searchFile(r *os.Root, rel, file string, re *regexp.Regexp, res *SearchResult, max int, full bool) bool {
	f, err := r.Open(rel)
	if err != nil {
		return true
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() || (!full && LinkCount(fi) > 1) {
		return true // a hard-linked file may be outside the scope (see checkLinks)
	}
	br := bufio.NewReaderSize(f, binarySniffLen)
	head, err := br.Peek(binarySniffLen)
	if err != nil && err != io.EOF && !errors.Is(err, bufio.ErrBufferFull) {
		return true
	}
	if bytes.IndexByte(head, 0) >= 0 {
		return true
	}
	sc := bufio.NewScanner(br)
	sc.Buffer(make([]byte, 0, 64*1024), maxSearchLine)
	for n := 1; sc.Scan(); n++ {
		line := sc.Bytes()
		if !re.Match(line) {
			continue
		}
		if len(res.Matches) == max {
			res.Truncated = true
			return false
		}
		res.Matches = append(res.Matches, Match{File: file, Line: n, Text: cutLine(line)})
	}
	return true
}

// cutLine returns line without a trailing CR, cut to maxMatchText bytes
// at a character boundary.
func cutLine(line []byte) string {
	line = bytes.TrimSuffix(line, []byte("\r"))
	if len(line) <= maxMatchText {
		return string(line)
	}
	n := maxMatchText
	for n > 0 && !utf8.RuneStart(line[n]) {
		n--
	}
	return string(line[:n]) + "..."
}
