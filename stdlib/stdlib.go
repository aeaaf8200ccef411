// Package stdlib embeds skein's standard Starlark modules, loaded by
// scripts as load("@stdlib/<name>.star", ...).
package stdlib

import (
	"embed"
	"io/fs"
	"sort"
)

// FS holds the embedded modules, one .star file each.
//
//go:embed *.star
var FS embed.FS

// Names lists the embedded module names ("@stdlib/" + name loads one).
func Names() []string {
	entries, _ := fs.ReadDir(FS, ".")
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	sort.Strings(names)
	return names
}
