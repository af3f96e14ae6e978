package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/hangar-dev/hangar/internal/autobuild"
	"github.com/hangar-dev/hangar/internal/errs"
	"github.com/hangar-dev/hangar/internal/monitor"
	"github.com/hangar-dev/hangar/internal/protocol"
	"github.com/hangar-dev/hangar/internal/sdk"
	"github.com/hangar-dev/hangar/internal/workspace"
)

// A workspace's metadata and resource alerts (docs/decisions.md, "Inside the workspace: metadata
// and resource alerts"). Its helper reports every protocol.MetadataInterval; the server keeps the
// latest report and a short history in memory (metadataCache), writes the report to the database
// at most every MetadataPersistInterval per workspace (and at once when an alert changes), so that
// another replica, or this one restarted, has it; and records an alert when a figure goes over its
// threshold, when it is under again, and when the kernel killed a process for lack of memory.

// MetadataPersistInterval is how often at most a workspace's metadata is written to the database.
const MetadataPersistInterval = time.Minute

// MetadataHistory is how many samples of a workspace's CPU and memory are kept (in memory only):
// five minutes at the helper's interval.
const MetadataHistory = 30

// metadataForget is how long a workspace's metadata stays in memory without a report: a stopped or
// deleted workspace's goes then.
const metadataForget = 10 * time.Minute

// metadataCache holds the workspaces' latest metadata on this replica.
type metadataCache struct {
	mu      sync.Mutex
	m       map[string]*wsMetadata
	sweptAt time.Time
}

// wsMetadata is one workspace's: the latest report, when it came and when it was last written, the
// history, the conditions open (loaded from the store with the first report this replica gets),
// and the helper's OOM kill count at its last report.
type wsMetadata struct {
	mu          sync.Mutex
	loaded      bool
	report      protocol.MetadataReport
	receivedAt  time.Time
	persistedAt time.Time
	history     []sdk.ResourceSample
	open        map[alertKey]bool
	oomKills    int64
	// helperStarted is the start of the helper whose kills oomKills counts; oomEventAt when its
	// last kill was recorded; cleared when each condition was last cleared.
	helperStarted time.Time
	oomEventAt    time.Time
	cleared       map[alertKey]time.Time
	// The workspace's lifecycle policy, read at most every policyFor; the work last seen and
	// when it was last written (WorkPersistInterval).
	policy          workspace.Lifecycle
	policyAt        time.Time
	workPersistedAt time.Time
}

// WorkPersistInterval is how often at most the work a workspace's helper sees is written: the
// shortest TTL is a minute, so a workspace that works is never a minute behind.
const WorkPersistInterval = 30 * time.Second

// policyFor is how long a workspace's policy read for its reports is kept.
const policyFor = time.Minute

// A helper reports every protocol.MetadataInterval, so nothing it does needs more than these
// bounds, which keep a helper's token (the workspace's user can read it) from making the server
// write on every request: a report sooner than minReportGap after the last one is refused (429);
// a condition cleared is raised again only after alertHysteresis; kills are recorded at most once
// per alertHysteresis. An entry not reported to for staleAfter is read again from the store
// before it decides (another replica took the reports between).
const (
	minReportGap    = protocol.MetadataInterval / 2
	alertHysteresis = time.Minute
	staleAfter      = protocol.MetadataInterval * 3 / 2
)

// errReportTooSoon refuses a report that came sooner than minReportGap after the last.
var errReportTooSoon = errCode(errs.LimitReached, "a workspace's helper reports every 10 s: this report came too soon after the last", "")

type alertKey struct{ kind, subject string }

// entry returns the workspace's entry, made when missing, and forgets those not reported for
// metadataForget (looked at no more than once a minute).
func (c *metadataCache) entry(id string, now time.Time) *wsMetadata {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[string]*wsMetadata{}
	}
	if now.Sub(c.sweptAt) >= time.Minute {
		for k, e := range c.m {
			// An entry busy with a report is not stale; none is waited for under c.mu.
			if !e.mu.TryLock() {
				continue
			}
			stale := now.Sub(e.receivedAt) >= metadataForget
			e.mu.Unlock()
			if stale {
				delete(c.m, k)
			}
		}
		c.sweptAt = now
	}
	e := c.m[id]
	if e == nil {
		e = &wsMetadata{}
		c.m[id] = e
	}
	return e
}

