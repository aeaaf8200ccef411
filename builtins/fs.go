package builtins

// The fs module: files under the workspace policy.
//
//	fs.read(path) -> str
//	fs.write(path, data) -> None
//	fs.append(path, data) -> None
//	fs.exists(path) -> bool
//	fs.list(dir=".", glob=None) -> [str]
//	fs.read_jsonl(path) -> list
//	fs.read_csv(path) -> [dict]
//
// A relative path is relative to the workspace root. Reads are confined
// to the fs scope's read root, writes to its write root; every path is
// cleaned and its symbolic links resolved before the check, and a path
// out of scope fails with a message naming the tier. data is a str or
// bytes; write creates missing parent directories.

import (
	"fmt"

	"go.starlark.net/starlark"

	"github.com/skein-dev/skein/vm"
	"github.com/skein-dev/skein/workspace"
)

func fsSpecs() []Spec {
	const area = "Workspace"
	return []Spec{
		{"fs.read", "(path) -> str", "The contents of a file in read scope.", area, fsRead},
		{"fs.write", "(path, data) -> None", "Create or truncate a file in write scope (data: str or bytes); parent directories are created.", area, fsWrite},
		{"fs.append", "(path, data) -> None", "Append to a file in write scope, creating it if missing.", area, fsAppend},
		{"fs.exists", "(path) -> bool", "Whether a path in read scope exists (a path out of scope is an error, not False).", area, fsExists},
		{"fs.list", "(dir=\".\", glob=None) -> [str]", "The sorted names in a directory in read scope, optionally those matching a glob.", area, fsList},
		{"fs.read_jsonl", "(path) -> list", "The values of a JSON Lines file (blank lines skipped; integers exact).", area, fsReadJSONL},
		{"fs.read_csv", "(path) -> [dict]", "The rows of a CSV file with a header row, each a dict from column to str, in column order.", area, fsReadCSV},
	}
}

// unpackPath unpacks a builtin's single path argument and the policy.
func unpackPath(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (string, *workspace.Policy, error) {
	var path string
	if err := starlark.UnpackArgs(b.Name(), args, kwargs, "path", &path); err != nil {
		return "", nil, err
	}
	p, err := policyOf(thread, b.Name())
	if err != nil {
		return "", nil, err
	}
	return path, p, nil
}

func fsRead(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	path, p, err := unpackPath(thread, b, args, kwargs)
	if err != nil {
		return nil, err
	}
	data, err := p.ReadFile(path)
	if err != nil {
		return nil, fail(b.Name(), err)
	}
	return starlark.String(data), nil
}

// unpackWrite unpacks (path, data) with data a str or bytes.
func unpackWrite(b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (string, []byte, error) {
	var path string
	var data starlark.Value
	if err := starlark.UnpackArgs(b.Name(), args, kwargs, "path", &path, "data", &data); err != nil {
		return "", nil, err
	}
	switch d := data.(type) {
	case starlark.String:
		return path, []byte(d), nil
	case starlark.Bytes:
		return path, []byte(d), nil
	}
	return "", nil, fmt.Errorf("%s: for parameter data: got %s, want string or bytes", b.Name(), data.Type())
}

func fsWrite(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	return writeWith(thread, b, args, kwargs, (*workspace.Policy).WriteFile)
}

func fsAppend(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	return writeWith(thread, b, args, kwargs, (*workspace.Policy).AppendFile)
}

// writeWith is fs.write and fs.append: unpack (path, data), then write
// through the thread's policy.
func writeWith(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple,
	write func(p *workspace.Policy, path string, data []byte) error) (starlark.Value, error) {
	path, data, err := unpackWrite(b, args, kwargs)
	if err != nil {
		return nil, err
	}
	p, err := policyOf(thread, b.Name())
	if err != nil {
		return nil, err
	}
	if err := write(p, path, data); err != nil {
		return nil, fail(b.Name(), err)
	}
	return starlark.None, nil
}

func fsExists(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	path, p, err := unpackPath(thread, b, args, kwargs)
	if err != nil {
		return nil, err
	}
	ok, err := p.Exists(path)
	if err != nil {
		return nil, fail(b.Name(), err)
	}
	return starlark.Bool(ok), nil
}

func fsList(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	dir, glob := ".", ""
	if err := starlark.UnpackArgs(b.Name(), args, kwargs, "dir??", &dir, "glob??", &glob); err != nil {
		return nil, err
	}
	p, err := policyOf(thread, b.Name())
	if err != nil {
		return nil, err
	}
	names, err := p.List(dir, glob)
	if err != nil {
		return nil, fail(b.Name(), err)
	}
	return vm.ToStarlark(names), nil
}

func fsReadJSONL(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	path, p, err := unpackPath(thread, b, args, kwargs)
	if err != nil {
		return nil, err
	}
	values, err := p.ReadJSONL(path)
	if err != nil {
		return nil, fail(b.Name(), err)
	}
	return vm.ToStarlark(values), nil
}

func fsReadCSV(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	path, p, err := unpackPath(thread, b, args, kwargs)
	if err != nil {
		return nil, err
	}
	header, rows, err := p.ReadCSV(path)
	if err != nil {
		return nil, fail(b.Name(), err)
	}
	out := make([]starlark.Value, len(rows))
	for i, row := range rows {
		d := starlark.NewDict(len(header))
		for _, col := range header {
			_ = d.SetKey(starlark.String(col), starlark.String(row[col]))
		}
		out[i] = d
	}
	return starlark.NewList(out), nil
}
