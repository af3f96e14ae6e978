package postgres

import (
	"context"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
)

// Channel is the Postgres notification channel of workspace changes; the payload is the agent id.
const Channel = "hangar_agent_changes"

// listen receives the change notifications of every replica on a dedicated connection and passes
// them to publish, until ctx ends. It reconnects with backoff when the connection drops, and after
// a reconnect wakes everyone once (publish("")), since notifications may have been missed.
func listen(ctx context.Context, url string, publish func(agentID string), ready chan<- struct{}) {
	failures := 0
	first := true
	for ctx.Err() == nil {
		err := func() error {
			conn, err := pgx.Connect(ctx, url)
			if err != nil {
				return err
			}
			defer conn.Close(context.Background())
			if _, err := conn.Exec(ctx, "LISTEN "+Channel); err != nil {
				return err
			}
			failures = 0
			if first {
				first = false
				close(ready)
			} else {
				publish("")
			}
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
		wait := min(100*time.Millisecond<<min(failures, 8), 10*time.Second)
		slog.Warn("postgres change listener disconnected; reconnecting", "err", err, "retry_in", wait)
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
	}
}
