// Package agent is `hangar agent`: it runs next to a Kubernetes cluster, reports the actual state of
// its workspaces' Deployments to the server (`full` and `partial` reconciles,
// ../shared/seeds/workspaces-architecture-kubernetes.md) and applies the configuration the server
// sends back, tracking apply errors as ../shared/seeds/tracking-applier-errors.md designs.
package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"

	"github.com/hangar-dev/hangar/internal/apiclient"
	"github.com/hangar-dev/hangar/internal/backoff"
	"github.com/hangar-dev/hangar/internal/protocol"
	"github.com/hangar-dev/hangar/internal/sdk"
	"github.com/hangar-dev/hangar/internal/tracing"
)

// Options configure an agent.
type Options struct {
	Server *ServerClient
	Kube   *Kube
	Logger *slog.Logger
	// Identity names this replica in leader election (default: a random one).
	Identity string
	// LeaseNamespace holds the leader-election Lease; "" disables leader election (one replica only).
	LeaseNamespace string
	// After makes timers; tests may replace it. Default time.After.
	After func(time.Duration) <-chan time.Time
	// WaitTimeout is how long one long-poll for changes lasts (default 30 s); 0 keeps the default,
	// negative disables waiting (periodic reconciles only).
	WaitTimeout time.Duration
	// ApplyConcurrency caps how many workspaces are applied at once (default DefaultApplyConcurrency).
	// Applies share the client's rate limit: with no cap a burst of 1,000 new workspaces interleaves
	// 8,000 requests and none is done before all are; with one, they finish in turn, and work a full
	// reconcile cancels is only the few in flight.
	ApplyConcurrency int
	// Metrics records the agent's Prometheus series (nil: none). The applier's go through Kube.
	Metrics *Metrics
	// Events records Kubernetes Events on workspaces' Deployments (nil: none; events.go).
	Events EventRecorder
}

// DefaultApplyConcurrency is how many workspaces an agent applies at once unless told otherwise.
const DefaultApplyConcurrency = 16

// Agent is a running agent.
type Agent struct {
	opts  Options
	log   *slog.Logger
	info  protocol.AgentInfo
	ready readiness
}

// New returns an agent.
func New(opts Options) *Agent {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.After == nil {
		opts.After = time.After
	}
	if opts.WaitTimeout == 0 {
		opts.WaitTimeout = 30 * time.Second
	}
	if opts.ApplyConcurrency <= 0 {
		opts.ApplyConcurrency = DefaultApplyConcurrency
	}
	if opts.Kube != nil && opts.Kube.Metrics == nil {
		opts.Kube.Metrics = opts.Metrics
	}
	return &Agent{opts: opts, log: opts.Logger}
}

// Run runs until ctx ends: it learns who it is from the server, wins leadership (if enabled) and
// reconciles.
func (a *Agent) Run(ctx context.Context) error {
	for attempt := 0; ; attempt++ {
		info, err := a.opts.Server.Info(ctx)
		if err == nil {
			a.info = info
			break
		}
		if apiclient.HasCode(err, sdk.CodeUnauthorized) {
			return fmt.Errorf("the server refused the agent token: %w", err)
		}
		a.log.Warn("cannot reach the server yet", "err", err)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-a.opts.After(retry.Delay(attempt)):
		}
	}
	a.log = a.log.With("agent", a.info.Name)
	a.log.Info("agent starting", "agent_id", a.info.ID)
	a.ready.update(func(r *readiness) { r.connected = true })
	if a.opts.LeaseNamespace == "" {
		a.leading(true)
		return a.loop(ctx)
	}
	return a.lead(ctx)
}

