package workspace

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"slices"
	"strings"
)

// OpenRead opens path for reading after checking it against the read
// scope. It must be a regular file. The caller closes the file.
func (p *Policy) OpenRead(path string) (*os.File, error) {
	t, err := p.resolve(path, accessRead)
	if err != nil {
		return nil, err
	}
	return p.openRead(t)
}

// openRead is the open step of a read.
func (p *Policy) openRead(t *target) (*os.File, error) {
	if !t.exists {
		return nil, ioError("open", t, fs.ErrNotExist)
	}
	// Refuse a device or FIFO before opening it: opening or reading one
	// could block or never end.
	if fi, err := os.Stat(t.abs); err == nil {
		if err := notRegular(t, fi); err != nil {
			return nil, err
		}
	}
	f, err := p.openTarget(t, os.O_RDONLY, 0)
	if err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	if err == nil {
		err = notRegular(t, fi)
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

func notRegular(t *target, fi fs.FileInfo) error {
	switch {
	case fi.Mode().IsRegular():
		return nil
	case fi.IsDir():
		return fmt.Errorf("%q is a directory", t.given)
	}
	return fmt.Errorf("%q is not a regular file", t.given)
}

// ReadFile returns the contents of the file at path, checked against the
// read scope. The whole file is read into memory.
func (p *Policy) ReadFile(path string) ([]byte, error) {
	t, err := p.resolve(path, accessRead)
	if err != nil {
		return nil, err
	}
	return p.readTarget(t)
}

func (p *Policy) readTarget(t *target) ([]byte, error) {
	f, err := p.openWhole(t)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, p.maxRead+1))
	if err != nil {
		return nil, ioError("read", t, err)
	}
	if int64(len(data)) > p.maxRead { // it grew after the check
		return nil, TooBig(t.given, int64(len(data)), p.maxRead)
	}
	return data, nil
}

// openWhole opens a file to be read whole, refusing one larger than the
// read limit.
func (p *Policy) openWhole(t *target) (*os.File, error) {
	f, err := p.openRead(t)
	if err != nil {
		return nil, err
	}
	if fi, err := f.Stat(); err == nil && fi.Size() > p.maxRead {
		f.Close()
		return nil, TooBig(t.given, fi.Size(), p.maxRead)
	}
	return f, nil
}

// TooBig is the error of a file read whole (fs.read, a load()ed module)
// that is larger than the read limit.
func TooBig(name string, size, limit int64) error {
	return fmt.Errorf("%q is %s, more than the %s a file read whole may have (--max-read-bytes raises the limit)", name, formatBytes(size), formatBytes(limit))
}

// formatBytes writes n as bytes, KiB, MiB or GiB for a message.
func formatBytes(n int64) string {
	switch {
	case n >= 1<<30 && n%(1<<30) == 0:
		return fmt.Sprintf("%d GiB", n>>30)
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d bytes", n)
}

// WriteFile writes data to the file at path, checked against the write
// scope, creating or truncating it (mode 0644 before umask) and creating
// its missing parent directories (0755) inside the scope.
func (p *Policy) WriteFile(path string, data []byte) error {
	t, err := p.resolve(path, accessWrite)
	if err != nil {
		return err
	}
	return p.writeTarget(t, data, os.O_WRONLY|os.O_CREATE|os.O_TRUNC)
}

// AppendFile appends data to the file at path like WriteFile, creating it
// if it does not exist.
func (p *Policy) AppendFile(path string, data []byte) error {
	t, err := p.resolve(path, accessWrite)
	if err != nil {
		return err
	}
	return p.writeTarget(t, data, os.O_WRONLY|os.O_CREATE|os.O_APPEND)
}

func (p *Policy) writeTarget(t *target, data []byte, flag int) error {
	if t.exists {
		fi, err := os.Stat(t.abs)
		if err == nil {
			err = notRegular(t, fi)
		}
		if err != nil {
			return err
		}
	}
	f, err := p.openTarget(t, flag, 0o644)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return ioError("write", t, err)
	}
	return nil
}

// Exists reports whether path exists, after checking it against the read
// scope: a path out of scope is an error, not false.
func (p *Policy) Exists(path string) (bool, error) {
	t, err := p.resolve(path, accessRead)
	if err != nil {
		if !errors.Is(err, ErrNotAllowed) && errors.Is(err, fs.ErrNotExist) {
			return false, nil // a dangling link in scope
		}
		return false, err
	}
	if !t.exists {
		return false, nil
	}
	err = p.withRoot(t, func(r *os.Root, rel string) error {
		_, err := r.Stat(rel)
		return err
	})
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, ErrNotAllowed):
		return false, err
	case errors.Is(err, fs.ErrNotExist):
		return false, nil
	}
	return false, ioError("stat", t, err)
}

// Entry is one directory entry returned by ListEntries.
type Entry struct {
	Name  string
	IsDir bool
	// Size is the size in bytes of a regular file, 0 otherwise.
	Size int64
}

// List returns the names of the entries of directory dir, checked against
// the read scope, sorted. If glob is not "", only names matching it
// (path.Match) are returned.
func (p *Policy) List(dir, glob string) ([]string, error) {
	entries, err := p.ListEntries(dir, glob)
	if err != nil {
		return nil, err
	}
	names := make([]string, len(entries))
	for i, e := range entries {
		names[i] = e.Name
	}
	return names, nil
}

// ListEntries is List returning entries. A symbolic link is listed as
// itself (IsDir false), wherever it points.
func (p *Policy) ListEntries(dir, glob string) ([]Entry, error) {
	if err := checkGlob(glob); err != nil {
		return nil, err
	}
	t, err := p.resolve(dir, accessRead)
	if err != nil {
		return nil, err
	}
	return p.listTarget(t, glob)
}

func checkGlob(glob string) error {
	if _, err := path.Match(glob, ""); err != nil {
		return fmt.Errorf("invalid glob %q: %w", glob, err)
	}
	return nil
}

func (p *Policy) listTarget(t *target, glob string) ([]Entry, error) {
	if !t.exists {
		return nil, ioError("list", t, fs.ErrNotExist)
	}
	var des []fs.DirEntry
	err := p.withRoot(t, func(r *os.Root, rel string) error {
		f, err := r.Open(rel)
		if err != nil {
			return err
		}
		defer f.Close()
		fi, err := f.Stat()
		if err != nil {
			return err
		}
		if !fi.IsDir() {
			return fmt.Errorf("%q is not a directory", t.given)
		}
		des, err = f.ReadDir(-1)
		return err
	})
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			return nil, ioError("list", t, err)
		}
		return nil, err
	}
	entries := make([]Entry, 0, len(des))
	for _, de := range des {
		if glob != "" {
			if ok, _ := path.Match(glob, de.Name()); !ok {
				continue
			}
		}
		e := Entry{Name: de.Name(), IsDir: de.IsDir()}
		if de.Type().IsRegular() {
			if fi, err := de.Info(); err == nil {
				e.Size = fi.Size()
			}
		}
		entries = append(entries, e)
	}
	slices.SortFunc(entries, func(a, b Entry) int { return strings.Compare(a.Name, b.Name) })
	return entries, nil
}
