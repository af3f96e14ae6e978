package proxy

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/hangar-dev/hangar/internal/apiclient"
	"github.com/hangar-dev/hangar/internal/backoff"
	"github.com/hangar-dev/hangar/internal/protocol"
)

// revocationPollSeconds is how long one long-poll of the revocation counter waits on the server.
const revocationPollSeconds = 30

// Revocations asks the server (ProxyRevocationsPath) whether access was taken away somewhere,
// given the previous answer's seq (-1: none yet).
func (c *ServerClient) Revocations(ctx context.Context, after int64, timeoutSeconds int) (protocol.ProxyRevocationsResponse, error) {
	var out protocol.ProxyRevocationsResponse
	path := protocol.ProxyRevocationsPath + "?after=" + strconv.FormatInt(after, 10) + "&timeout_seconds=" + strconv.Itoa(timeoutSeconds)
	err := c.do(ctx, http.MethodGet, path, nil, &out)
	return out, err
}

// RevocationWatcher long-polls the server's revocation counter and calls OnRevoke whenever it moves:
// the proxy then rechecks its open SSH connections and drops its cached decisions at once
// (docs/decisions.md, "Revocation takes effect at once"). The first answer calls OnRevoke too: a
// connection opened before the watch began may have lost its access meanwhile. That first answer
// is the counter's starting point, not news of a revocation, and is logged as such (at Debug).
// After a failure, the next answer that moved calls OnRevoke (revocations meanwhile are not lost).
// A server without the endpoint (404) is asked again every Max of the backoff, and the proxy
// relies on its recheck interval meanwhile.
type RevocationWatcher struct {
	Client   *ServerClient
	OnRevoke func()
	Logger   *slog.Logger
	// Backoff spaces retries after failures (default 500 ms doubling to 30 s, with jitter); After
	// makes its timers (default time.After).
	Backoff backoff.Policy
	After   func(time.Duration) <-chan time.Time
	// PollSeconds is each long-poll's timeout on the server (default 30).
	PollSeconds int
}

// Run watches until ctx ends.
func (w *RevocationWatcher) Run(ctx context.Context) {
	if w.Backoff.Base == 0 {
		w.Backoff = backoff.Policy{Base: 500 * time.Millisecond, Max: 30 * time.Second}
	}
	if w.After == nil {
		w.After = time.After
	}
	if w.PollSeconds <= 0 {
		w.PollSeconds = revocationPollSeconds
	}
	log := w.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	last := int64(-1)
	failures := 0
	for ctx.Err() == nil {
		resp, err := w.Client.Revocations(ctx, last, w.PollSeconds)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			var se *apiclient.StatusError
			if errors.As(err, &se) && se.Code == http.StatusNotFound {
				failures = 100 // an older server: ask rarely
			}
			d := w.Backoff.Delay(failures)
			failures++
			log.Warn("cannot watch the server's revocations; open SSH connections are rechecked on their interval meanwhile", "err", err, "retry_in", d)
			select {
			case <-ctx.Done():
				return
			case <-w.After(d):
			}
			continue
		}
		failures = 0
		switch {
		case last < 0:
			log.Debug("watching the server's revocations", "seq", resp.Seq)
			w.OnRevoke()
		case resp.Seq > last:
			log.Info("access was revoked on the server; rechecking open connections", "seq", resp.Seq)
			w.OnRevoke()
		}
		last = resp.Seq
	}
}