// lead runs the loop only while this replica holds the Lease; a new leader starts with a full sync
// (the loop always does). Two replicas never apply at once.
func (a *Agent) lead(ctx context.Context) error {
	if err := a.opts.Kube.ensureNamespace(ctx, a.opts.LeaseNamespace); err != nil {
		return err
	}
	lc := a.opts.Kube.Lease
	if lc == nil {
		lc = a.opts.Kube.Clientset
	}
	lock, err := resourcelock.New(resourcelock.LeasesResourceLock, a.opts.LeaseNamespace, "hangar-agent-"+a.info.ID,
		lc.CoreV1(), lc.CoordinationV1(), resourcelock.ResourceLockConfig{Identity: a.opts.Identity})
	if err != nil {
		return fmt.Errorf("leader election lock: %w", err)
	}
	for ctx.Err() == nil {
		leaderelection.RunOrDie(ctx, leaderelection.LeaderElectionConfig{
			Lock: lock, ReleaseOnCancel: true,
			LeaseDuration: 15 * time.Second, RenewDeadline: 10 * time.Second, RetryPeriod: 2 * time.Second,
			Callbacks: leaderelection.LeaderCallbacks{
				OnStartedLeading: func(lctx context.Context) {
					a.log.Info("leading: starting reconciliation", "identity", a.opts.Identity)
					a.leading(true)
					defer a.leading(false)
					if err := a.loop(lctx); err != nil && lctx.Err() == nil {
						a.log.Error("reconcile loop ended", "err", err)
					}
				},
				OnStoppedLeading: func() { a.log.Info("no longer leading", "identity", a.opts.Identity) },
			},
		})
	}
	return ctx.Err()
}

// terminationRecheck is how soon the loop looks again while a workspace's objects are being deleted
// (namespace deletion takes seconds and sends no Deployment event at its end).
const terminationRecheck = time.Second

// retry is the backoff of the agent's retries (server unreachable, failed cycles, failed waits).
var retry = backoff.Policy{Base: 500 * time.Millisecond, Max: 30 * time.Second}

// loop is the reconcile loop: a full reconcile first (with a fresh reconciler), then partial ones
// every partial interval, a full one every full interval, and a partial one at once whenever the
// server says something is pending. Cycles never overlap; an error is logged and retried with
// backoff; the loop only ends with ctx.
func (a *Agent) loop(ctx context.Context) error {
	var r *reconciler
	defer func() {
		if r != nil {
			r.close()
		}
	}()
	settings := a.info.Settings
	partialEvery := func() time.Duration {
		return time.Duration(max(settings.PartialReconciliationIntervalSeconds, 1)) * time.Second
	}
	fullEvery := func() time.Duration {
		return time.Duration(max(settings.FullReconciliationIntervalSeconds, 60)) * time.Second
	}

	wake := make(chan struct{}, 1)
	// The image build's logs and the steps the server has outlive each reconciler (steps.go).
	steps := newStepLogs(ctx, a.log, a.opts.Kube.Clientset, func() {
		select {
		case wake <- struct{}{}:
		default:
		}
	})
	defer steps.wait()
	if a.opts.WaitTimeout > 0 {
		go a.waitForChanges(ctx, wake)
	}
	needFull := true
	// fresh: r was built for a full sync that has not succeeded yet (its retry reuses it: nothing
	// has happened to it that a rebuild would drop).
	fresh := false
	var fullAt time.Time
	failures := 0
	for {
		ut := protocol.UpdatePartial
		if needFull || time.Since(fullAt) >= fullEvery() {
			ut = protocol.UpdateFull
		}
		start := time.Now()
		err := func() error {
			if ut == protocol.UpdateFull && !fresh {
				// A full sync drops the whole reconciler state and builds it anew.
				if r != nil {
					r.close()
					r = nil
				}
				nr, err := newReconciler(ctx, a.log, a.opts.Kube, a.info.ID, wake, a.opts.ApplyConcurrency, steps)
				if err != nil {
					return err
				}
				nr.events = a.opts.Events
				r, fresh = nr, true
				a.ready.update(func(r *readiness) { r.synced = true })
			}
			resp, err := a.cycle(ctx, r, ut)
			if err != nil {
				return err
			}
			fresh = false
			settings = resp.Settings
			return nil
		}()
		if ctx.Err() != nil {
			return ctx.Err()
		}
		a.cycled(ut, time.Since(start), err)
		wait := partialEvery()
		if err != nil {
			failures++
			wait = retry.Delay(failures)
			a.log.Warn("reconcile failed; retrying", "update_type", ut, "err", err, "retry_in", wait)
			// After any failed cycle the next one is full. The server may have recorded an answer
			// the agent never read (a response cut off on its way): it would not send that
			// workspace's config again on a partial, and only a full reconcile's drift repair
			// brings it back (found by BenchmarkStopToApplied, docs/benchmarks.md).
			needFull = true
			// Back off for real: cluster events and the long-poll must not bring the next attempt
			// forward (a burst of events would otherwise burn through the backoff in milliseconds,
			// and hammer a struggling server once per event).
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-a.opts.After(wait):
			}
			continue
		} else {
			if failures > 0 {
				a.log.Info("reconciling again after failures", "failures", failures, "update_type", ut)
			}
			failures = 0
			if ut == protocol.UpdateFull {
				needFull, fullAt = false, start
			}
			requests, watches := a.opts.Kube.Requests.Counts()
			a.log.Debug("reconciled", "update_type", ut, "took", time.Since(start), "kube_requests", requests, "kube_watches", watches)
			if r != nil && r.terminationsInProgress() {
				wait = min(wait, terminationRecheck)
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-a.opts.After(wait):
		case <-wake:
			// A burst of cluster events (100 stops: some 500 Deployment, ReplicaSet and Pod
			// updates) would otherwise run a cycle per event, each a server round trip and a
			// transaction, taking CPU from the controllers doing the work. A wake after a quiet
			// moment runs at once; in a burst, cycles start at most every wakeGap and each reports
			// what gathered meanwhile.
			if gap := wakeGap - time.Since(start); gap > 0 {
				select {
				case <-ctx.Done():
					return ctx.Err()
				case <-a.opts.After(gap):
				}
				// A wake that came during the gap is the cycle about to run.
				select {
				case <-wake:
				default:
				}
			}
		}
	}
}

