package sessions_test

import (
	"testing"

	"github.com/skein-dev/skein/sessions"
	"github.com/skein-dev/skein/sessions/sessionstest"
)

func TestLocalLocker(t *testing.T) {
	sessionstest.RunLockerTests(t, func(t *testing.T) (sessions.Locker, sessions.Locker) {
		l := sessions.NewLocalLocker()
		return l, l
	})
}
