package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/skein-dev/skein/vm"
)

// Finding test files, their fixtures and their tests, and choosing which
// tests run (-run, --shard).

// testFileSuffix names the files `skein test` looks for in directories.
const testFileSuffix = "_test.star"

// fixtureSuffix replaces ".star" in a test file's name to name its own
// fixture: foo_test.star -> foo_test.llm.jsonl.
const fixtureSuffix = ".llm.jsonl"

// testFile is one test file and what discovery found in it.
type testFile struct {
	path    string   // cleaned, as reports show it
	src     []byte   // its source
	fixture *fixture // its own fixture, else --llm-replay's, else nil
	runner  *vm.TestRunner
	names   []string // test functions in definition order
	err     error    // reading it or its fixture, or executing it, failed
}

// testCase is one test to run: a test function of a file, or, with an
// empty name, a file that could not be loaded (reported as one error).
type testCase struct {
	file *testFile
	name string
}

// run runs the test in a fresh VM.
func (c testCase) run() vm.TestResult {
	if c.name == "" {
		return vm.TestResult{File: c.file.path, Status: vm.TestError, Error: vm.FormatError(c.file.err)}
	}
	return c.file.runner.Run(c.file.path, c.file.src, c.name)
}

// findTestFiles returns the test files under paths: a directory's
// *_test.star files, recursively, in lexical order, skipping directories
// below it named testdata or starting with '.' or '_'; a file named on the
// command line is taken whatever its name. Each file appears once.
func findTestFiles(paths []string) ([]string, error) {
	var files []string
	seen := map[string]bool{}
	add := func(p string) {
		if p = filepath.Clean(p); !seen[p] {
			seen[p] = true
			files = append(files, p)
		}
	}
	for _, root := range paths {
		info, err := os.Stat(root)
		if err != nil {
			return nil, fmt.Errorf("cannot read %s: %v", root, underlying(err))
		}
		if !info.IsDir() {
			add(root)
			continue
		}
		err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() {
				if name := d.Name(); p != root && (name == "testdata" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_")) {
					return filepath.SkipDir
				}
				return nil
			}
			if strings.HasSuffix(d.Name(), testFileSuffix) {
				add(p)
			}
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("cannot read %s: %v", root, underlying(err))
		}
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("no *%s files in %s", testFileSuffix, strings.Join(paths, ", "))
	}
	return files, nil
}

// loadTestFiles reads each file and its fixture and discovers its tests,
// on up to parallel goroutines; the result is in the order of paths.
// global is the --llm-replay fixture; newRunner makes a file's runner.
func loadTestFiles(ctx context.Context, paths []string, global *fixture, parallel int, newRunner func(*testFile) *vm.TestRunner) []*testFile {
	files := make([]*testFile, len(paths))
	forEach(ctx, len(paths), parallel, func(i int) {
		f := &testFile{path: paths[i], fixture: global}
		files[i] = f
		if f.src, f.err = os.ReadFile(f.path); f.err != nil {
			return
		}
		own := strings.TrimSuffix(f.path, ".star") + fixtureSuffix
		if _, err := os.Stat(own); err == nil {
			resps, err := readFixture(own)
			if err != nil {
				f.err = fmt.Errorf("fixture %v", err)
				return
			}
			f.fixture = &fixture{path: own, responses: resps}
		}
		f.runner = newRunner(f)
		f.names, f.err = f.runner.Discover(f.path, f.src)
		if f.err == nil && len(f.names) == 0 {
			f.err = errors.New("no test_* functions")
		}
	})
	for i, f := range files {
		if f == nil { // interrupted before it was loaded
			files[i] = &testFile{path: paths[i], err: context.Cause(ctx)}
		}
	}
	return files
}

// selectTests lists the tests to run in a stable order (files in order,
// tests in definition order): those whose name run matches (a file that
// could not be loaded is always listed), then every count-th one from
// shard index, so the shards of a count partition the list exactly.
func selectTests(files []*testFile, run *regexp.Regexp, only map[string][]string, s shard) []testCase {
	var all []testCase
	for _, f := range files {
		if f.err != nil {
			all = append(all, testCase{file: f})
			continue
		}
		for _, name := range f.names {
			if names, ok := only[f.path]; ok && !slices.Contains(names, name) {
				continue
			}
			if run == nil || run.MatchString(name) {
				all = append(all, testCase{file: f, name: name})
			}
		}
	}
	if s.count == 0 {
		return all
	}
	var mine []testCase
	for i, c := range all {
		if i%s.count == s.index-1 {
			mine = append(mine, c)
		}
	}
	return mine
}

// repeatCases runs each file's tests count times (-count): a file's
// tests in order, then again, file after file, as go test -count does
// per package, so the results of a file stay together. A file that could
// not be loaded is reported once.
func repeatCases(cases []testCase, count int) []testCase {
	if count <= 1 {
		return cases
	}
	out := make([]testCase, 0, len(cases)*count)
	for start := 0; start < len(cases); {
		end := start + 1
		for end < len(cases) && cases[end].file == cases[start].file {
			end++
		}
		group := cases[start:end]
		n := count
		if group[0].name == "" {
			n = 1
		}
		for range n {
			out = append(out, group...)
		}
		start = end
	}
	return out
}

// splitTestIDs takes the FILE::TEST ids that skein test prints out of
// paths: it returns the paths with each id replaced by its file, and for
// each such file the tests to run (every other test of it is left out).
func splitTestIDs(paths []string) ([]string, map[string][]string) {
	only := map[string][]string{}
	out := make([]string, 0, len(paths))
	for _, p := range paths {
		file, test, ok := strings.Cut(p, "::")
		if !ok {
			out = append(out, p)
			continue
		}
		file = filepath.Clean(file)
		if _, seen := only[file]; !seen {
			out = append(out, file)
		}
		only[file] = append(only[file], test)
	}
	return out, only
}

// forEach calls fn(i) for i in [0, n) on up to parallel goroutines,
// starting no call once ctx is done.
func forEach(ctx context.Context, n, parallel int, fn func(i int)) {
	var next atomic.Int64
	var wg sync.WaitGroup
	for w := 0; w < min(parallel, n); w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				fn(i)
			}
		}()
	}
	wg.Wait()
}
