// Package prebuilds is the prebuild reconciler: at each tick it reads each preset's pool of
// prebuilt workspaces (a snapshot of the store), asks package prebuild what to create and delete,
// and applies the answer through the Terraform backend (package backend/tfbackend) as the system user
// hangar-prebuilds. Several replicas may tick at once: a preset is reconciled by the replica that
// holds its lease (store.LeasePreset) for the whole read-decide-apply, so two replicas never act on
// the same snapshot; each delete is decided again on the locked row (a claim may have taken the
// instance meanwhile). A tick does at most MaxPerTick creates and deletes.
package prebuilds

import (
	"cmp"
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/hangar-dev/hangar/internal/audit"
	"github.com/hangar-dev/hangar/internal/backend/tfbackend"
	"github.com/hangar-dev/hangar/internal/build"
	"github.com/hangar-dev/hangar/internal/clock"
	"github.com/hangar-dev/hangar/internal/prebuild"
	"github.com/hangar-dev/hangar/internal/store"
)

// Defaults.
const (
	// DefaultMaxPerTick bounds the creates and deletes of one tick.
	DefaultMaxPerTick = 50
	// DefaultLease is how long a replica holds a preset while it reconciles it: a replica that
	// dies meanwhile delays that preset's next reconcile by at most this.
	DefaultLease = 5 * time.Minute
	// maxFailures bounds the failures the backoff reads: enough to reach MaxBackoff.
	maxFailures = 16
)

// Reconciler keeps every preset's pool.
type Reconciler struct {
	Store   store.Store
	Builder *tfbackend.Service
	Clock   clock.Clock
	Log     *slog.Logger
	// Replica names this process in the presets' leases.
	Replica string
	// Options tune the backoff (default prebuild.DefaultOptions).
	Options *prebuild.Options
	// MaxPerTick bounds the creates and deletes of a tick (DefaultMaxPerTick).
	MaxPerTick int
	// Lease is how long a preset is held while reconciled (DefaultLease).
	Lease time.Duration
	// Created, when set, is called for each prebuilt workspace created (metrics).
	Created func(p store.Preset)
	// Audit records each create and delete, or its failure, as the hangar-prebuilds user's
	// (nil: none).
	Audit *audit.Recorder
}

// begin starts the audit entry of an action on a prebuilt workspace of p.
func (r *Reconciler) begin(ctx context.Context, action audit.Action, p store.Preset, target audit.Target) (context.Context, *audit.Pending) {
	if r.Audit == nil {
		return ctx, nil
	}
	ctx, e := r.Audit.Begin(ctx, audit.Actor{ID: store.PrebuildsUserID, Name: store.PrebuildsUsername}, action, target)
	e.Set("preset", p.TemplateName+"/"+p.Name)
	return ctx, e
}

// Result counts what a tick did.
type Result struct {
	Presets  int // presets reconciled by this replica
	Leased   int // presets another replica held: left to it
	Created  int // prebuilt workspaces created
	Deleted  int // delete builds queued (orphan deletes included)
	Orphaned int // of those, pending creates canceled and orphan-deleted
	Purged   int // deleted presets removed, their instances gone
	Deferred int // creates or deletes beyond MaxPerTick: left for the next tick
	Failed   int // creates or deletes that failed; logged
}

// StatusOf is where an unclaimed prebuilt workspace stands, from its latest build b: its create
// pending, running, succeeded (ready) or failed; a delete queued, running or failed, or a stop,
// take it out of the pool (Deleting).
func StatusOf(b *build.Build, now time.Time) prebuild.Status {
	if b == nil {
		return prebuild.Failed
	}
	st := b.Job.Status()
	if b.Transition != build.Start {
		// A delete that failed is tried again once RetryDelete has passed since (Failed: Decide
		// deletes it): its resources may still run, and the pool's count is wrong until it goes.
		if b.Transition == build.Delete && st == build.Failed && b.Job.CompletedAt != nil && !now.Before(b.Job.CompletedAt.Add(RetryDelete)) {
			return prebuild.Failed
		}
		return prebuild.Deleting
	}
	switch st {
	case build.Pending:
		return prebuild.Pending
	case build.Running, build.Canceling:
		return prebuild.Building
	case build.Succeeded:
		return prebuild.Ready
	}
	return prebuild.Failed
}

