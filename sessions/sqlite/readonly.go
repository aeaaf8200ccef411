package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// ErrReadOnly means the database cannot be opened for writing: its file,
// or the directory SQLite keeps its -wal and -shm files in, is read-only.
// ReadOnly opens such a database for reading.
var ErrReadOnly = errors.New("read-only")

// ErrNeedsMigration means Open found a database of an older schema,
// which Migrate (skein migrate) upgrades, or a ReadOnly open found a new,
// empty file, which only a writable Open creates.
var ErrNeedsMigration = errors.New("the database needs migrating to this skein's schema")

// needsMigration is Open's error for a file of an older schema.
type needsMigration struct {
	path    string
	version int
}

func (e *needsMigration) Error() string {
	return fmt.Sprintf("schema version %d is older than this skein's (%d): upgrade the file with `skein migrate --store %s` (it keeps every session)", e.version, SchemaVersion, e.path)
}

func (e *needsMigration) Unwrap() error { return ErrNeedsMigration }

// ReadOnly opens the database for reading only: Open neither creates nor
// migrates it, writes fail, and a database whose file or directory is
// read-only can be read (listed, shown, exported). A file that does not
// exist is fs.ErrNotExist; one of an older schema is ErrNeedsMigration.
func ReadOnly() Option {
	return func(b *Backend) { b.readOnly = true }
}

// openReadOnly is Open with ReadOnly. A read-only connection reads a WAL
// database through its -shm file, which SQLite must be able to create
// when it is missing; in a read-only directory it cannot, so when the
// file has no -wal file (everything is in the database file: the last
// writer checkpointed it and closed) the database is opened immutable,
// which needs no -shm. Nobody can be writing to it then: a writer would
// need to create the -wal file in that directory.
func openReadOnly(b *Backend, path string) (*Backend, error) {
	if _, err := os.Stat(path); err != nil {
		return nil, fmt.Errorf("sqlite: %w", err)
	}
	_, walErr := os.Stat(path + "-wal")
	var err error
	for _, immutable := range []bool{false, true} {
		if immutable && !errors.Is(walErr, fs.ErrNotExist) {
			break
		}
		if b.db, err = sql.Open("sqlite", readOnlyDSN(path, immutable)); err != nil {
			return nil, fmt.Errorf("sqlite: open %s: %w", path, err)
		}
		b.path = path
		if err = b.checkReadable(context.Background()); err == nil {
			return b, nil
		}
		b.db.Close()
		if errors.Is(err, ErrNeedsMigration) {
			break
		}
	}
	b.db = nil
	return nil, fmt.Errorf("sqlite: open %s: %w", path, err)
}

// checkReadable checks that the database is a skein session database of
// this schema version.
func (b *Backend) checkReadable(ctx context.Context) error {
	return b.read(ctx, func(tx *sql.Tx) error {
		version, err := checkSchema(ctx, tx)
		switch {
		case err == nil && version == 0:
			err = fmt.Errorf("a new, empty file: %w", ErrNeedsMigration)
		case err == nil && version < SchemaVersion:
			err = &needsMigration{path: b.path, version: version}
		}
		return err
	})
}

// readOnlyCause explains err, a failure to open or write the database at
// path, as ErrReadOnly when the file or its directory cannot be written
// (SQLite itself says only "unable to open database file"); other errors
// are returned unchanged.
func readOnlyCause(path string, err error) error {
	denied := func(err error) bool {
		return errors.Is(err, fs.ErrPermission) || errors.Is(err, syscall.EROFS)
	}
	const sqliteReadOnly, sqliteCantOpen = 8, 14
	if code := resultCode(err); !denied(err) && code != sqliteReadOnly && code != sqliteCantOpen {
		return err
	}
	if f, ferr := os.OpenFile(path, os.O_RDWR, 0); denied(ferr) {
		return fmt.Errorf("the file is %w (%v): make it writable", ErrReadOnly, err)
	} else if ferr == nil {
		f.Close()
	}
	dir := filepath.Dir(path)
	probe, perr := os.CreateTemp(dir, ".skein-probe-*")
	if denied(perr) {
		return fmt.Errorf("its directory is %w, and SQLite needs to create %s-wal and -shm files beside the database (%v): make the directory writable", ErrReadOnly, filepath.Base(path), err)
	}
	if perr == nil {
		probe.Close()
		os.Remove(probe.Name())
	}
	return err
}
