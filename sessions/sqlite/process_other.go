//go:build !unix

package sqlite

import "os"

// processHost names this machine (see the unix version).
func processHost() string {
	host, _ := os.Hostname()
	return host
}

func processID() int { return os.Getpid() }

// processAlive cannot tell here: a lock outlives its dead holder until
// its lease runs out.
func processAlive(int) bool { return true }