// RetryDelete is how long after a prebuilt workspace's delete failed it is tried again: a destroy
// that fails every minute would only pile up builds, one that is never tried again leaves
// resources running until an admin notices.
const RetryDelete = time.Hour

// VersionOf is the template version the preset's pool runs: its own, or its template's active one.
func VersionOf(p store.Preset, t store.Template) string {
	return cmp.Or(p.VersionID, t.ActiveVersionID)
}

// Instances are the preset's instances as prebuild.Decide reads them.
func Instances(in []store.PrebuildInstance, now time.Time) []prebuild.Instance {
	out := make([]prebuild.Instance, 0, len(in))
	for _, i := range in {
		pi := prebuild.Instance{WorkspaceID: i.Workspace.ID, Name: i.Workspace.Name, Status: StatusOf(i.Build, now), CreatedAt: i.Workspace.CreatedAt}
		if i.Build != nil {
			pi.VersionID = i.Build.TemplateVersionID
		}
		out = append(out, pi)
	}
	return out
}

// Tick reconciles every preset once.
func (r *Reconciler) Tick(ctx context.Context) (Result, error) {
	var res Result
	presets, err := r.Store.ListPresets(ctx, "", true)
	if err != nil {
		return res, err
	}
	templates, err := r.Store.ListTemplates(ctx)
	if err != nil {
		return res, err
	}
	byID := make(map[string]store.Template, len(templates))
	for _, t := range templates {
		byID[t.ID] = t
	}
	budget := cmp.Or(r.MaxPerTick, DefaultMaxPerTick)
	for _, p := range presets {
		if ctx.Err() != nil {
			return res, ctx.Err()
		}
		now := r.Clock.Now()
		ok, err := r.Store.LeasePreset(ctx, p.ID, r.Replica, now, now.Add(cmp.Or(r.Lease, DefaultLease)))
		if err != nil {
			return res, err
		}
		if !ok {
			res.Leased++
			continue
		}
		res.Presets++
		err = r.reconcile(ctx, now, p, byID[p.TemplateID], &budget, &res)
		if rerr := r.Store.ReleasePreset(context.WithoutCancel(ctx), p.ID, r.Replica, r.Clock.Now()); err == nil {
			err = rerr
		}
		if err != nil {
			return res, err
		}
	}
	return res, nil
}

// reconcile reads, decides and applies one preset, holding its lease.
func (r *Reconciler) reconcile(ctx context.Context, now time.Time, p store.Preset, t store.Template, budget *int, res *Result) error {
	in, err := r.Store.PrebuildInstances(ctx, p.ID)
	if err != nil {
		return err
	}
	if p.DeletedAt != nil && len(in) == 0 {
		purged, err := r.Store.PurgePreset(ctx, p.ID)
		if purged {
			res.Purged++
			r.Log.Info("deleted preset removed: no prebuilt workspace of it is left", "preset", p.Name, "template", p.TemplateName)
		}
		return err
	}
	failures, err := r.Store.PresetFailures(ctx, p.ID, maxFailures)
	if err != nil {
		return err
	}
	snap := prebuild.Snapshot{Pool: p.Pool, VersionID: VersionOf(p, t), Instances: Instances(in, now), Failures: FailureTimes(failures)}
	if p.DeletedAt != nil {
		snap.Pool = prebuild.Pool{} // a deleted preset wants none
	}
	opts := prebuild.DefaultOptions
	if r.Options != nil {
		opts = *r.Options
	}
	a := prebuild.Decide(now, snap, opts)
	for _, d := range a.Delete {
		if *budget <= 0 {
			res.Deferred++
			continue
		}
		*budget--
		r.delete(ctx, p, d.WorkspaceID, string(d.Reason), d.Orphan, res)
	}
	// A stopped instance (an admin stopped it) is on its way out: it is deleted.
	for _, i := range in {
		if b := i.Build; b != nil && b.Transition == build.Stop && !b.Job.Status().Active() {
			if *budget <= 0 {
				res.Deferred++
				continue
			}
			*budget--
			r.delete(ctx, p, i.Workspace.ID, "stopped", false, res)
		}
	}
	if !a.BackoffUntil.IsZero() {
		r.Log.Info("prebuild creates held back after failures", "preset", p.Name, "template", p.TemplateName, "failures", len(failures),
			"until", a.BackoffUntil)
	}
	for range a.Create {
		if *budget <= 0 {
			res.Deferred++
			continue
		}
		*budget--
		actx, e := r.begin(ctx, audit.PrebuildCreate, p, audit.Target{Kind: audit.KindWorkspace})
		w, err := r.Builder.CreatePrebuild(actx, p, snap.VersionID)
		r.Audit.End(actx, e, err)
		if err != nil {
			res.Failed++
			r.Log.Warn("prebuilt workspace not created", "preset", p.Name, "template", p.TemplateName, "err", err)
			continue
		}
		res.Created++
		r.Log.Info("prebuilt workspace created", "workspace", w.Name, "preset", p.Name, "template", p.TemplateName)
		if r.Created != nil {
			r.Created(p)
		}
	}
	return nil
}

