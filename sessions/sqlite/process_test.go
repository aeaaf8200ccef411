package sqlite

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/skein-dev/skein/sessions"
	"github.com/skein-dev/skein/sessions/sessionstest"
)

// openTarget opens the database file at path, for the multi-process tests.
func openTarget(path string) (sessions.Backend, error) { return Open(path) }

func TestMain(m *testing.M) {
	sessionstest.ProcessHelper(openTarget)
	code := m.Run()
	for _, f := range slices.Backward(listBench.cleanup) {
		f()
	}
	os.Exit(code)
}

func TestProcesses(t *testing.T) {
	sessionstest.RunProcessTests(t, func(t *testing.T) string { return filepath.Join(t.TempDir(), "sessions.db") }, openTarget)
}
