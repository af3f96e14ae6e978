package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/hangar-dev/hangar/internal/audit"
	"github.com/hangar-dev/hangar/internal/backend/tfbackend"
	"github.com/hangar-dev/hangar/internal/parameter"
	"github.com/hangar-dev/hangar/internal/prebuild"
	"github.com/hangar-dev/hangar/internal/prebuilds"
	"github.com/hangar-dev/hangar/internal/sdk"
	"github.com/hangar-dev/hangar/internal/store"
	"github.com/hangar-dev/hangar/internal/workspace"
)

// Prebuilt pools' API: a terraform template's presets (admins write them, everyone reads them),
// and the claim of a prebuilt workspace at create (createWorkspace with a preset).

// Bounds of a preset's parameters.
const (
	MaxPresetParameters     = 64
	MaxPresetParameterBytes = 4 << 10
	MaxPresetNameLength     = 63
)

// terraformTemplate reads the {name} template, which must be a terraform one.
func (s *Server) terraformTemplate(r *http.Request) (store.Template, error) {
	name := r.PathValue("name")
	t, err := s.store.TemplateByName(r.Context(), name)
	if isNotFound(err) {
		return t, errNotFound("template %q not found", name)
	}
	if err != nil {
		return t, err
	}
	if t.Kind != workspace.KindTerraform {
		return t, errConflict("not a terraform template", fmt.Sprintf("template %q is a %s template: only terraform templates have presets", name, t.Kind))
	}
	return t, nil
}

// presetFromRequest checks a preset body against the template's versions and returns the preset
// to store; every problem names its field.
func presetFromRequest(name string, req sdk.PutPresetRequest, versions []store.TemplateVersion, t store.Template, s *Server) (store.Preset, error) {
	now := s.clock.Now()
	v := &workspace.ValidationError{}
	if !workspace.IsDNSLabel(name, MaxPresetNameLength) {
		v.Add("preset", "must be 1 to %d lower-case letters, digits or '-', starting and ending with a letter or digit, got %q", MaxPresetNameLength, name)
	}
	pool := prebuild.Pool{Instances: req.Instances, Timezone: req.Timezone}
	for _, r := range req.Schedule {
		pool.Schedule = append(pool.Schedule, prebuild.ScheduleRule{Cron: r.Cron, Instances: r.Instances})
	}
	prebuild.Check(pool, now, v)
	// The version the preset runs: its own, or the active one; its module declares the variables
	// parameters may set.
	versionID, declared, params := t.ActiveVersionID, []string(nil), []parameter.Parameter(nil)
	switch {
	case req.Version < 0:
		v.Add("version", "must be a version number of template %q (1, 2, ...), or 0 for its active version, got %d", t.Name, req.Version)
	case req.Version > 0:
		versionID = ""
		for _, ver := range versions {
			if ver.Number == req.Version {
				versionID, declared, params = ver.ID, ver.Variables, ver.Parameters
			}
		}
		if versionID == "" {
			v.Add("version", "template %q has no version %d", t.Name, req.Version)
		}
	default:
		for _, ver := range versions {
			if ver.ID == versionID {
				declared, params = ver.Variables, ver.Parameters
			}
		}
	}
	if len(req.Parameters) > MaxPresetParameters {
		v.Add("parameters", "%d parameters: at most %d", len(req.Parameters), MaxPresetParameters)
	}
	keys := make([]string, 0, len(req.Parameters))
	for k := range req.Parameters {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		field := "parameters." + k
		val := req.Parameters[k]
		switch {
		case slices.Contains(tfbackend.ReservedVariables, k):
			v.Add(field, "is set by Hangar itself; a preset cannot set it")
		case !slices.Contains(declared, k):
			v.Add(field, "the module (version %s) declares no variable %q", versionText(req.Version), k)
		case len(val) > MaxPresetParameterBytes:
			v.Add(field, "is %d bytes, the limit is %d", len(val), MaxPresetParameterBytes)
		case !utf8.ValidString(val) || slices.Contains([]byte(val), 0):
			v.Add(field, "must be UTF-8 text without NUL characters")
		}
	}
	if err := v.Err(); err != nil {
		return store.Preset{}, err
	}
	// The values as a create from the preset takes them: a preset its prebuilds and creates would
	// fail with is refused now, not found failing at every reconcile.
	if versionID != "" {
		if err := checkPresetValues(params, req.Parameters, ""); err != nil {
			return store.Preset{}, err
		}
	}
	if req.Version == 0 {
		versionID = ""
	}
	return store.Preset{ID: uuid.NewString(), TemplateID: t.ID, TemplateName: t.Name, Name: name, VersionID: versionID,
		Parameters: req.Parameters, Pool: pool, CreatedAt: now, UpdatedAt: now}, nil
}