// get returns a copy of the workspace's latest report and history, if this replica has one.
func (c *metadataCache) get(id string) (protocol.MetadataReport, []sdk.ResourceSample, bool) {
	c.mu.Lock()
	e := c.m[id]
	c.mu.Unlock()
	if e == nil {
		return protocol.MetadataReport{}, nil, false
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if !e.loaded || e.receivedAt.IsZero() {
		return protocol.MetadataReport{}, nil, false
	}
	return e.report, append([]sdk.ResourceSample(nil), e.history...), true
}

// helperMetadata serves PUT protocol.MetadataPath.
func (s *Server) helperMetadata(w http.ResponseWriter, r *http.Request) {
	if err := s.helperMetadataErr(w, r); err != nil {
		s.fail(w, r, err)
	}
}

func (s *Server) helperMetadataErr(w http.ResponseWriter, r *http.Request) error {
	ws, _, err := s.helperOf(r)
	if err != nil {
		return err
	}
	var rep protocol.MetadataReport
	if err := decodeJSON(w, r, protocol.MaxMetadataReportBytes, &rep); err != nil {
		return err
	}
	if err := rep.Check(); err != nil {
		// Check's errors begin with the field they name.
		field, detail, _ := strings.Cut(err.Error(), ": ")
		return errBadRequest("invalid metadata report: "+err.Error(), sdk.Validation{Field: field, Detail: detail})
	}
	answer, err := s.recordMetadata(r.Context(), ws, rep)
	if errors.Is(err, errReportTooSoon) {
		w.Header().Set("Retry-After", retryAfter(minReportGap))
	}
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, answer)
	return nil
}

// recordMetadata keeps a report of ws's helper, records the alerts it raises or clears and the
// work it saw, and answers with what the helper should count as work.
func (s *Server) recordMetadata(ctx context.Context, ws workspace.Workspace, rep protocol.MetadataReport) (protocol.MetadataAnswer, error) {
	var answer protocol.MetadataAnswer
	now := s.clock.Now()
	// The server's clock orders reports and dates alerts: a machine's may be off.
	rep.CollectedAt = now
	for i := range rep.Items {
		if rep.Items[i].CollectedAt.After(now) || rep.Items[i].CollectedAt.IsZero() {
			rep.Items[i].CollectedAt = now
		}
	}
	e := s.metadata.entry(ws.ID, now)
	e.mu.Lock()
	defer e.mu.Unlock()
	if !e.receivedAt.IsZero() && now.Sub(e.receivedAt) < minReportGap {
		return answer, errReportTooSoon
	}
	if !e.loaded || now.Sub(e.receivedAt) >= staleAfter {
		if err := s.loadMetadata(ctx, ws.ID, e); err != nil {
			return answer, err
		}
	}
	changed := false
	// Conditions: raised when over, cleared when under.
	over := map[alertKey]workspace.Alert{}
	for _, a := range monitor.ResourceConditions(rep.Resources) {
		over[alertKey{a.Kind, a.Subject}] = a
	}
	for k, a := range over {
		if e.open[k] || now.Sub(e.cleared[k]) < alertHysteresis {
			continue
		}
		a.RaisedAt = now
		if _, err := s.store.RecordWorkspaceAlert(ctx, ws.ID, a); err != nil {
			return answer, err
		}
		s.log.Info("workspace alert raised", "workspace", ws.OwnerName+"/"+ws.Name, "kind", a.Kind, "detail", a.Detail)
		e.open[k], changed = true, true
	}
	for k := range e.open {
		if _, still := over[k]; !still {
			if err := s.store.ClearWorkspaceAlert(ctx, ws.ID, k.kind, k.subject, now); err != nil {
				return answer, err
			}
			s.log.Info("workspace alert cleared", "workspace", ws.OwnerName+"/"+ws.Name, "kind", k.kind, "subject", k.subject)
			delete(e.open, k)
			e.cleared[k] = now
			changed = true
		}
	}
	// Kills: the helper counts those since it started; another start's count begins at 0.
	if m := rep.Resources.Memory; m != nil {
		if !rep.HelperStarted.Equal(e.helperStarted) {
			e.helperStarted, e.oomKills = rep.HelperStarted, 0
		}
		if m.OOMKills > e.oomKills && now.Sub(e.oomEventAt) >= alertHysteresis {
			e.oomEventAt = now
			n := m.OOMKills - e.oomKills
			detail := fmt.Sprintf("%d process(es) in the workspace killed for lack of memory", n)
			if m.LimitBytes > 0 {
				detail += " (limit " + workspace.Bytes(m.LimitBytes) + ")"
			}
			a := workspace.Alert{Kind: workspace.AlertOOMKilled, Detail: detail, RaisedAt: now, ClearedAt: &now}
			if _, err := s.store.RecordWorkspaceAlert(ctx, ws.ID, a); err != nil {
				return answer, err
			}
			s.log.Info("workspace alert raised", "workspace", ws.OwnerName+"/"+ws.Name, "kind", a.Kind, "detail", a.Detail)
			changed = true
			e.oomKills = m.OOMKills
		}
	}
	e.report, e.receivedAt = rep, now
	sample := sdk.ResourceSample{At: now}
	if rep.Resources.CPU != nil {
		sample.CPUCores = rep.Resources.CPU.UsedCores
	}
	if rep.Resources.Memory != nil {
		sample.MemoryBytes = rep.Resources.Memory.UsedBytes
	}
	if len(e.history) == MetadataHistory {
		copy(e.history, e.history[1:])
		e.history = e.history[:MetadataHistory-1]
	}
	e.history = append(e.history, sample)
	if changed || now.Sub(e.persistedAt) >= MetadataPersistInterval {
		b, err := json.Marshal(rep)
		if err != nil {
			return answer, err
		}
		if err := s.store.SetWorkspaceMetadata(ctx, ws.ID, b, now); err != nil {
			return answer, err
		}
		e.persistedAt = now
	}
	// Work: the work the helper saw is written at most every WorkPersistInterval whatever the
	// policy (the page shows it; a policy whose activity is work counts it as use, and tells the
	// helper which processes are work).
	if now.Sub(e.policyAt) >= policyFor {
		p, err := autobuild.PolicyOf(ctx, s.store, ws)
		if err != nil && !isNotFound(err) {
			return answer, err
		}
		e.policy, e.policyAt = p, now
	}
	if e.policy.Activity == workspace.ActivityWork {
		answer.ActivityProcesses = e.policy.ActivityProcesses
	}
	if rep.Activity != nil {
		if active, why := monitor.WorkActive(*rep.Activity, e.policy); active && now.Sub(e.workPersistedAt) >= WorkPersistInterval {
			if err := s.store.RecordWork(ctx, ws.ID, now, why); err != nil {
				return answer, err
			}
			e.workPersistedAt = now
		}
	}
	return answer, nil
}