// wakeGap is the least time between the starts of two cycles that cluster events or the server's
// long-poll bring forward.
const wakeGap = 100 * time.Millisecond

// cycle is one reconcile: snapshot the errors, report, and on success evict what was reported and
// act on the answer.
func (a *Agent) cycle(ctx context.Context, r *reconciler, ut protocol.UpdateType) (protocol.ReconcileResponse, error) {
	ctx, span := startCycleSpan(ctx, ut)
	defer span.End()
	snap := r.errs.Snapshot()
	req := r.report(ctx, ut, snap)
	resp, err := a.opts.Server.Reconcile(ctx, req)
	if err != nil {
		tracing.Fail(span, err)
		return resp, fmt.Errorf("%s reconcile: %w", ut, err)
	}
	r.errs.Reported(snap)
	r.handle(ctx, req, resp)
	return resp, nil
}

// waitForChanges long-polls the server and signals wake whenever something is pending. The
// periodic loop stays the safety net: any failure here only slows reconciles down to it.
func (a *Agent) waitForChanges(ctx context.Context, wake chan<- struct{}) {
	failures := 0
	for ctx.Err() == nil {
		pending, err := a.opts.Server.Wait(ctx, a.opts.WaitTimeout)
		if err != nil {
			// A server older than the endpoint answers a bare 404 (no code: codes came later).
			var se *StatusError
			if errors.As(err, &se) && se.Code == 404 && (se.ErrorCode == "" || se.ErrorCode == sdk.CodeUnknownEndpoint) {
				a.log.Info("the server has no wait endpoint; reconciling on the interval only")
				return
			}
			failures++
			if ctx.Err() == nil {
				a.log.Debug("waiting for changes failed", "err", err)
			}
			select {
			case <-ctx.Done():
				return
			case <-a.opts.After(retry.Delay(failures)):
			}
			continue
		}
		failures = 0
		if pending {
			select {
			case wake <- struct{}{}:
			default:
			}
			// Let the cycle answer before asking again, or the same pending change wakes us twice.
			select {
			case <-ctx.Done():
				return
			case <-a.opts.After(20 * time.Millisecond):
			}
		}
	}
}