// checkPresetValues checks a preset's values against the parameters of the version it runs, as a
// create from the preset does (parameter.Resolve): each required parameter has a value, and each
// value passes its type and validation blocks. Each problem's field is prefixed with prefix.
func checkPresetValues(params []parameter.Parameter, values map[string]string, prefix string) error {
	_, err := parameter.Resolve(params, nil, values, true)
	var ve *workspace.ValidationError
	if prefix == "" || !errors.As(err, &ve) {
		return err
	}
	out := &workspace.ValidationError{}
	for _, p := range ve.Problems {
		out.Add(prefix+p.Field, "%s", p.Detail)
	}
	return out
}

// checkPresetsFollow refuses a version of template t becoming its active one when a preset that
// runs the active version (no version of its own) would no longer be valid on it: its prebuilds
// and creates would all fail. Each problem names the preset and the parameter. number is the
// version's (0: the version being pushed).
func (s *Server) checkPresetsFollow(ctx context.Context, t store.Template, number int, params []parameter.Parameter) error {
	if t.ID == "" || t.Kind != workspace.KindTerraform {
		return nil
	}
	ps, err := s.store.ListPresets(ctx, t.ID, false)
	if err != nil {
		return err
	}
	v := &workspace.ValidationError{}
	for _, p := range ps {
		if p.VersionID != "" {
			continue // it keeps its own version
		}
		var ve *workspace.ValidationError
		if err := checkPresetValues(params, p.Parameters, "presets."+p.Name+"."); errors.As(err, &ve) {
			v.Problems = append(v.Problems, ve.Problems...)
		} else if err != nil {
			return err
		}
	}
	if len(v.Problems) == 0 {
		return nil
	}
	which := "the version pushed"
	if number > 0 {
		which = fmt.Sprintf("version %d", number)
	}
	v.Add("presets", "%s cannot become the active version of template %q: the presets above run the active version "+
		"and would fail on it; change them first (hangar templates preset %s PRESET --parameter K=V, or --version N to keep one "+
		"on an older version), or push the version with --activate=false", which, t.Name, t.Name)
	return v
}

// maxPresetErrorBytes bounds the last error a preset's pool shows.
const maxPresetErrorBytes = 2 << 10

// presetError is a failed create's error as a preset's pool shows it: bounded, whole characters.
func presetError(msg string) string {
	if len(msg) <= maxPresetErrorBytes {
		return msg
	}
	cut := maxPresetErrorBytes
	for cut > 0 && !utf8.RuneStart(msg[cut]) {
		cut--
	}
	return msg[:cut] + "…"
}

func versionText(n int) string {
	if n == 0 {
		return "active"
	}
	return fmt.Sprint(n)
}

