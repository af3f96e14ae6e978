package errtrack

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"sync"
	"testing"

	"pgregory.net/rapid"
)

// The seed's own example (tracking-applier-errors.md, "Versioning within errorTracker").
func TestSeedExample(t *testing.T) {
	tr := New()
	a := Key{"a", "ns"}
	v1 := tr.Start(a) // partial sync 1: config 1
	v2 := tr.Start(a) // partial sync 2: config 2
	tr.Complete(a, v1, errors.New("config 1 failed"))
	tr.Complete(a, v2)
	if s := tr.Snapshot(); s.Len() != 0 {
		t.Fatalf("partial sync 3 reports %v: a stale error", s.Entries())
	}
	// And the reverse: an old error must not hide or replace a newer one.
	v3 := tr.Start(a)
	v4 := tr.Start(a)
	tr.Complete(a, v4, errors.New("config 4 failed"))
	tr.Complete(a, v3, errors.New("config 3 failed"))
	s := tr.Snapshot()
	if e, ok := s.Get(a); !ok || e.Err.Error() != "config 4 failed" {
		t.Fatalf("snapshot %v, want config 4's error", s.Entries())
	}
}

func TestMergesErrorsAndEvictsByVersion(t *testing.T) {
	tr := New()
	a := Key{"a", "ns"}
	v := tr.Start(a)
	tr.Complete(a, v, errors.New("one"), nil, errors.New("two"))
	s := tr.Snapshot()
	e, _ := s.Get(a)
	if e.Err == nil || e.Err.Error() != "one\ntwo" {
		t.Fatalf("merged error %q", e.Err)
	}
	// A newer apply starts before the report is accepted: its entry survives the eviction.
	v2 := tr.Start(a)
	tr.Reported(s)
	tr.Complete(a, v2, errors.New("three"))
	if e, ok := tr.Snapshot().Get(a); !ok || e.Err.Error() != "three" {
		t.Fatalf("newer error lost: %v", tr.Snapshot().Entries())
	}
	tr.Reported(tr.Snapshot())
	if tr.Snapshot().Len() != 0 {
		t.Fatal("reported error not evicted")
	}
	tr.Fail(a, errors.New("sync"))
	if e, ok := tr.Snapshot().Get(a); !ok || e.Err.Error() != "sync" {
		t.Fatal("synchronous error not tracked")
	}
	tr.Forget(a)
	if tr.Snapshot().Len() != 0 {
		t.Fatal("forgotten workspace reported")
	}
}

// model is what the tracker must report, per workspace: the latest apply's version and result, and
// whether that result has already been reported and accepted.
type model struct {
	latest   map[Key]Version
	result   map[Key]error // nil: running or succeeded
	done     map[Key]bool
	accepted map[Key]bool
}

type op struct {
	k   Key
	v   Version
	err error
}

// TestRandomInterleavings runs thousands of random interleavings of applies starting, applies
// completing (in any order, with or without errors), cycles snapshotting, and the server accepting
// or refusing reports, and checks against the model that a snapshot never reports a stale error and
// never loses a current one.
func TestRandomInterleavings(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		tr := New()
		keys := []Key{{"a", "ns"}, {"b", "ns"}, {"c", "other"}}
		m := model{latest: map[Key]Version{}, result: map[Key]error{}, done: map[Key]bool{}, accepted: map[Key]bool{}}
		var running []op
		var pending *Snapshot // taken at a cycle's start, not yet answered
		errSeq := 0

		check := func(s Snapshot) {
			for _, e := range s.Entries() {
				if e.Version != m.latest[e.Key] {
					rt.Fatalf("stale: %v reported at version %d, latest apply is %d", e.Key, e.Version, m.latest[e.Key])
				}
				if m.result[e.Key] == nil || !errors.Is(e.Err, m.result[e.Key]) {
					rt.Fatalf("%v reported %v, latest result is %v", e.Key, e.Err, m.result[e.Key])
				}
				if m.accepted[e.Key] {
					rt.Fatalf("%v reported again after the server accepted it", e.Key)
				}
			}
			for _, k := range keys {
				if m.done[k] && m.result[k] != nil && !m.accepted[k] {
					if _, ok := s.Get(k); !ok {
						rt.Fatalf("lost: %v's current error %v is not in the snapshot", k, m.result[k])
					}
				}
			}
		}

		steps := rapid.IntRange(1, 60).Draw(rt, "steps")
		for i := 0; i < steps; i++ {
			switch rapid.IntRange(0, 4).Draw(rt, "action") {
			case 0: // a cycle applies a workspace's config
				k := rapid.SampledFrom(keys).Draw(rt, "key")
				v := tr.Start(k)
				m.latest[k], m.result[k], m.done[k], m.accepted[k] = v, nil, false, false
				var err error
				if rapid.Bool().Draw(rt, "fails") {
					errSeq++
					err = fmt.Errorf("apply error %d", errSeq)
				}
				running = append(running, op{k, v, err})
			case 1: // some apply completes, in any order
				if len(running) == 0 {
					continue
				}
				i := rapid.IntRange(0, len(running)-1).Draw(rt, "which")
				o := running[i]
				running = append(running[:i], running[i+1:]...)
				tr.Complete(o.k, o.v, o.err)
				if m.latest[o.k] == o.v && !m.accepted[o.k] {
					m.result[o.k], m.done[o.k] = o.err, true
				}
			case 2: // a cycle starts: snapshot
				if pending != nil {
					continue // cycles never overlap
				}
				s := tr.Snapshot()
				check(s)
				pending = &s
			case 3: // the server answers the cycle
				if pending == nil {
					continue
				}
				if rapid.Bool().Draw(rt, "accepted") {
					tr.Reported(*pending)
					for _, e := range pending.Entries() {
						if m.latest[e.Key] == e.Version {
							m.accepted[e.Key] = true
						}
					}
				}
				pending = nil
			case 4: // a workspace is terminated and forgotten
				k := rapid.SampledFrom(keys).Draw(rt, "forget")
				tr.Forget(k)
				// Whatever is still running for it belongs to an apply that no longer counts:
				// version 0 matches none.
				m.latest[k], m.result[k], m.done[k], m.accepted[k] = 0, nil, false, false
			}
		}
		check(tr.Snapshot())
	})
}

// TestConcurrentUse exercises the tracker from many goroutines, for the race detector.
func TestConcurrentUse(t *testing.T) {
	tr := New()
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			k := Key{fmt.Sprint("w", g%3), "ns"}
			for i := 0; i < 200; i++ {
				v := tr.Start(k)
				go tr.Complete(k, v, errors.New("x"))
				s := tr.Snapshot()
				tr.Reported(s)
			}
		}()
	}
	wg.Wait()
}

// TestMain runs the property tests over thousands of interleavings unless -rapid.checks says
// otherwise.
func TestMain(m *testing.M) {
	flag.Parse()
	if f := flag.Lookup("rapid.checks"); f != nil && f.Value.String() == f.DefValue {
		_ = f.Value.Set("5000")
	}
	os.Exit(m.Run())
}
