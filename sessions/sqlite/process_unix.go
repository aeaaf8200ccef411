//go:build unix

package sqlite

import (
	"errors"
	"os"
	"syscall"
)

// processHost names this machine and process namespace, in which a lock
// holder's pid can be checked: the host name and, on Linux, the pid
// namespace (two containers may share a host name and a volume but not
// their pids).
func processHost() string {
	host, _ := os.Hostname()
	if ns, err := os.Readlink("/proc/self/ns/pid"); err == nil {
		host += " " + ns
	}
	return host
}

func processID() int { return os.Getpid() }

// processAlive reports whether a process with pid exists (a process of
// another user counts).
func processAlive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}
