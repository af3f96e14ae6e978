package server

import (
	"net/http"
	"strconv"
	"time"

	"github.com/hangar-dev/hangar/internal/protocol"
	"github.com/hangar-dev/hangar/internal/sdk"
	"github.com/hangar-dev/hangar/internal/workspace"
)

// Bounds of GET /api/v1/agent/wait's timeout_seconds.
const (
	defaultWaitSeconds = 30
	maxWaitSeconds     = 60
)

// wait serves GET /api/v1/agent/wait: it answers {"pending": true} as soon as a workspace of the
// agent has something a partial reconcile would pick up, or {"pending": false} after
// timeout_seconds (or when the server shuts down). "Pending" is read from the database
// (Store.HasPending), so the answer is right whichever replica the agent asks; notifications
// (Store.SubscribeAgent: in process on SQLite, Postgres LISTEN/NOTIFY across replicas) only say when
// to look again. It subscribes before it looks, so a change committed between the two is not missed,
// and looks again on every wake-up, so a spurious one (another agent's change, a listener's
// reconnect) does not end the wait.
func (s *Server) wait(w http.ResponseWriter, r *http.Request, agent workspace.Agent) error {
	s.agentSeen(r.Context(), agent)
	secs := defaultWaitSeconds
	if v := r.URL.Query().Get("timeout_seconds"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > maxWaitSeconds {
			return errBadRequest("invalid request", sdk.Validation{Field: "timeout_seconds",
				Detail: "must be a whole number of seconds from 1 to " + strconv.Itoa(maxWaitSeconds) + ", got " + strconv.Quote(v)})
		}
		secs = n
	}
	release, err := s.openStream(w, r, "agent:"+agent.ID, time.Duration(secs)*time.Second+streamSlack)
	if err != nil {
		return err
	}
	defer release()
	ctx := r.Context()
	changes, unsubscribe := s.store.SubscribeAgent(agent.ID)
	defer unsubscribe()
	// A revocation anywhere makes the agent's token be read again at once: a wait whose token was
	// revoked or rotated meanwhile ends with the 401 a new request would get.
	revoked, unsubscribeRevocations := s.store.SubscribeRevocations()
	defer unsubscribeRevocations()
	shutdown := s.shutdownOf(r)
	var timeout <-chan time.Time // set once the wait blocks
	unblock := func() {
		if timeout != nil {
			s.metrics.waiters.Dec()
		}
	}
	// end counts the wait and answers it (answer nil: nobody is listening). Metrics are updated
	// before the answer is written, so that whoever reads the answer sees them.
	end := func(result string, answer *protocol.WaitResponse) error {
		unblock()
		s.metrics.waits.WithLabelValues(result).Inc()
		if answer != nil {
			writeJSON(w, http.StatusOK, answer)
		}
		return nil
	}
	for {
		pending, err := s.store.HasPending(ctx, agent.ID)
		if err != nil {
			if ctx.Err() != nil {
				return end("canceled", nil) // the agent went away
			}
			unblock()
			return err
		}
		if pending {
			return end("pending", &protocol.WaitResponse{Pending: true})
		}
		if timeout == nil {
			// Nothing pending at first look: from here the wait blocks. The timer starts now, so the
			// wait lasts timeout_seconds plus one query.
			timeout = s.after(time.Duration(secs) * time.Second)
			s.metrics.waiters.Inc()
		}
	block:
		for {
			select {
			case <-changes:
				s.log.Debug("agent wait woken; looking again", "agent", agent.Name)
				break block
			case <-revoked:
				// Only the token is read again (one indexed read per blocked wait and revocation):
				// nothing pending changed.
				if err := s.agentStillAuthorized(ctx, r, agent); err != nil {
					s.log.Info("agent wait ended: its token may no longer be used", "agent", agent.Name)
					_ = end("revoked", nil)
					return err
				}
			case <-timeout:
				return end("timeout", &protocol.WaitResponse{Pending: false})
			case <-shutdown:
				// A graceful shutdown waits for requests to end but does not cancel them: answer now,
				// and the agent waits again on another replica (or falls back to its interval).
				return end("canceled", &protocol.WaitResponse{Pending: false})
			case <-ctx.Done():
				return end("canceled", nil)
			}
		}
	}
}

// shutdownOf returns a channel closed when the http.Server serving r starts shutting down
// (http.Server.RegisterOnShutdown, registered once per http.Server on its first wait), or nil when r
// was not served by an http.Server. So long-polls never hold up a graceful shutdown, whoever runs
// the http.Server.
func (s *Server) shutdownOf(r *http.Request) <-chan struct{} {
	hs, _ := r.Context().Value(http.ServerContextKey).(*http.Server)
	if hs == nil {
		return nil
	}
	s.shutdownMu.Lock()
	defer s.shutdownMu.Unlock()
	ch, ok := s.shutdowns[hs]
	if !ok {
		ch = make(chan struct{})
		s.shutdowns[hs] = ch
		hs.RegisterOnShutdown(func() { close(ch) })
	}
	return ch
}
