package audit

import (
	"context"
	"errors"
	"testing"
	"time"
)

type fakePruner struct {
	left  int
	calls int
}

func (f *fakePruner) PruneAudit(_ context.Context, _ time.Time, limit int) (int, error) {
	f.calls++
	n := min(limit, f.left)
	f.left -= n
	return n, nil
}

// TestRetentionBoundsAPass: a pass deletes at most PruneBatches batches; the rest goes at the next.
func TestRetentionBoundsAPass(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	p := &fakePruner{left: PruneBatch*PruneBatches + 10}
	r := Retention{Store: p, Now: func() time.Time { return now }, Keep: time.Hour}
	if n, err := r.Prune(context.Background()); err != nil || n != PruneBatch*PruneBatches || p.calls != PruneBatches {
		t.Fatalf("first pass: %d, %v after %d calls", n, err, p.calls)
	}
	if n, err := r.Prune(context.Background()); err != nil || n != 10 {
		t.Fatalf("second pass: %d, %v", n, err)
	}
	off := &fakePruner{left: 5}
	if n, _ := (Retention{Store: off, Now: r.Now}).Prune(context.Background()); n != 0 || off.calls != 0 {
		t.Fatalf("Keep 0 pruned %d in %d calls", n, off.calls)
	}
}

// TestPendingOnce: an entry is written once: by the transaction, or by End; a discarded one never
// unless the action failed; a nil Recorder and a nil Pending do nothing.
func TestPendingOnce(t *testing.T) {
	var got []Entry
	r := &Recorder{W: writerFunc(func(e Entry) { got = append(got, e) }), Now: time.Now}
	ctx, p := r.Begin(context.Background(), Actor{Name: "a"}, SignIn, Target{})
	if From(ctx) != p {
		t.Fatal("the context does not carry the pending entry")
	}
	if _, ok := p.Take(); !ok {
		t.Fatal("Take of a fresh entry")
	}
	p.Written()
	r.End(ctx, p, nil)
	if len(got) != 0 {
		t.Fatalf("End wrote an entry the transaction wrote: %+v", got)
	}
	_, p = r.Begin(context.Background(), Actor{}, SignIn, Target{})
	p.Discard()
	r.End(ctx, p, nil)
	_, p2 := r.Begin(context.Background(), Actor{}, SignIn, Target{})
	p2.Discard()
	r.End(ctx, p2, errors.New("refused"))
	if len(got) != 1 || got[0].Outcome != Failure || got[0].Error != "refused" {
		t.Fatalf("entries %+v, want the failure only", got)
	}
	var nilRec *Recorder
	c2, np := nilRec.Begin(context.Background(), Actor{}, SignIn, Target{})
	np.Set("k", 1)
	np.SetTarget(Target{})
	nilRec.End(c2, np, errors.New("x"))
	if From(c2) != nil {
		t.Fatal("a nil recorder put an entry in the context")
	}
}

type writerFunc func(Entry)

func (f writerFunc) InsertAudit(_ context.Context, e Entry) error { f(e); return nil }