// loadMetadata fills a new entry from the store: the open conditions, and the OOM kill count of
// the report kept (so that a server restarted does not raise the same kills again).
func (s *Server) loadMetadata(ctx context.Context, id string, e *wsMetadata) error {
	alerts, err := s.store.WorkspaceAlerts(ctx, id)
	if err != nil {
		return err
	}
	e.open, e.cleared = map[alertKey]bool{}, map[alertKey]time.Time{}
	for _, a := range alerts {
		k := alertKey{a.Kind, a.Subject}
		if a.ClearedAt == nil {
			e.open[k] = true
		} else if a.ClearedAt.After(e.cleared[k]) && !a.Event() {
			e.cleared[k] = *a.ClearedAt
		}
		if a.Kind == workspace.AlertOOMKilled && a.Subject == "" && a.RaisedAt.After(e.oomEventAt) {
			e.oomEventAt = a.RaisedAt
		}
	}
	b, _, err := s.store.WorkspaceMetadata(ctx, id)
	switch {
	case err == nil:
		var kept protocol.MetadataReport
		if json.Unmarshal(b, &kept) == nil && kept.Resources.Memory != nil {
			e.helperStarted, e.oomKills = kept.HelperStarted, kept.Resources.Memory.OOMKills
		}
	case !isNotFound(err):
		return err
	}
	e.loaded = true
	return nil
}

// metadataOf is what the answer about ws shows of its metadata: its resources (while it runs) and
// custom values, from this replica's memory, else from the report the database keeps; and its
// alerts, a condition active while it holds and the workspace runs. Errors leave them out: the
// rest of the answer stands.
func (s *Server) metadataOf(ctx context.Context, ws workspace.Workspace, out *sdk.Workspace) {
	alerts, err := s.store.WorkspaceAlerts(ctx, ws.ID)
	if err != nil {
		s.log.Warn("cannot read a workspace's alerts", "workspace", ws.OwnerName+"/"+ws.Name, "err", err)
	}
	running := ws.ActualState == workspace.Running
	for _, a := range alerts {
		out.Alerts = append(out.Alerts, sdk.WorkspaceAlert{Kind: a.Kind, Subject: a.Subject, Detail: a.Detail,
			Active: a.ClearedAt == nil && running, RaisedAt: a.RaisedAt, ClearedAt: a.ClearedAt})
	}
	if !running {
		return
	}
	rep, history, ok := s.metadata.get(ws.ID)
	if !ok {
		b, _, err := s.store.WorkspaceMetadata(ctx, ws.ID)
		if err != nil {
			if !isNotFound(err) {
				s.log.Warn("cannot read a workspace's metadata", "workspace", ws.OwnerName+"/"+ws.Name, "err", err)
			}
			return
		}
		if err := json.Unmarshal(b, &rep); err != nil {
			s.log.Warn("a workspace's metadata kept is not readable", "workspace", ws.OwnerName+"/"+ws.Name, "err", err)
			return
		}
	}
	// A report from before this run of the workspace is another run's.
	if rep.CollectedAt.Before(ws.DesiredStateUpdatedAt) {
		return
	}
	out.Resources = &sdk.WorkspaceResources{CollectedAt: rep.CollectedAt, Resources: rep.Resources, History: history}
	out.Metadata = rep.Items
}
