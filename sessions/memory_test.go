package sessions_test

import (
	"testing"

	"github.com/skein-dev/skein/sessions"
	"github.com/skein-dev/skein/sessions/sessionstest"
)

func TestMemoryBackend(t *testing.T) {
	sessionstest.RunBackendTests(t, func(t *testing.T) sessions.Backend {
		return sessions.NewMemoryBackend()
	})
}

func TestMemoryBackendDurable(t *testing.T) {
	if sessions.NewMemoryBackend().Durable() {
		t.Fatal("the memory backend reports itself durable")
	}
	t.Skip("the memory backend is not durable: nothing survives Close, so RunDurableTests does not apply")
}
