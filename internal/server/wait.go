package server

import (
	"net/http"
	"strconv"
	"time"

	"github.com/hangar-dev/hangar/internal/protocol"
	"github.com/hangar-dev/hangar/internal/sdk"
	"github.com/hangar-dev/hangar/internal/store"
)

// Bounds of GET /api/v1/agent/wait's timeout_seconds.
const (
	defaultWaitSeconds = 30
	maxWaitSeconds     = 60
)

// wait serves GET /api/v1/agent/wait: it answers {"pending": true} as soon as a workspace of the
// agent has something a partial reconcile would pick up, or {"pending": false} after
// timeout_seconds. "Pending" is read from the database (Store.HasPending), so the answer is right
// whichever replica the agent asks; notifications (Store.SubscribeAgent: in process, and Postgres
// LISTEN/NOTIFY across replicas) only say when to look again. It subscribes before it looks, so a
// change between the two is not missed.
func (s *Server) wait(w http.ResponseWriter, r *http.Request, agent store.Agent) error {
	secs := defaultWaitSeconds
	if v := r.URL.Query().Get("timeout_seconds"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > maxWaitSeconds {
			return errBadRequest("invalid request", sdk.Validation{Field: "timeout_seconds", Detail: "must be a whole number of seconds from 1 to 60, got " + strconv.Quote(v)})
		}
		secs = n
	}
	changes, unsubscribe := s.store.SubscribeAgent(agent.ID)
	defer unsubscribe()
	s.metrics.waiters.Inc()
	defer s.metrics.waiters.Dec()
	timeout := s.after(time.Duration(secs) * time.Second)
	for {
		pending, err := s.store.HasPending(r.Context(), agent.ID)
		if err != nil {
			return err
		}
		if pending {
			s.metrics.waits.WithLabelValues("pending").Inc()
			writeJSON(w, http.StatusOK, protocol.WaitResponse{Pending: true})
			return nil
		}
		select {
		case <-changes:
		case <-timeout:
			s.metrics.waits.WithLabelValues("timeout").Inc()
			writeJSON(w, http.StatusOK, protocol.WaitResponse{Pending: false})
			return nil
		case <-r.Context().Done():
			s.metrics.waits.WithLabelValues("canceled").Inc()
			return nil
		}
	}
}
