package workspace

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// access is the kind of access a path is resolved for.
type access int

const (
	accessRead access = iota
	accessWrite
)

func (a access) String() string {
	if a == accessWrite {
		return "write"
	}
	return "read"
}

// target is a path resolved and checked against the policy: the result of
// the check step, consumed by the open step (openTarget and friends).
type target struct {
	given  string // as the caller wrote it, for messages
	abs    string // absolute, clean, symbolic links resolved
	scope  string // the scope directory abs was checked against
	rel    string // abs relative to scope: "." or "a/b"
	exists bool   // whether abs existed when resolved
	access access
}

// ResolveRead returns the absolute path, symbolic links resolved, that a
// read of path would use, or an error if the policy refuses it. A relative
// path is relative to Root. The path need not exist: the links of its
// nearest existing parent are resolved and the rest appended.
func (p *Policy) ResolveRead(path string) (string, error) {
	t, err := p.resolve(path, accessRead)
	if err != nil {
		return "", err
	}
	return t.abs, nil
}

// ResolveWrite is ResolveRead for a write: the path must be in write
// scope (Root, or anywhere for the full tier).
func (p *Policy) ResolveWrite(path string) (string, error) {
	t, err := p.resolve(path, accessWrite)
	if err != nil {
		return "", err
	}
	return t.abs, nil
}

// ResolveList is ResolveRead for listing a directory; listing is a read.
func (p *Policy) ResolveList(dir string) (string, error) {
	return p.ResolveRead(dir)
}

// scopeDir returns the directory accesses of kind a are confined to.
func (p *Policy) scopeDir(a access) string {
	switch {
	case p.tier == Full:
		return string(filepath.Separator)
	case p.tier == Project && a == accessRead && p.gitRoot != "":
		return p.gitRoot
	}
	return p.root
}

// resolve cleans path, makes it absolute against Root, resolves its
// symbolic links and checks the result against the scope of a.
func (p *Policy) resolve(path string, a access) (*target, error) {
	if err := p.check(); err != nil {
		return nil, err
	}
	if path == "" {
		return nil, errors.New("empty path")
	}
	if strings.ContainsRune(path, 0) {
		return nil, fmt.Errorf("path %q contains a NUL byte", path)
	}
	abs := path
	if filepath.IsAbs(abs) {
		abs = filepath.Clean(abs)
	} else {
		abs = filepath.Join(p.root, abs)
	}
	scope := p.scopeDir(a)
	real, exists, err := evalExisting(abs)
	if err == nil && p.tier == Full {
		scope = filepath.VolumeName(real) + string(filepath.Separator)
	}
	if err != nil {
		if !within(abs, scope) {
			// Do not tell what is wrong with a path out of scope.
			return nil, p.outside(path, a, "")
		}
		return nil, fmt.Errorf("cannot resolve %q: %w", path, errorCause(err))
	}
	if !within(real, scope) {
		how := ""
		if within(abs, scope) {
			how = "resolves through a symbolic link to"
		}
		return nil, p.outside(path, a, how)
	}
	rel, err := filepath.Rel(scope, real)
	if err != nil {
		return nil, fmt.Errorf("cannot resolve %q: %w", path, err)
	}
	return &target{given: path, abs: real, scope: scope, rel: rel, exists: exists, access: a}, nil
}

// outside returns the refusal of path for an access of kind a. how
// replaces "is" in "path %q is outside ...".
func (p *Policy) outside(path string, a access, how string) error {
	if how == "" {
		how = "is"
	}
	action, rule := a.String()+" "+path, "fs scope "+p.tier.String()
	switch {
	case p.tier == Project && a == accessRead && p.gitRoot != "":
		return refusef(action, rule, "path %q %s outside the git project (fs scope project: reads only under %s)", path, how, p.gitRoot)
	case p.tier == Project && a == accessRead:
		return refusef(action, rule, "path %q %s outside the workspace (fs scope project, no git root: reads only inside %s)", path, how, p.root)
	case p.tier == Project:
		return refusef(action, rule, "path %q %s outside the workspace (fs scope project: writes only inside %s)", path, how, p.root)
	}
	return refusef(action, rule, "path %q %s outside the workspace (fs scope %s: %s)", path, how, p.tier, p.root)
}

// evalExisting resolves the symbolic links of abs (absolute and clean).
// When abs does not exist, it resolves its nearest existing parent and
// appends the remaining components, and reports exists false.
func evalExisting(abs string) (real string, exists bool, err error) {
	real, err = filepath.EvalSymlinks(abs)
	if err == nil {
		return real, true, nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return "", false, err
	}
	dir, rest := abs, []string(nil)
	for {
		_, lerr := os.Lstat(dir)
		if lerr == nil {
			break
		}
		if !errors.Is(lerr, fs.ErrNotExist) {
			return "", false, lerr
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", false, err
		}
		rest = append(rest, filepath.Base(dir))
		dir = parent
	}
	if len(rest) == 0 {
		// abs itself exists (Lstat) but does not resolve: a dangling
		// symbolic link somewhere along it.
		return "", false, fmt.Errorf("dangling symbolic link: %w", errorCause(err))
	}
	real, err = filepath.EvalSymlinks(dir)
	if err != nil {
		return "", false, fmt.Errorf("dangling symbolic link: %w", errorCause(err))
	}
	parts := make([]string, 0, len(rest)+1)
	parts = append(parts, real)
	for i := len(rest) - 1; i >= 0; i-- {
		parts = append(parts, rest[i])
	}
	return filepath.Join(parts...), false, nil
}

