package main

import (
	"errors"
	"io"
	"os"
	"path/filepath"
)

// replaceFile writes path through write: into a temporary file beside
// it (user-only), renamed over path only once write and the close
// succeeded. A refused or failed export leaves an existing file as it
// was (writing into it directly emptied it first), and no half-written
// file is left behind.
func replaceFile(path string, write func(w io.Writer) error) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	err = write(f)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		return errors.Join(err, ignoreMissing(os.Remove(tmp)))
	}
	return nil
}

// ignoreMissing is err unless the file it is about does not exist.
func ignoreMissing(err error) error {
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	return err
}
