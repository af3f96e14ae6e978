package server

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/hangar-dev/hangar/internal/audit"
	"github.com/hangar-dev/hangar/internal/autobuild"
	"github.com/hangar-dev/hangar/internal/backend"
	"github.com/hangar-dev/hangar/internal/lifecycle"
	"github.com/hangar-dev/hangar/internal/sdk"
	"github.com/hangar-dev/hangar/internal/store"
	"github.com/hangar-dev/hangar/internal/workspace"
)

// setSchedule is PUT /api/v1/workspaces/{name}/schedule: the workspace's own lifecycle settings,
// checked against its template's or agent's policy.
func (s *Server) setSchedule(w http.ResponseWriter, r *http.Request, u workspace.User) (err error) {
	var req sdk.WorkspaceSchedule
	if err := decodeJSON(w, r, sdk.MaxBodyBytes, &req); err != nil {
		return err
	}
	defer s.audit(&r, u, audit.WorkspaceSchedule, workspaceTarget(r, u))(&err)
	entry := audit.From(r.Context())
	entry.Set("autostart", req.Autostart)
	entry.Set("timezone", req.Timezone)
	if req.TTL != nil {
		entry.Set("ttl", *req.TTL)
	}
	sc := workspace.Schedule{Autostart: req.Autostart, Timezone: req.Timezone}
	if req.TTL != nil {
		d, err := parseDuration(*req.TTL)
		if err != nil {
			return errBadRequest("invalid request", sdk.Validation{Field: "ttl", Detail: err.Error()})
		}
		sc.TTL = &d
	}
	ref, err := s.workspaceRef(r, u)
	if err != nil {
		return err
	}
	// The policy is read before the change, outside its transaction: a workspace never changes
	// agent or template, and a policy tightened meanwhile bounds the TTL at evaluation
	// (workspace.TTL).
	cur, err := s.store.Workspace(r.Context(), ref)
	if err != nil {
		return s.buildErr(r, err)
	}
	if !workspace.Visible(u, cur) {
		return s.buildErr(r, backend.ErrHidden)
	}
	entry.SetTarget(audit.Workspace(cur.ID, cur.OwnerName, cur.Name))
	pol, err := autobuild.PolicyOf(r.Context(), s.store, cur)
	if err != nil {
		return err
	}
	row, err := s.store.UpdateWorkspace(r.Context(), store.WorkspaceRef{ID: cur.ID}, func(cur workspace.Workspace) (workspace.Workspace, error) {
		if cur.DesiredState == workspace.Terminated {
			return cur, fmt.Errorf("workspace %q is being deleted: %w", cur.Name, workspace.ErrTerminated)
		}
		v := &workspace.ValidationError{}
		lifecycle.CheckSchedule(sc, pol, s.clock.Now(), v)
		if err := v.Err(); err != nil {
			return cur, err
		}
		cur.Schedule = sc
		return cur, nil
	})
	if err != nil {
		return s.buildErr(r, err)
	}
	s.used(r, row, u)
	s.log.Info("workspace schedule set", "workspace", row.Name, "owner", row.OwnerName, "autostart", sc.Autostart,
		"timezone", sc.Timezone, "ttl", sc.TTL, "by", u.Username)
	out := s.toWorkspace(row)
	s.automation(pol, row, &out)
	writeJSON(w, http.StatusOK, out)
	return nil
}

// setTemplateLifecycle is PUT /api/v1/templates/{name}/lifecycle (admins).
func (s *Server) setTemplateLifecycle(w http.ResponseWriter, r *http.Request, u workspace.User) (err error) {
	var req sdk.Lifecycle
	if err := decodeJSON(w, r, sdk.MaxBodyBytes, &req); err != nil {
		return err
	}
	defer s.audit(&r, u, audit.TemplateLifecycle, audit.Target{Kind: audit.KindTemplate, Name: r.PathValue("name")})(&err)
	audit.From(r.Context()).Set("lifecycle", req)
	l, err := fromSDKLifecycle(req)
	if err != nil {
		return err
	}
	name := r.PathValue("name")
	t, err := s.store.SetTemplateLifecycle(r.Context(), name, l)
	if isNotFound(err) {
		return errNotFound("template %q not found", name)
	}
	if err != nil {
		return err
	}
	s.log.Info("template lifecycle set", "template", name, "lifecycle", req, "by", u.Username)
	writeJSON(w, http.StatusOK, toTemplate(t))
	return nil
}

