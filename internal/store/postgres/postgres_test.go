package postgres_test

import (
	"context"
	"testing"
	"time"

	"github.com/hangar-dev/hangar/internal/store"
	"github.com/hangar-dev/hangar/internal/store/postgres"
	"github.com/hangar-dev/hangar/internal/store/storetest"
	"github.com/hangar-dev/hangar/internal/testutil/pgtest"
)

func TestStore(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store {
		s, err := postgres.Open(context.Background(), pgtest.NewDatabase(t))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	})
}

// TestReplicaNotifications: a change through one store (replica) wakes a subscriber of another
// store on the same database, through LISTEN/NOTIFY.
func TestReplicaNotifications(t *testing.T) {
	url := pgtest.NewDatabase(t)
	ctx := context.Background()
	a, err := postgres.Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := postgres.Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	f := storetest.NewFixture(t, a, "r")
	ch, cancel := b.SubscribeAgent(f.Agent.ID)
	defer cancel()
	f.Create(t, a, f.Workspace("w"))
	select {
	case <-ch:
	case <-time.After(10 * time.Second):
		t.Fatal("a creation through replica a did not wake replica b's subscriber")
	}
}
