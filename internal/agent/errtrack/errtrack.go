// Package errtrack is the agent's versioned error tracker, exactly as
// ../shared/seeds/tracking-applier-errors.md designs it: every apply of a workspace's configuration
// gets a new version; an asynchronous result is recorded only if no newer apply has started since;
// each reconcile cycle reports from a snapshot taken at its start; after the server accepted a
// report, an entry is evicted only if its version is still the one the snapshot saw.
//
// A Tracker belongs to one reconciler: a full sync drops it with the rest of the reconciler's state.
package errtrack

import (
	"errors"
	"sync"
)

// Key names a workspace.
type Key struct {
	Name      string
	Namespace string
}

// Version orders the applies of one tracker. Versions are handed out by Start, monotonically.
type Version uint64

type state struct {
	version Version
	err     error // the error of the apply with this version, nil while running or if it succeeded
}

// Tracker tracks the latest apply per workspace. It is safe for concurrent use: applies complete
// on their own goroutines while the reconcile loop snapshots and evicts.
type Tracker struct {
	mu    sync.Mutex
	next  Version
	store map[Key]state
}

// New returns an empty tracker.
func New() *Tracker { return &Tracker{store: map[Key]state{}} }

// Start records that an apply of k begins and returns its version. Any result of an older apply of
// k is from now on ignored, and any error it recorded is dropped: it belongs to an earlier action.
func (t *Tracker) Start(k Key) Version {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.next++
	v := t.next
	t.store[k] = state{version: v}
	return v
}

// Complete records the result of the apply of k with version v. errs are all the errors the apply
// produced (nil ones are ignored); they are merged into one. A result for a version that is no
// longer the latest is ignored. A success removes the entry (if still the latest), so that nothing
// is reported.
func (t *Tracker) Complete(k Key, v Version, errs ...error) {
	err := errors.Join(errs...)
	t.mu.Lock()
	defer t.mu.Unlock()
	cur, ok := t.store[k]
	if !ok || cur.version != v {
		return // a newer apply started (or the entry was evicted after its report)
	}
	if err == nil {
		delete(t.store, k)
		return
	}
	t.store[k] = state{version: v, err: err}
}

// Fail records a synchronous error of an apply that Start has not been called for: it starts and
// completes one version at once.
func (t *Tracker) Fail(k Key, err error) Version {
	v := t.Start(k)
	t.Complete(k, v, err)
	return v
}

// Forget drops k whatever its version (the workspace is gone).
func (t *Tracker) Forget(k Key) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.store, k)
}

// Entry is one reported error of a snapshot.
type Entry struct {
	Key     Key
	Version Version
	Err     error
}

// Snapshot is the errors known at the start of a cycle.
type Snapshot struct {
	entries map[Key]Entry
}

// Snapshot returns the errors recorded so far: the entries whose latest apply has completed with an
// error. Running applies and successes are not in it.
func (t *Tracker) Snapshot() Snapshot {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := Snapshot{entries: make(map[Key]Entry, len(t.store))}
	for k, st := range t.store {
		if st.err != nil {
			s.entries[k] = Entry{Key: k, Version: st.version, Err: st.err}
		}
	}
	return s
}

// Get returns the error of k in the snapshot.
func (s Snapshot) Get(k Key) (Entry, bool) {
	e, ok := s.entries[k]
	return e, ok
}

// Entries returns every entry of the snapshot, in no particular order.
func (s Snapshot) Entries() []Entry {
	out := make([]Entry, 0, len(s.entries))
	for _, e := range s.entries {
		out = append(out, e)
	}
	return out
}

// Len is the number of errors in the snapshot.
func (s Snapshot) Len() int { return len(s.entries) }

// Reported evicts what a snapshot reported, after the server accepted the report: each entry is
// removed only if its version is still the latest, so that an error of a newer apply survives.
func (t *Tracker) Reported(s Snapshot) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for k, e := range s.entries {
		if cur, ok := t.store[k]; ok && cur.version == e.Version {
			delete(t.store, k)
		}
	}
}
