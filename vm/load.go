package vm

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync"

	"go.starlark.net/starlark"

	"github.com/skein-dev/skein/stdlib"
	"github.com/skein-dev/skein/workspace"
)

// StdlibPrefix introduces modules embedded from the stdlib directory:
// load("@stdlib/strings.star", "x").
const StdlibPrefix = "@stdlib/"

// loader executes loaded modules once per VM and caches their globals.
type loader struct {
	state *State
	mu    sync.Mutex
	cache map[string]*loadEntry
}

type loadEntry struct {
	done    chan struct{}
	globals starlark.StringDict
	err     error
}

func newLoader(s *State) *loader {
	return &loader{state: s, cache: map[string]*loadEntry{}}
}

// Thread-local keys of a module's thread: the file it executes (for
// relative loads) and the chain of modules being loaded (for cycles).
// SetFile records on the thread the file whose code it runs, so that
// load() resolves relative paths against that file's directory. The REPL
// uses a file name inside the working directory.
func SetFile(thread *starlark.Thread, filename string) {
	mustScope(thread).file = filename
}

// Dir returns the directory relative paths of thread's code are resolved
// against, as load() resolves them: the directory of the file it runs,
// else the VM's Root.
func Dir(thread *starlark.Thread) string {
	sc := scopeOf(thread)
	switch {
	case sc == nil:
		return "."
	case sc.file != "":
		return filepath.Dir(sc.file)
	}
	return sc.state.Root
}

// load implements starlark.Thread.Load.
func (l *loader) load(thread *starlark.Thread, module string) (starlark.StringDict, error) {
	key, src, err := l.resolve(thread, module)
	if err != nil {
		return nil, err
	}
	var chain []string
	if sc := scopeOf(thread); sc != nil {
		chain = sc.loads
	}
	for i, k := range chain {
		if k == key {
			cycle := append(append([]string{}, chain[i:]...), key)
			return nil, fmt.Errorf("cycle in load graph: %s", strings.Join(cycle, " -> "))
		}
	}

	l.mu.Lock()
	if e, ok := l.cache[key]; ok {
		l.mu.Unlock()
		<-e.done
		return e.globals, e.err
	}
	e := &loadEntry{done: make(chan struct{})}
	l.cache[key] = e
	l.mu.Unlock()

	data, err := src()
	if err != nil {
		e.err = err
	} else {
		t := l.state.NewThread("load " + key)
		SetFile(t, key)
		mustScope(t).loads = append(append([]string{}, chain...), key)
		e.globals, e.err = starlark.ExecFileOptions(Dialect(), t, key, data, l.state.predeclared)
		l.state.Release(t)
	}
	close(e.done)
	return e.globals, e.err
}

// resolve maps a load string to a cache key (a cleaned path, or the
// @stdlib name) and a function reading its source.
func (l *loader) resolve(thread *starlark.Thread, module string) (string, func() ([]byte, error), error) {
	if name, ok := strings.CutPrefix(module, StdlibPrefix); ok {
		if name == "" || path.Clean(name) != name || strings.HasPrefix(name, "..") || !strings.HasSuffix(name, ".star") {
			return "", nil, fmt.Errorf("invalid stdlib module %q (want %s<name>.star)", module, StdlibPrefix)
		}
		return module, func() ([]byte, error) {
			data, err := fs.ReadFile(stdlib.FS, name)
			if err != nil {
				return nil, fmt.Errorf("no stdlib module %q (available: %s)", module, strings.Join(stdlib.Names(), ", "))
			}
			return data, nil
		}, nil
	}
	if module == "" {
		return "", nil, fmt.Errorf("empty module path")
	}
	if filepath.IsAbs(module) {
		return "", nil, fmt.Errorf("absolute path %q is not allowed (load paths are relative to the loading file)", module)
	}
	// The key is the path as the user would write it from the working
	// directory (it appears in tracebacks); the escape check uses its
	// absolute form.
	var from string
	if sc := scopeOf(thread); sc != nil {
		from = sc.file
	}
	dir := l.state.Root
	if from != "" {
		dir = filepath.Dir(from)
	}
	p := filepath.Clean(filepath.Join(dir, filepath.FromSlash(module)))
	abs, err := filepath.Abs(p)
	if err != nil {
		return "", nil, err
	}
	rel, err := filepath.Rel(l.state.Root, abs)
	if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return "", nil, fmt.Errorf("%q escapes the script directory %s", module, l.state.Root)
	}
	return p, func() ([]byte, error) { return l.read(module, p, rel) }, nil
}

// read reads the module file rel of the script directory through an
// os.Root, so that a symbolic link leading out of the directory is an
// escape like "..": the real path is checked, not the one written. A
// file with more than one hard link is refused too, outside the full fs
// scope (its other link may be outside the directory), and so is one
// larger than the workspace's read limit.
func (l *loader) read(module, p, rel string) ([]byte, error) {
	root, err := os.OpenRoot(l.state.Root)
	if err != nil {
		return nil, err
	}
	defer root.Close()
	f, err := root.Open(rel)
	var pe *fs.PathError
	switch {
	case err == nil:
	case workspace.IsEscape(err):
		return nil, fmt.Errorf("%q escapes the script directory %s (through a symbolic link)", module, filepath.Dir(p))
	case errors.As(err, &pe):
		return nil, &fs.PathError{Op: "open", Path: p, Err: pe.Err}
	default:
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	ws := l.state.Workspace
	if n := workspace.LinkCount(fi); fi.Mode().IsRegular() && n > 1 && ws.Tier() != workspace.Full {
		return nil, fmt.Errorf("%q has %d hard links: a module with more than one link may be a file outside the script directory %s (fs scope %s; --fs-scope full allows it)", module, n, l.state.Root, ws.Tier())
	}
	limit := ws.MaxReadBytes()
	if fi.Size() > limit {
		return nil, workspace.TooBig(module, fi.Size(), limit)
	}
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, &fs.PathError{Op: "read", Path: p, Err: underlyingErr(err)}
	}
	if int64(len(data)) > limit {
		return nil, workspace.TooBig(module, int64(len(data)), limit)
	}
	return data, nil
}

// underlyingErr is the error a *fs.PathError wraps, else err.
func underlyingErr(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}