func (r *Reconciler) delete(ctx context.Context, p store.Preset, id, why string, orphan bool, res *Result) {
	actx, e := r.begin(ctx, audit.PrebuildDelete, p, audit.Target{Kind: audit.KindWorkspace, ID: id})
	e.Set("why", why)
	e.Set("orphan", orphan)
	done, err := r.Builder.DeletePrebuild(actx, id, why, orphan)
	if !done && err == nil {
		e.Discard() // claimed meanwhile, or no longer pending: nothing was done
	}
	r.Audit.End(actx, e, err)
	switch {
	case err != nil:
		res.Failed++
		r.Log.Warn("prebuilt workspace not deleted", "workspace", id, "preset", p.Name, "template", p.TemplateName, "why", why, "err", err)
	case done:
		res.Deleted++
		if orphan {
			res.Orphaned++
		}
	}
}

// Run ticks at once and then every interval until ctx ends. after makes the waits (time.After).
func (r *Reconciler) Run(ctx context.Context, interval time.Duration, after func(time.Duration) <-chan time.Time) {
	for {
		res, err := r.Tick(ctx)
		if err != nil && !errors.Is(err, context.Canceled) {
			r.Log.Warn("prebuild tick failed", "err", err)
		} else if res.Created+res.Deleted+res.Failed+res.Purged > 0 {
			r.Log.Info("prebuild tick", "presets", res.Presets, "created", res.Created, "deleted", res.Deleted, "orphaned", res.Orphaned,
				"purged", res.Purged, "deferred", res.Deferred, "failed", res.Failed)
		}
		select {
		case <-ctx.Done():
			return
		case <-after(interval):
		}
	}
}

// FailureTimes are the times of failures, as prebuild.Decide reads them.
func FailureTimes(failures []store.PresetFailure) []time.Time {
	out := make([]time.Time, len(failures))
	for i, f := range failures {
		out[i] = f.At
	}
	return out
}

// MaxFailures bounds the failures read of a preset: enough for the backoff to reach its longest.
const MaxFailures = maxFailures

// Pool is a preset with what a decision at some time says of its pool (counts; nothing is done),
// and its prebuild creates that failed since the last that succeeded (at most MaxFailures).
type Pool struct {
	Preset   store.Preset
	Actions  prebuild.Actions
	Failures []store.PresetFailure
}

// Pools reads every preset that is not deleted and decides on its pool at now, without the backoff:
// the counts of the metrics.
func Pools(ctx context.Context, st store.Store, now time.Time) ([]Pool, error) {
	presets, err := st.ListPresets(ctx, "", false)
	if err != nil || len(presets) == 0 {
		return nil, err
	}
	templates, err := st.ListTemplates(ctx)
	if err != nil {
		return nil, err
	}
	active := make(map[string]store.Template, len(templates))
	for _, t := range templates {
		active[t.ID] = t
	}
	all, err := st.PrebuildInstances(ctx, "")
	if err != nil {
		return nil, err
	}
	byPreset := map[string][]store.PrebuildInstance{}
	for _, i := range all {
		byPreset[i.Workspace.PresetID] = append(byPreset[i.Workspace.PresetID], i)
	}
	out := make([]Pool, 0, len(presets))
	for _, p := range presets {
		snap := prebuild.Snapshot{Pool: p.Pool, VersionID: VersionOf(p, active[p.TemplateID]), Instances: Instances(byPreset[p.ID], now)}
		failures, err := st.PresetFailures(ctx, p.ID, maxFailures)
		if err != nil {
			return nil, err
		}
		out = append(out, Pool{Preset: p, Actions: prebuild.Decide(now, snap, prebuild.DefaultOptions), Failures: failures})
	}
	return out, nil
}
