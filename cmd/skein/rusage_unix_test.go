//go:build unix

package main

import (
	"os"
	"syscall"
)

// minorFaults returns the minor page faults a finished process took.
func minorFaults(ps *os.ProcessState) (int64, bool) {
	ru, ok := ps.SysUsage().(*syscall.Rusage)
	if !ok {
		return 0, false
	}
	return int64(ru.Minflt), true
}