// parseDuration reads Go's duration text, or "0".
func parseDuration(text string) (time.Duration, error) {
	d, err := time.ParseDuration(text)
	if err != nil {
		return 0, fmt.Errorf("must be a duration such as \"8h\" or \"30m\" (or \"0\"), got %q", text)
	}
	return d, nil
}

func fromSDKLifecycle(in sdk.Lifecycle) (workspace.Lifecycle, error) {
	var out workspace.Lifecycle
	v := &workspace.ValidationError{}
	for _, f := range []struct {
		name, text string
		dst        *workspace.Duration
	}{
		{"default_ttl", in.DefaultTTL, &out.DefaultTTL}, {"max_ttl", in.MaxTTL, &out.MaxTTL}, {"failure_ttl", in.FailureTTL, &out.FailureTTL},
		{"dormancy_threshold", in.DormancyThreshold, &out.DormancyThreshold}, {"dormancy_auto_delete", in.DormancyAutoDelete, &out.DormancyAutoDelete},
		{"max_active", in.MaxActive, &out.MaxActive}, {"max_stopped", in.MaxStopped, &out.MaxStopped},
	} {
		if f.text == "" {
			continue
		}
		d, err := parseDuration(f.text)
		if err != nil {
			v.Add(f.name, "%s", err)
			continue
		}
		*f.dst = workspace.Duration(d)
	}
	if err := v.Err(); err != nil {
		return out, err
	}
	out.Activity, out.ActivityProcesses, out.ActivityCPU = in.Activity, in.ActivityProcesses, in.ActivityCPU
	out.Validate("", v)
	return out, v.Err()
}

func durationText(d workspace.Duration) string {
	if d == 0 {
		return ""
	}
	return d.String()
}

func toSDKLifecycle(l workspace.Lifecycle) sdk.Lifecycle {
	return sdk.Lifecycle{DefaultTTL: durationText(l.DefaultTTL), MaxTTL: durationText(l.MaxTTL), FailureTTL: durationText(l.FailureTTL),
		DormancyThreshold: durationText(l.DormancyThreshold), DormancyAutoDelete: durationText(l.DormancyAutoDelete),
		MaxActive: durationText(l.MaxActive), MaxStopped: durationText(l.MaxStopped),
		Activity: l.Activity, ActivityProcesses: l.ActivityProcesses, ActivityCPU: l.ActivityCPU}
}

func toSDKSchedule(sc workspace.Schedule) sdk.WorkspaceSchedule {
	out := sdk.WorkspaceSchedule{Autostart: sc.Autostart, Timezone: sc.Timezone}
	if sc.TTL != nil {
		t := sc.TTL.String()
		out.TTL = &t
	}
	return out
}

// automation fills out.Automation: the policy in force, p, and what the executor will do next.
func (s *Server) automation(p workspace.Lifecycle, row workspace.Workspace, out *sdk.Workspace) {
	snap := autobuild.Snapshot(row, p, false)
	a := &sdk.WorkspaceAutomation{Policy: toSDKLifecycle(p)}
	if ttl := workspace.TTL(row.Schedule, p); ttl > 0 {
		a.TTL = ttl.String()
	}
	if at, ok := lifecycle.StopDeadline(snap); ok {
		a.AutostopAt = &at
	}
	if at, ok := lifecycle.NextStart(snap); ok {
		a.NextAutostartAt = &at
	}
	out.Automation = a
}

// policies reads every lifecycle policy, for a list of workspaces; on failure, the answers go
// without their automation part rather than fail.
func (s *Server) policies(ctx context.Context) (autobuild.Policies, bool) {
	pol, err := autobuild.ReadPolicies(ctx, s.store)
	if err != nil {
		s.log.Warn("read lifecycle policies", "err", err)
		return pol, false
	}
	return pol, true
}

// withAutomation fills out.Automation for one workspace, reading its policy alone.
func (s *Server) withAutomation(ctx context.Context, row workspace.Workspace, out *sdk.Workspace) {
	p, err := autobuild.PolicyOf(ctx, s.store, row)
	if err != nil {
		s.log.Warn("read lifecycle policy", "workspace", row.Name, "err", err)
		return
	}
	s.automation(p, row, out)
}