// putPreset is PUT /api/v1/templates/{name}/presets/{preset} (admins).
func (s *Server) putPreset(w http.ResponseWriter, r *http.Request, u workspace.User) (err error) {
	var req sdk.PutPresetRequest
	if err := decodeJSON(w, r, sdk.MaxBodyBytes, &req); err != nil {
		return err
	}
	defer s.audit(&r, u, audit.PresetPut, presetTarget(r))(&err)
	t, err := s.terraformTemplate(r)
	if err != nil {
		return err
	}
	versions, err := s.store.ListTemplateVersions(r.Context(), t.ID)
	if err != nil {
		return err
	}
	p, err := presetFromRequest(r.PathValue("preset"), req, versions, t, s)
	if err != nil {
		return err
	}
	p.CreatedBy = u.Username
	audit.From(r.Context()).Set("instances", p.Pool.Instances)
	audit.From(r.Context()).Set("version", p.VersionNumber)
	p, err = s.store.PutPreset(r.Context(), p)
	if err != nil {
		return err
	}
	s.log.Info("preset set", "template", t.Name, "preset", p.Name, "version", p.VersionNumber, "instances", p.Pool.Instances,
		"schedule_rules", len(p.Pool.Schedule), "by", u.Username)
	out, err := s.toPreset(r.Context(), p, t)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// listPresets is GET /api/v1/templates/{name}/presets.
func (s *Server) listPresets(w http.ResponseWriter, r *http.Request, _ workspace.User) error {
	t, err := s.terraformTemplate(r)
	if err != nil {
		return err
	}
	ps, err := s.store.ListPresets(r.Context(), t.ID, false)
	if err != nil {
		return err
	}
	out := make([]sdk.Preset, 0, len(ps))
	for _, p := range ps {
		sp, err := s.toPreset(r.Context(), p, t)
		if err != nil {
			return err
		}
		out = append(out, sp)
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// deletePreset is DELETE /api/v1/templates/{name}/presets/{preset} (admins). Its unclaimed
// prebuilt workspaces are deleted by the reconciler, then the preset's row.
func (s *Server) deletePreset(w http.ResponseWriter, r *http.Request, u workspace.User) (err error) {
	defer s.audit(&r, u, audit.PresetDelete, presetTarget(r))(&err)
	t, err := s.terraformTemplate(r)
	if err != nil {
		return err
	}
	name := r.PathValue("preset")
	if err := s.store.DeletePreset(r.Context(), t.ID, name, s.clock.Now()); err != nil {
		if isNotFound(err) {
			return errNotFound("template %q has no preset %q", t.Name, name)
		}
		return err
	}
	s.log.Info("preset deleted", "template", t.Name, "preset", name, "by", u.Username)
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// presetTarget is the preset the path names, as TEMPLATE/PRESET.
func presetTarget(r *http.Request) audit.Target {
	return audit.Target{Kind: audit.KindPreset, Name: r.PathValue("name") + "/" + r.PathValue("preset")}
}

// toPreset converts a preset with its pool as it is now.
func (s *Server) toPreset(ctx context.Context, p store.Preset, t store.Template) (sdk.Preset, error) {
	in, err := s.store.PrebuildInstances(ctx, p.ID)
	if err != nil {
		return sdk.Preset{}, err
	}
	versionID := prebuilds.VersionOf(p, t)
	a := prebuild.Decide(s.clock.Now(), prebuild.Snapshot{Pool: p.Pool, VersionID: versionID, Instances: prebuilds.Instances(in, s.clock.Now())}, prebuild.DefaultOptions)
	out := sdk.Preset{Name: p.Name, Template: t.Name, Version: p.VersionNumber, Parameters: p.Parameters, Instances: p.Pool.Instances,
		Schedule: []sdk.PresetScheduleRule{}, Timezone: p.Pool.Timezone, CreatedBy: p.CreatedBy, CreatedAt: p.CreatedAt, UpdatedAt: p.UpdatedAt,
		Pool: sdk.PresetPool{Desired: a.Desired, Ready: a.Ready, Building: a.Building, Other: len(in) - a.Ready - a.Building, ReconciledAt: p.ReconciledAt}}
	if out.Parameters == nil {
		out.Parameters = map[string]string{}
	}
	for _, r := range p.Pool.Schedule {
		out.Schedule = append(out.Schedule, sdk.PresetScheduleRule{Cron: r.Cron, Instances: r.Instances})
	}
	out.Pool.Version = p.VersionNumber
	if p.VersionID == "" {
		out.Pool.Version = t.ActiveVersion
	}
	failures, err := s.store.PresetFailures(ctx, p.ID, prebuilds.MaxFailures)
	if err != nil {
		return sdk.Preset{}, err
	}
	if n := len(failures); n > 0 {
		last := failures[n-1]
		out.Pool.Failures, out.Pool.LastError, out.Pool.LastFailureAt = n, presetError(last.Error), &last.At
	}
	return out, nil
}

// createFromPreset is POST /workspaces with a terraform template and a preset: a ready prebuilt
// workspace of the preset is claimed when there is one (the seed's "Claim prebuild"), else the
// workspace is built from scratch with the preset's version and parameters.
func (s *Server) createFromPreset(ctx context.Context, u workspace.User, name string, t store.Template, presetName, logLevel string) (workspace.Workspace, error) {
	p, err := s.store.PresetByName(ctx, t.ID, presetName)
	if isNotFound(err) {
		return workspace.Workspace{}, errBadRequest("invalid request", sdk.Validation{Field: "preset", Detail: fmt.Sprintf("template %q has no preset %q", t.Name, presetName)})
	}
	if err != nil {
		return workspace.Workspace{}, err
	}
	versionID := prebuilds.VersionOf(p, t)
	ws, _, ok, err := s.builder.ClaimPrebuild(ctx, u, name, p, versionID)
	// A claim that would bring u over the storage limit, u being within it: built from scratch,
	// the first build's log saying why.
	var over *tfbackend.ClaimOverStorageError
	note := ""
	if errors.As(err, &over) {
		note, err = over.Detail, nil
	}
	if err != nil {
		return ws, err
	}
	if ok {
		s.metrics.prebuildsClaimed.WithLabelValues(t.Name, p.Name).Inc()
		return ws, nil
	}
	ws, _, err = s.builder.Create(ctx, u, name, t, tfbackend.Spec{VersionID: versionID, Parameters: p.Parameters, PresetID: p.ID, LogLevel: logLevel, Note: note})
	return ws, err
}
