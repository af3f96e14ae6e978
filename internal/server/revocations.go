package server

import (
	"net/http"
	"strconv"
	"time"

	"github.com/hangar-dev/hangar/internal/protocol"
	"github.com/hangar-dev/hangar/internal/sdk"
	"github.com/hangar-dev/hangar/internal/workspace"
)

// proxyRevocations serves GET /api/v1/proxy/revocations?after=N&timeout_seconds=T (agent token):
// the revocation counter (Store.RevocationSeq) as soon as it is past N, or when T seconds pass. Like
// the agent's wait, it subscribes before it looks, looks again on every wake-up, and answers at
// once when the server shuts down; the counter is read from the database, so the answer is right
// whichever replica the proxy asks.
func (s *Server) proxyRevocations(w http.ResponseWriter, r *http.Request, _ workspace.Agent) error {
	q := r.URL.Query()
	secs := defaultWaitSeconds
	if v := q.Get("timeout_seconds"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > maxWaitSeconds {
			return errBadRequest("invalid request", sdk.Validation{Field: "timeout_seconds",
				Detail: "must be a whole number of seconds from 1 to " + strconv.Itoa(maxWaitSeconds) + ", got " + strconv.Quote(v)})
		}
		secs = n
	}
	after := int64(-1)
	if v := q.Get("after"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < -1 {
			return errBadRequest("invalid request", sdk.Validation{Field: "after", Detail: "must be -1 or the seq of the previous answer, got " + strconv.Quote(v)})
		}
		after = n
	}
	ctx := r.Context()
	changes, unsubscribe := s.store.SubscribeRevocations()
	defer unsubscribe()
	shutdown := s.shutdownOf(r)
	var timeout <-chan time.Time
	for {
		seq, err := s.store.RevocationSeq(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		if seq > after {
			writeJSON(w, http.StatusOK, protocol.ProxyRevocationsResponse{Seq: seq})
			return nil
		}
		if timeout == nil {
			timeout = s.after(time.Duration(secs) * time.Second)
		}
		select {
		case <-changes:
		case <-timeout:
			writeJSON(w, http.StatusOK, protocol.ProxyRevocationsResponse{Seq: seq})
			return nil
		case <-shutdown:
			writeJSON(w, http.StatusOK, protocol.ProxyRevocationsResponse{Seq: seq})
			return nil
		case <-ctx.Done():
			return nil
		}
	}
}
