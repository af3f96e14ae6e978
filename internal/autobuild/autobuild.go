// Package autobuild is the lifecycle executor: at each tick it reads every workspace with its
// template's or agent's policy, asks package lifecycle what is due, and applies it through the
// workspace's backend (package backend) as the automation's system user, with the reason. Each
// change is decided again on the row locked inside its own transaction, so that with several
// replicas ticking at once a change is made once; a tick takes the most overdue changes first and
// at most MaxPerTick of them, so that catching up after downtime is no storm.
package autobuild

import (
	"cmp"
	"context"
	"errors"
	"log/slog"
	"slices"
	"time"

	"github.com/hangar-dev/hangar/internal/audit"
	"github.com/hangar-dev/hangar/internal/backend"
	"github.com/hangar-dev/hangar/internal/clock"
	"github.com/hangar-dev/hangar/internal/lifecycle"
	"github.com/hangar-dev/hangar/internal/store"
	"github.com/hangar-dev/hangar/internal/workspace"
)

// DefaultMaxPerTick bounds the changes one tick makes.
const DefaultMaxPerTick = 100

// Executor is the lifecycle executor.
type Executor struct {
	Store    store.Store
	Backends backend.Router
	Clock    clock.Clock
	Log      *slog.Logger
	// MaxPerTick bounds the changes of one tick (default DefaultMaxPerTick); the rest are due at
	// the next.
	MaxPerTick int
	// Observe, when set, is called with each change made (metrics).
	Observe func(lifecycle.Action)
	// Audit records each change made, or that failed, as the automation's (nil: none). A change
	// found not due any more on the locked row is no action and is not recorded.
	Audit *audit.Recorder
}

// Automation is the user the executor acts as.
var Automation = workspace.User{ID: store.AutomationUserID, Username: store.AutomationUsername, Admin: true}

// automationActor is Automation in the audit log.
var automationActor = audit.Actor{ID: store.AutomationUserID, Name: store.AutomationUsername}

// Result counts what a tick did.
type Result struct {
	Due      int // changes due at the tick
	Done     int // changes made
	Deferred int // due, beyond MaxPerTick: left for the next tick
	Skipped  int // due when read, but not any more on the locked row (another replica, a user)
	Failed   int // refused or failed; logged
}

// Policies are the lifecycle policies by agent ID and by template ID.
type Policies struct {
	Agents    map[string]workspace.Lifecycle
	Templates map[string]workspace.Lifecycle
}

// ReadPolicies reads every agent's and template's policy.
func ReadPolicies(ctx context.Context, st store.Store) (Policies, error) {
	p := Policies{Agents: map[string]workspace.Lifecycle{}, Templates: map[string]workspace.Lifecycle{}}
	agents, err := st.ListAgents(ctx)
	if err != nil {
		return p, err
	}
	for _, a := range agents {
		p.Agents[a.ID] = a.Config.WithDefaults().Policy()
	}
	templates, err := st.ListTemplates(ctx)
	if err != nil {
		return p, err
	}
	for _, t := range templates {
		p.Templates[t.ID] = t.Lifecycle
	}
	return p, nil
}

// PolicyOf reads the policy of w alone: its agent's or its template's.
func PolicyOf(ctx context.Context, st store.Store, w workspace.Workspace) (workspace.Lifecycle, error) {
	if w.Backend == workspace.KindTerraform {
		t, err := st.TemplateByName(ctx, w.TemplateName)
		return t.Lifecycle, err
	}
	a, err := st.AgentByName(ctx, w.AgentName)
	return a.Config.WithDefaults().Policy(), err
}

// Of is the policy of w.
func (p Policies) Of(w workspace.Workspace) workspace.Lifecycle {
	if w.Backend == workspace.KindTerraform {
		return p.Templates[w.TemplateID]
	}
	return p.Agents[w.AgentID]
}

// Snapshot is what lifecycle.Decide reads of w under policy p.
func Snapshot(w workspace.Workspace, p workspace.Lifecycle, busy bool) lifecycle.Snapshot {
	use, last := w.CreatedAt, w.LastActivityAt
	if p.Activity == workspace.ActivityWork {
		// Work inside, not connections: an open shell that does nothing is no use.
		last = w.LastWorkAt
	}
	if last != nil && last.After(use) {
		use = *last
	}
	return lifecycle.Snapshot{Desired: w.DesiredState, Actual: w.ActualState, DesiredAt: w.DesiredStateUpdatedAt,
		ActualAt: w.ActualStateUpdatedAt, LastUse: use, NoWork: p.Activity == workspace.ActivityWork && w.LastWorkAt == nil,
		DormantAt: w.DormantAt, Schedule: w.Schedule, Policy: p, Busy: busy}
}

type due struct {
	w workspace.Workspace
	a lifecycle.Action
}