// within reports whether path is dir or below it. Both are absolute and
// clean.
func within(path, dir string) bool {
	if path == dir {
		return true
	}
	if !strings.HasSuffix(dir, string(filepath.Separator)) {
		dir += string(filepath.Separator)
	}
	return strings.HasPrefix(path, dir)
}

// errorCause strips the *fs.PathError and *os.LinkError wrappers (which
// repeat an absolute path) from err.
func errorCause(err error) error {
	for {
		var pe *fs.PathError
		var le *os.LinkError
		switch {
		case errors.As(err, &pe):
			err = pe.Err
		case errors.As(err, &le):
			err = le.Err
		default:
			return err
		}
	}
}

// ioError reports err from operation op on the path the caller wrote.
func ioError(op string, t *target, err error) error {
	return fmt.Errorf("%s %q: %w", op, t.given, errorCause(err))
}

// IsEscape reports whether err is os.Root's refusal of a path that leads
// out of the root (through "..", or a symbolic link). (os does not export
// that error; the tests would catch a change of its text.)
func IsEscape(err error) bool {
	var pe *fs.PathError
	if !errors.As(err, &pe) {
		return false
	}
	cause := errorCause(err)
	return cause != nil && cause.Error() == "path escapes from parent"
}

// withRoot opens t's scope directory as an os.Root and calls fn with it
// and t's path relative to it. A refusal by os.Root (the path changed
// since it was checked and now leads out of scope) becomes a refusal
// naming t; any other error from fn is returned as it is.
func (p *Policy) withRoot(t *target, fn func(r *os.Root, rel string) error) error {
	r, err := os.OpenRoot(t.scope)
	if err != nil {
		return fmt.Errorf("open scope directory %s: %w", t.scope, errorCause(err))
	}
	defer r.Close()
	err = fn(r, t.rel)
	if IsEscape(err) {
		return p.outside(t.given, t.access, "changed while being opened and now leads")
	}
	return err
}

// openTarget opens t with flag and perm through its scope's os.Root, so
// that the file opened is beneath the scope directory even if the path
// was changed after the check. This is the open step of every file
// operation. Outside the full tier it refuses a regular file with more
// than one hard link (see checkLinks), before truncating it.
func (p *Policy) openTarget(t *target, flag int, perm fs.FileMode) (*os.File, error) {
	var f *os.File
	truncate := flag&os.O_TRUNC != 0
	err := p.withRoot(t, func(r *os.Root, rel string) error {
		if flag&os.O_CREATE != 0 {
			if dir := filepath.Dir(rel); dir != "." {
				if err := r.MkdirAll(dir, 0o755); err != nil {
					return err
				}
			}
		}
		var err error
		f, err = r.OpenFile(rel, flag&^os.O_TRUNC, perm)
		return err
	})
	if err != nil {
		if errors.Is(err, ErrNotAllowed) {
			return nil, err
		}
		return nil, ioError("open", t, err)
	}
	if err := p.checkLinks(t, f); err != nil {
		f.Close()
		return nil, err
	}
	if truncate {
		if err := f.Truncate(0); err != nil {
			f.Close()
			return nil, ioError("truncate", t, err)
		}
	}
	return f, nil
}

// checkLinks refuses, in the sandboxed and project tiers, an open
// regular file with more than one hard link: the other link may be
// outside the scope (a hard link inside the workspace to a file outside
// it would otherwise be read, or rewritten in place, through the
// workspace). The full tier reaches every file anyway.
func (p *Policy) checkLinks(t *target, f *os.File) error {
	if p.tier == Full {
		return nil
	}
	fi, err := f.Stat()
	if err != nil {
		return ioError("stat", t, err)
	}
	if n := LinkCount(fi); fi.Mode().IsRegular() && n > 1 {
		return refusef(t.access.String()+" "+t.given, "fs scope "+p.tier.String()+" (hard links)", "%q has %d hard links: a file with more than one link may be outside the workspace (fs scope %s: %s)", t.given, n, p.tier, p.scopeDir(t.access))
	}
	return nil
}

// DirInside resolves path to an existing directory inside root, for a
// caller that hands out directories of a root (skein serve registers
// repositories so): a relative path is relative to root; the path is
// cleaned and its symbolic links resolved before it is checked. It
// returns the resolved path. A path that leads out of root, through "..",
// an absolute path or a symbolic link, is refused with an error matching
// ErrNotAllowed; a missing path is an error matching fs.ErrNotExist; a
// path that is not a directory is an error too. root must be absolute,
// clean and resolved (Policy.Root is).
func DirInside(root, path string) (string, error) {
	if path == "" {
		return "", errors.New("empty path")
	}
	if strings.ContainsRune(path, 0) {
		return "", fmt.Errorf("path %q contains a NUL byte", path)
	}
	abs := path
	if !filepath.IsAbs(abs) {
		abs = filepath.Join(root, abs)
	}
	abs = filepath.Clean(abs)
	action, rule := "use "+path, "workspace root "+root
	if !within(abs, root) {
		return "", refusef(action, rule, "path %q is outside the workspace root %s", path, root)
	}
	real, exists, err := evalExisting(abs)
	if err != nil {
		return "", fmt.Errorf("cannot resolve %q: %w", path, errorCause(err))
	}
	if !within(real, root) {
		return "", refusef(action, rule, "path %q resolves through a symbolic link to outside the workspace root %s", path, root)
	}
	if !exists {
		return "", fmt.Errorf("no directory %q: %w", path, fs.ErrNotExist)
	}
	fi, err := os.Stat(real)
	if err != nil {
		return "", fmt.Errorf("stat %q: %w", path, errorCause(err))
	}
	if !fi.IsDir() {
		return "", fmt.Errorf("%q is not a directory", path)
	}
	return real, nil
}
