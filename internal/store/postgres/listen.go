package postgres

import (
	"context"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/hangar-dev/hangar/internal/backoff"
)

// reconnect is the backoff between attempts to listen again.
var reconnect = backoff.Policy{Base: 100 * time.Millisecond, Max: 10 * time.Second}

// Channel is the Postgres notification channel of changes; the payload is the topic: the id of an
// agent whose workspace may have become pending, or a job topic (sqlstore.TopicJobs, "job:<id>").
const Channel = "hangar_agent_changes"

// ListenerApplicationName is the application_name of each store's LISTEN connection, so that it can
// be told apart in pg_stat_activity.
const ListenerApplicationName = "hangar-change-listener"

// listen receives the change notifications of every replica on a dedicated connection and passes
// them to publish, until ctx ends. It closes ready once it first listens. When the connection drops
// it reconnects with backoff, and once listening again wakes everyone (publish("")), since
// notifications sent meanwhile are lost.
func listen(ctx context.Context, cfg *pgx.ConnConfig, publish func(topic string), ready chan<- struct{}, log *slog.Logger) {
	failures := 0
	first := true
	for ctx.Err() == nil {
		err := func() error {
			conn, err := pgx.ConnectConfig(ctx, cfg)
			if err != nil {
				return err
			}
			defer conn.Close(context.Background())
			if _, err := conn.Exec(ctx, "LISTEN "+Channel); err != nil {
				return err
			}
			if first {
				first = false
				close(ready)
			} else {
				log.Info("listening for changes again; waking every waiter once", "after_failures", failures)
				publish("")
			}
			failures = 0
			for {
				n, err := conn.WaitForNotification(ctx)
				if err != nil {
					return err
				}
				publish(n.Payload)
			}
		}()
		if ctx.Err() != nil {
			return
		}
		failures++
		wait := reconnect.Delay(failures)
		log.Warn("lost the connection that listens for other replicas' changes; reconnecting (agents' waits fall back to their timeout meanwhile)",
			"err", err, "retry_in", wait)
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}
