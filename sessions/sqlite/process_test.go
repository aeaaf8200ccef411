package sqlite

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/skein-dev/skein/sessions"
	"github.com/skein-dev/skein/sessions/sessionstest"
)

// openTarget opens the database file at path, for the multi-process tests.
func openTarget(path string) (sessions.Backend, error) { return Open(path) }

func TestMain(m *testing.M) {
	sessionstest.ProcessHelper(openTarget)
	os.Exit(m.Run())
}

func TestProcesses(t *testing.T) {
	sessionstest.RunProcessTests(t, func(t *testing.T) string { return filepath.Join(t.TempDir(), "sessions.db") }, openTarget)
}
