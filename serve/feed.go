package serve

import (
	"context"
	"time"

	"github.com/skein-dev/skein/sessions"
)

// DefaultPollInterval is the default of Config.PollInterval.
const DefaultPollInterval = 250 * time.Millisecond

// startPoller starts the loop that looks, every PollInterval, for what
// other processes sharing the store did: new events of the sessions
// this server streams (it wakes their SSE clients, which read the events
// from the store), and turns a dead process left behind (it repairs
// their sessions). Events this process writes reach its streams at once
// without it. It returns the function that stops the loop.
func (s *Server) startPoller() (stop func()) {
	reader, _ := s.store.Backend().(sessions.EventReader)
	_, shared := s.store.Backend().(sessions.LockerBackend)
	if reader == nil && !shared {
		return func() {}
	}
	return s.runEvery(s.cfg.PollInterval, func(ctx context.Context) {
		if reader != nil {
			s.pollEvents(ctx, reader)
		}
		if shared {
			if err := s.repairAbandoned(ctx); err != nil && ctx.Err() == nil {
				s.metrics.storeErrors.Inc()
				s.log.Error("repairing sessions left behind failed", "err", err)
			}
		}
	})
}

// pollEvents wakes the SSE clients of every streamed session whose log
// in the store is ahead of what they sent.
func (s *Server) pollEvents(ctx context.Context, reader sessions.EventReader) {
	ids := s.hub.streamed()
	if len(ids) == 0 {
		return
	}
	seqs, err := reader.LastSeqs(ctx, ids)
	if err != nil {
		if ctx.Err() == nil {
			s.metrics.storeErrors.Inc()
			s.log.Error("polling for new events failed", "err", err)
		}
		return
	}
	for id, seq := range seqs {
		s.hub.wake(id, seq)
	}
}
