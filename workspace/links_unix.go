//go:build unix

package workspace

import (
	"io/fs"
	"syscall"
)

// LinkCount returns the number of hard links of the file fi describes,
// or 1 when the system does not say.
func LinkCount(fi fs.FileInfo) uint64 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return uint64(st.Nlink)
	}
	return 1
}