// Tick makes the changes due now.
func (e *Executor) Tick(ctx context.Context) (Result, error) {
	var res Result
	now := e.Clock.Now()
	pol, err := ReadPolicies(ctx, e.Store)
	if err != nil {
		return res, err
	}
	rows, err := e.Store.ListWorkspaces(ctx, store.ListFilter{})
	if err != nil {
		return res, err
	}
	// A suspended user's workspaces are not started for them (docs/decisions.md, "Suspending and
	// deleting users"); stops and deletions still apply.
	users, err := e.Store.ListUsers(ctx)
	if err != nil {
		return res, err
	}
	suspended := map[string]bool{}
	for _, u := range users {
		if u.SuspendedAt != nil {
			suspended[u.ID] = true
		}
	}
	var todo []due
	for _, w := range rows {
		// Busy is false here: a build in progress is seen on the locked row, where it counts.
		if a := lifecycle.Decide(now, Snapshot(w, pol.Of(w), false)); !a.None() && !(a.To == workspace.Running && suspended[w.OwnerID]) {
			todo = append(todo, due{w, a})
		}
	}
	res.Due = len(todo)
	slices.SortFunc(todo, func(a, b due) int { return cmp.Or(a.a.Due.Compare(b.a.Due), cmp.Compare(a.w.ID, b.w.ID)) })
	limit := cmp.Or(e.MaxPerTick, DefaultMaxPerTick)
	if len(todo) > limit {
		res.Deferred = len(todo) - limit
		todo = todo[:limit]
	}
	for _, d := range todo {
		if ctx.Err() != nil {
			return res, ctx.Err()
		}
		made, err := e.apply(ctx, now, pol.Of(d.w), d)
		switch {
		case err != nil:
			res.Failed++
			e.Log.Warn("lifecycle change failed", "workspace", d.w.Name, "owner", d.w.OwnerName, "reason", d.a.Reason, "err", err)
		case made.None():
			res.Skipped++
		default:
			res.Done++
			e.Log.Info("lifecycle change", "workspace", d.w.Name, "owner", d.w.OwnerName, "to", made.To, "dormant", made.MarkDormant,
				"reason", made.Text())
			if e.Observe != nil {
				e.Observe(made)
			}
		}
	}
	return res, nil
}

// apply makes d's change, deciding again on the locked row; it returns the action made (none when
// the row no longer calls for it).
func (e *Executor) apply(ctx context.Context, now time.Time, p workspace.Lifecycle, d due) (made lifecycle.Action, err error) {
	ref := store.WorkspaceRef{ID: d.w.ID}
	action := audit.WorkspaceTransition
	if d.a.To == "" {
		action = audit.WorkspaceDormant
	}
	ctx, entry := e.Audit.Begin(ctx, automationActor, action, audit.Workspace(d.w.ID, d.w.OwnerName, d.w.Name))
	entry.Set("reason", d.a.Text())
	defer func() { e.Audit.End(ctx, entry, err) }()
	if d.a.To == "" {
		// Marking dormant alone changes no desired state: one row update, decided again under its lock.
		_, err := e.Store.UpdateWorkspace(ctx, ref, func(w workspace.Workspace) (workspace.Workspace, error) {
			a := lifecycle.Decide(now, Snapshot(w, p, false))
			if a.To != "" || !a.MarkDormant || w.DormantAt != nil {
				entry.Discard()
				return w, nil
			}
			made = a
			w.DormantAt = &now
			return w, nil
		})
		return made, err
	}
	svc, err := e.Backends.For(d.w.Backend)
	if err != nil {
		return made, err
	}
	_, err = svc.SetDesired(ctx, Automation, ref, func(w workspace.Workspace, busy bool) (backend.Change, error) {
		a := lifecycle.Decide(now, Snapshot(w, p, busy))
		if a.To != d.a.To {
			entry.Discard()
			return backend.Change{}, nil
		}
		made = a
		return backend.Change{To: a.To, Reason: a.Text(), BuildReason: a.Reason, Dormant: a.MarkDormant}, nil
	})
	if err != nil {
		made = lifecycle.Action{}
	}
	return made, err
}

// Run ticks at once and then every interval until ctx ends. after makes the waits (time.After).
func (e *Executor) Run(ctx context.Context, interval time.Duration, after func(time.Duration) <-chan time.Time) {
	for {
		res, err := e.Tick(ctx)
		if err != nil && !errors.Is(err, context.Canceled) {
			e.Log.Warn("lifecycle tick failed", "err", err)
		} else if res.Due > 0 {
			e.Log.Info("lifecycle tick", "due", res.Due, "done", res.Done, "deferred", res.Deferred, "skipped", res.Skipped, "failed", res.Failed)
		}
		select {
		case <-ctx.Done():
			return
		case <-after(interval):
		}
	}
}
