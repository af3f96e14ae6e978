package server

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/hangar-dev/hangar/internal/audit"
	"github.com/hangar-dev/hangar/internal/backend/tfbackend"
	"github.com/hangar-dev/hangar/internal/build"
	"github.com/hangar-dev/hangar/internal/devfile"
	"github.com/hangar-dev/hangar/internal/parameter"
	"github.com/hangar-dev/hangar/internal/protocol"
	"github.com/hangar-dev/hangar/internal/sdk"
	"github.com/hangar-dev/hangar/internal/store"
	"github.com/hangar-dev/hangar/internal/tfmodule"
	"github.com/hangar-dev/hangar/internal/workspace"
)

// The Terraform backend's user API: templates, builds, logs, state. The rules are in package build
// and backend/tfbackend; these handlers authenticate, decode, call and encode.

// MaxTemplateNameLength bounds template names (DNS labels, like workspace names).
const MaxTemplateNameLength = 63

func (s *Server) pushTemplateVersion(w http.ResponseWriter, r *http.Request, u workspace.User) (err error) {
	name := r.PathValue("name")
	var req sdk.CreateTemplateVersionRequest
	if err := decodeJSON(w, r, sdk.MaxTemplateArchiveBytes/3*4+(1<<20), &req); err != nil {
		return err
	}
	defer s.audit(&r, u, audit.TemplatePush, audit.Target{Kind: audit.KindTemplate, Name: name})(&err)
	v := &workspace.ValidationError{}
	if !workspace.IsDNSLabel(name, MaxTemplateNameLength) {
		v.Add("name", "must be 1 to %d lower-case letters, digits or '-', starting and ending with a letter or digit, got %q", MaxTemplateNameLength, name)
	}
	var vars []string
	var params []parameter.Parameter
	content := req.Archive
	switch req.Kind {
	case workspace.KindTerraform:
		switch {
		case len(req.Archive) == 0:
			v.Add("archive", "is required for a terraform template: the module directory as a gzipped tar")
		case len(req.Archive) > sdk.MaxTemplateArchiveBytes:
			v.Add("archive", "is %d bytes, the limit is %d", len(req.Archive), sdk.MaxTemplateArchiveBytes)
		default:
			m, err := tfmodule.Inspect(req.Archive)
			if err != nil {
				v.Add("archive", "%v", err)
			}
			vars = m.Variables
			params = moduleParameters(m, v)
		}
		if req.Devfile != "" {
			v.Add("devfile", "is for kubernetes templates; a terraform template is a module archive")
		}
	case workspace.KindKubernetes:
		if len(req.Archive) > 0 {
			v.Add("archive", "is for terraform templates; a kubernetes template is a devfile")
		}
		if len(req.Devfile) > sdk.MaxDevfileBytes {
			v.Add("devfile", "is %d bytes, the limit is %d", len(req.Devfile), sdk.MaxDevfileBytes)
		} else if _, err := devfile.Parse([]byte(req.Devfile)); err != nil {
			v.Add("devfile", "%v", err)
		}
		content = []byte(req.Devfile)
	default:
		v.Add("kind", "must be %q or %q, got %q", workspace.KindTerraform, workspace.KindKubernetes, req.Kind)
	}
	if err := v.Err(); err != nil {
		return err
	}
	if req.Activate == nil || *req.Activate {
		// The version becomes active at once (the first version of a template has no preset).
		if cur, err := s.store.TemplateByName(r.Context(), name); err == nil {
			if err := s.checkPresetsFollow(r.Context(), cur, 0, params); err != nil {
				return err
			}
		} else if !isNotFound(err) {
			return err
		}
	}
	sum := sha256.Sum256(content)
	now := s.clock.Now()
	if vars == nil {
		vars = []string{}
	}
	versionID := uuid.NewString()
	entry := audit.From(r.Context())
	entry.Set("kind", req.Kind)
	entry.Set("template_version_id", versionID)
	entry.Set("hash", hex.EncodeToString(sum[:]))
	t, ver, err := s.store.CreateTemplateVersion(r.Context(),
		store.Template{ID: uuid.NewString(), Name: name, Kind: req.Kind, CreatedBy: u.Username, CreatedAt: now, UpdatedAt: now},
		store.TemplateVersion{ID: versionID, Archive: content, Hash: hex.EncodeToString(sum[:]), Variables: vars, Parameters: params,
			CreatedBy: u.Username, CreatedAt: now, Inactive: req.Activate != nil && !*req.Activate})
	if err != nil {
		return err
	}
	s.log.Info("template version pushed", "template", name, "kind", t.Kind, "version", ver.Number, "active", t.ActiveVersionID == ver.ID,
		"by", u.Username, "bytes", len(content))
	out := toTemplate(t)
	out.Versions = []sdk.TemplateVersion{toTemplateVersion(t, ver)}
	writeJSON(w, http.StatusCreated, out)
	return nil
}

func (s *Server) listTemplates(w http.ResponseWriter, r *http.Request, _ workspace.User) error {
	ts, err := s.store.ListTemplates(r.Context())
	if err != nil {
		return err
	}
	out := make([]sdk.Template, 0, len(ts))
	for _, t := range ts {
		out = append(out, toTemplate(t))
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (s *Server) getTemplate(w http.ResponseWriter, r *http.Request, _ workspace.User) error {
	name := r.PathValue("name")
	t, err := s.store.TemplateByName(r.Context(), name)
	if isNotFound(err) {
		return errNotFound("template %q not found", name)
	}
	if err != nil {
		return err
	}
	vs, err := s.store.ListTemplateVersions(r.Context(), t.ID)
	if err != nil {
		return err
	}
	out := toTemplate(t)
	for _, v := range vs {
		out.Versions = append(out.Versions, toTemplateVersion(t, v))
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// moduleParameters are the module's variables that users give values for: every one Hangar does
// not supply itself (tfbackend.VariableNames). A module with more than parameter.MaxParameters is
// refused, and so is a required variable Hangar can never supply: one whose type a user cannot
// give as a value (a type containing `any` inside a collection or object has no JSON shape to
// check a value against).
func moduleParameters(m tfmodule.Module, v *workspace.ValidationError) []parameter.Parameter {
	hangar := tfbackend.VariableNames()
	params := []parameter.Parameter{}
	for _, p := range m.Declared {
		if hangar[p.Name] {
			continue
		}
		if ty := p.CtyType(); p.Required() && !parameter.Primitive(ty) && ty.HasDynamicTypes() {
			v.Add("archive", "variable %q (type %s) is required, and no value of that type can be given: give it a default, or a type without `any` inside", p.Name, p.Type)
			continue
		}
		params = append(params, p)
	}
	if len(params) > parameter.MaxParameters {
		v.Add("archive", "the module has %d parameters (variables without one of Hangar's names), the limit is %d", len(params), parameter.MaxParameters)
	}
	return params
}

// templateNamed reads a template by name, or answers 404.
func (s *Server) templateNamed(r *http.Request) (store.Template, error) {
	name := r.PathValue("name")
	t, err := s.store.TemplateByName(r.Context(), name)
	if isNotFound(err) {
		return t, errNotFound("template %q not found", name)
	}
	return t, err
}

// templateVersionOf reads the version the path's {number} names ("active" for the active one).
func (s *Server) templateVersionOf(r *http.Request, t store.Template, withArchive bool) (store.TemplateVersion, error) {
	text := r.PathValue("number")
	number := t.ActiveVersion
	if text != "active" {
		n, err := strconv.Atoi(text)
		if err != nil || n < 1 {
			return store.TemplateVersion{}, errBadRequest("invalid request", sdk.Validation{Field: "number", Detail: fmt.Sprintf("must be a version number (1, 2, ...) or \"active\", got %q", text)})
		}
		number = n
	}
	v, err := s.store.TemplateVersionByNumber(r.Context(), t.ID, number, withArchive)
	if isNotFound(err) {
		return v, errNotFound("template %q has no version %d", t.Name, number)
	}
	return v, err
}

func (s *Server) listTemplateVersions(w http.ResponseWriter, r *http.Request, _ workspace.User) error {
	t, err := s.templateNamed(r)
	if err != nil {
		return err
	}
	vs, err := s.store.ListTemplateVersions(r.Context(), t.ID)
	if err != nil {
		return err
	}
	out := make([]sdk.TemplateVersion, 0, len(vs))
	for _, v := range vs {
		out = append(out, toTemplateVersion(t, v))
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (s *Server) promoteTemplateVersion(w http.ResponseWriter, r *http.Request, u workspace.User) (err error) {
	defer s.audit(&r, u, audit.TemplatePromote, audit.Target{Kind: audit.KindTemplate, Name: r.PathValue("name")})(&err)
	t, err := s.templateNamed(r)
	if err != nil {
		return err
	}
	v, err := s.templateVersionOf(r, t, false)
	if err != nil {
		return err
	}
	audit.From(r.Context()).SetTarget(audit.Target{Kind: audit.KindTemplate, ID: t.ID, Name: t.Name})
	audit.From(r.Context()).Set("version", v.Number)
	if err := s.checkPresetsFollow(r.Context(), t, v.Number, v.Parameters); err != nil {
		return err
	}
	t, err = s.store.PromoteTemplateVersion(r.Context(), t.Name, v.Number, s.clock.Now())
	if err != nil {
		return err
	}
	s.log.Info("template version promoted", "template", t.Name, "version", v.Number, "by", u.Username)
	writeJSON(w, http.StatusOK, toTemplate(t))
	return nil
}

// deleteTemplate deletes a template nothing uses any more (docs/decisions.md, "Deleting a
// template"): refused, naming what uses it, while it has workspaces that are not Terminated
// (prebuilt ones included) or presets. Its name is free afterwards; its terminated workspaces
// keep their history.
func (s *Server) deleteTemplate(w http.ResponseWriter, r *http.Request, u workspace.User) (err error) {
	name := r.PathValue("name")
	defer s.audit(&r, u, audit.TemplateDelete, audit.Target{Kind: audit.KindTemplate, Name: name})(&err)
	err = s.store.DeleteTemplate(r.Context(), name, s.clock.Now(), func(workspaces []string, count int, presets []string) error {
		return templateInUse(name, workspaces, count, presets)
	})
	if isNotFound(err) {
		return errNotFound("template %q not found", name)
	}
	if err != nil {
		return err
	}
	s.log.Info("template deleted", "template", name, "by", u.Username)
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// templateInUse is the refusal of a template's delete while workspaces or presets use it (nil
// when none do): how many workspaces and which, and which presets, with what to do.
func templateInUse(name string, workspaces []string, count int, presets []string) error {
	var parts []string
	if count > 0 {
		which := strings.Join(workspaces, ", ")
		if count > len(workspaces) {
			which += fmt.Sprintf(" and %d more", count-len(workspaces))
		}
		parts = append(parts, fmt.Sprintf("%d workspace%s that %s not deleted (%s): delete them first (hangar delete), and wait for their deletes to end",
			count, plural(count), map[bool]string{true: "is", false: "are"}[count == 1], which))
	}
	if len(presets) > 0 {
		parts = append(parts, fmt.Sprintf("preset%s %s: delete %s first (hangar templates preset %s PRESET --delete); their prebuilt workspaces are deleted then",
			plural(len(presets)), strings.Join(presets, ", "), map[bool]string{true: "it", false: "them"}[len(presets) == 1], name))
	}
	if len(parts) == 0 {
		return nil
	}
	return errConflict("template in use", fmt.Sprintf("template %q is used by %s", name, strings.Join(parts, "; and by ")))
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

// pullTemplateVersion answers a version's content: the module archive (application/gzip) or the
// devfile (application/yaml). Admins only: a module may hold what its authors would not show every
// user (the same people may push).
func (s *Server) pullTemplateVersion(w http.ResponseWriter, r *http.Request, _ workspace.User) error {
	t, err := s.templateNamed(r)
	if err != nil {
		return err
	}
	v, err := s.templateVersionOf(r, t, true)
	if err != nil {
		return err
	}
	ct := "application/gzip"
	if t.Kind == workspace.KindKubernetes {
		ct = "application/yaml"
	}
	w.Header().Set("Content-Type", ct)
	w.Header().Set("Hangar-Template-Version", strconv.Itoa(v.Number))
	w.Header().Set("Content-Length", strconv.Itoa(len(v.Archive)))
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(v.Archive)
	return nil
}

// updateWorkspaceVersion is hangar update: a terraform workspace moves to its template's active
// version and to the parameter values given (tfbackend.Update); a Kubernetes workspace made from
// a repository takes the definition read again from it (updateDefinition).
func (s *Server) updateWorkspaceVersion(w http.ResponseWriter, r *http.Request, u workspace.User) (err error) {
	var req sdk.UpdateWorkspaceVersionRequest
	if err := decodeJSON(w, r, sdk.MaxBodyBytes, &req); err != nil {
		return err
	}
	defer s.audit(&r, u, audit.WorkspaceUpdate, workspaceTarget(r, u))(&err)
	if ws, err := s.visibleWorkspace(r, u); err == nil && ws.Backend == workspace.KindKubernetes {
		return s.updateDefinition(w, r, u, ws, req)
	}
	ws, err := s.terraformWorkspace(r, u)
	if err != nil {
		return err
	}
	nw, result, err := s.builder.Update(r.Context(), u, store.WorkspaceRef{ID: ws.ID}, req.Parameters)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, sdk.UpdateWorkspaceVersionResponse{Result: string(result), Workspace: s.toWorkspace(nw)})
	return nil
}

// createTerraformWorkspace is POST /workspaces with a terraform template.
func (s *Server) createTerraformWorkspace(w http.ResponseWriter, r *http.Request, u workspace.User, req sdk.CreateWorkspaceRequest, t store.Template, logLevel string) error {
	if req.Agent != "" || req.Devfile != "" {
		return errBadRequest("invalid request", sdk.Validation{Field: "template",
			Detail: fmt.Sprintf("%q is a terraform template: provisioners build it, so agent and devfile do not apply", t.Name)})
	}
	if req.Preset != "" && len(req.Parameters) > 0 {
		return errBadRequest("invalid request", sdk.Validation{Field: "parameters", Detail: "a preset gives the parameters: give either preset or parameters"})
	}
	var ws workspace.Workspace
	var err error
	if req.Preset != "" {
		ws, err = s.createFromPreset(r.Context(), u, req.Name, t, req.Preset, logLevel)
	} else {
		ws, _, err = s.builder.Create(r.Context(), u, req.Name, t, tfbackend.Spec{Parameters: req.Parameters, LogLevel: logLevel})
	}
	if err != nil {
		return err
	}
	s.used(r, ws, u)
	writeJSON(w, http.StatusCreated, s.toWorkspace(ws))
	return nil
}

// visibleWorkspace reads a workspace the user may see, or answers 404.
func (s *Server) visibleWorkspace(r *http.Request, u workspace.User) (workspace.Workspace, error) {
	return s.readWorkspace(r, u)
}

// terraformWorkspace reads a workspace the user may see that builds run (a terraform workspace).
// A Kubernetes workspace is a 409 that says it has no builds and what to use instead, not "no
// build latest".
func (s *Server) terraformWorkspace(r *http.Request, u workspace.User) (workspace.Workspace, error) {
	ws, err := s.visibleWorkspace(r, u)
	if err != nil {
		return ws, err
	}
	if ws.Backend != workspace.KindTerraform {
		return ws, errConflict(sdk.NotTerraformMessage, fmt.Sprintf(
			"workspace %q is a Kubernetes workspace (agent %s): it has no builds, build logs or Terraform state; "+
				"'hangar show %s' shows its state and last error, and the agent's cluster has its pods' logs", ws.Name, ws.AgentName, r.PathValue("name")))
	}
	return ws, nil
}

func (s *Server) createBuild(w http.ResponseWriter, r *http.Request, u workspace.User) (err error) {
	var req sdk.CreateBuildRequest
	if err := decodeJSON(w, r, protocol.MaxStateBytes/3*4+(1<<20), &req); err != nil {
		return err
	}
	// A build that starts from a pushed state is a state push (with a build); the state itself is
	// never in the entry.
	action := audit.BuildCreate
	if req.State != nil {
		action = audit.StatePush
	}
	defer s.audit(&r, u, action, workspaceTarget(r, u))(&err)
	if req.State != nil {
		audit.From(r.Context()).Set("with_build", true)
	}
	logLevel, err := build.ParseLogLevel(req.LogLevel)
	if err != nil {
		return errBadRequest("invalid request", sdk.Validation{Field: "log_level", Detail: err.Error()})
	}
	t, err := build.ParseTransition(req.Transition)
	if err != nil {
		return errBadRequest("invalid request", sdk.Validation{Field: "transition", Detail: err.Error()})
	}
	if req.Orphan && t != build.Delete {
		return errBadRequest("invalid request", sdk.Validation{Field: "orphan", Detail: "applies to the delete transition only"})
	}
	if req.State != nil && req.Orphan {
		return errBadRequest("invalid request", sdk.Validation{Field: "state", Detail: "an orphan delete runs no Terraform: it takes no state"})
	}
	if len(req.State) > protocol.MaxStateBytes {
		return errBadRequest("invalid request", sdk.Validation{Field: "state", Detail: fmt.Sprintf("is %d bytes, the limit is %d", len(req.State), protocol.MaxStateBytes)})
	}
	if req.State != nil && !isStateJSON(req.State) {
		return errBadRequest("invalid request", sdk.Validation{Field: "state", Detail: "must be a Terraform state: a JSON object"})
	}
	ref, err := s.workspaceRef(r, u)
	if err != nil {
		return err
	}
	ws, b, err := s.builder.NewBuild(r.Context(), u, ref, tfbackend.Request{Transition: t, Orphan: req.Orphan, State: req.State, LogLevel: logLevel})
	if err != nil {
		return s.buildErr(r, err)
	}
	s.used(r, ws, u)
	writeJSON(w, http.StatusCreated, toBuild(b, s.versionNumbers(r, ws)))
	return nil
}

// versionNumbers maps the workspace's template version ids to their numbers (for display; empty
// when they cannot be read).
func (s *Server) versionNumbers(r *http.Request, ws workspace.Workspace) map[string]int {
	out := map[string]int{}
	if ws.TemplateID == "" {
		return out
	}
	vs, err := s.store.ListTemplateVersions(r.Context(), ws.TemplateID)
	if err != nil {
		s.log.Warn("cannot read template versions", "template", ws.TemplateName, "err", err)
		return out
	}
	for _, v := range vs {
		out[v.ID] = v.Number
	}
	return out
}

// jsonLineEncoder writes one JSON value per line.
func jsonLineEncoder(w io.Writer) func(v any) error {
	enc := json.NewEncoder(w)
	return enc.Encode
}

// untilShutdown is the request's context, also ended when the server shuts down, so that long
// polls answer instead of holding a shutdown up.
func (s *Server) untilShutdown(r *http.Request) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(r.Context())
	stop := s.shutdownOf(r)
	go func() {
		select {
		case <-stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	return ctx, cancel
}

// buildErr maps the builder's errors to answers.
func (s *Server) buildErr(r *http.Request, err error) error {
	switch {
	case errors.Is(err, tfbackend.ErrHidden), isNotFound(err):
		return errNotFound("workspace %q not found", r.PathValue("name"))
	case errors.Is(err, tfbackend.ErrNotTerraform):
		return errConflict(sdk.NotTerraformMessage, err.Error())
	case errors.Is(err, tfbackend.ErrBadRequest):
		return errBadRequest(err.Error())
	case errors.Is(err, build.ErrBuildActive), errors.Is(err, build.ErrDeleted), errors.Is(err, build.ErrNotActive):
		return errConflict("build conflict", err.Error())
	}
	return err
}

func (s *Server) listBuilds(w http.ResponseWriter, r *http.Request, u workspace.User) error {
	ws, err := s.visibleWorkspace(r, u)
	if err != nil {
		return err
	}
	bs, err := s.store.ListBuilds(r.Context(), ws.ID)
	if err != nil {
		return err
	}
	out := make([]sdk.Build, 0, len(bs))
	versions := s.versionNumbers(r, ws)
	for _, b := range bs {
		out = append(out, toBuild(b, versions))
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// buildOf reads the build named by the {number} path value ("latest" or 0 for the latest).
func (s *Server) buildOf(r *http.Request, u workspace.User) (workspace.Workspace, build.Build, error) {
	ws, err := s.terraformWorkspace(r, u)
	if err != nil {
		return ws, build.Build{}, err
	}
	n, err := buildNumber(r.PathValue("number"))
	if err != nil {
		return ws, build.Build{}, err
	}
	b, err := s.store.BuildByNumber(r.Context(), ws.ID, n)
	if isNotFound(err) {
		return ws, b, errNotFound("workspace %q has no build %s", ws.Name, r.PathValue("number"))
	}
	return ws, b, err
}

func buildNumber(s string) (int, error) {
	if s == "latest" || s == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 {
		return 0, errBadRequest("invalid request", sdk.Validation{Field: "number", Detail: fmt.Sprintf("must be a build number (1, 2, ...) or latest, got %q", s)})
	}
	return n, nil
}

func (s *Server) getBuild(w http.ResponseWriter, r *http.Request, u workspace.User) error {
	ws, b, err := s.buildOf(r, u)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, toBuild(b, s.versionNumbers(r, ws)))
	return nil
}

func (s *Server) cancelBuild(w http.ResponseWriter, r *http.Request, u workspace.User) (err error) {
	defer s.audit(&r, u, audit.BuildCancel, workspaceTarget(r, u))(&err)
	ws, b, err := s.buildOf(r, u)
	if err != nil {
		return err
	}
	nb, err := s.builder.Cancel(r.Context(), u, store.WorkspaceRef{ID: ws.ID}, b.Number)
	if err != nil {
		return s.buildErr(r, err)
	}
	writeJSON(w, http.StatusOK, toBuild(nb, s.versionNumbers(r, ws)))
	return nil
}

// buildLogs streams a build's log as JSON lines. With follow=true it keeps the response open until
// the build ends, then writes a last line {"end": true, "status": ...}.
func (s *Server) buildLogs(w http.ResponseWriter, r *http.Request, u workspace.User) error {
	_, b, err := s.buildOf(r, u)
	if err != nil {
		return err
	}
	q := r.URL.Query()
	var after int64
	if v := q.Get("after"); v != "" {
		if after, err = strconv.ParseInt(v, 10, 64); err != nil || after < 0 {
			return errBadRequest("invalid request", sdk.Validation{Field: "after", Detail: fmt.Sprintf("must be a log line id, got %q", v)})
		}
	}
	follow := q.Get("follow") == "true" || q.Get("follow") == "1"
	jobID := b.Job.ID
	var wake <-chan struct{}
	var revoked <-chan struct{}
	if follow {
		release, err := s.openStream(w, r, "user:"+u.ID, 0)
		if err != nil {
			return err
		}
		defer release()
		ch, unsubscribe := s.store.SubscribeJob(jobID)
		defer unsubscribe()
		wake = ch
		// A followed log may last as long as the build: it ends, as the live stream does, once the
		// credential that opened it may no longer be used (revoked, signed out, user suspended).
		rv, unsubscribeRevocations := s.store.SubscribeRevocations()
		defer unsubscribeRevocations()
		revoked = rv
	}
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.WriteHeader(http.StatusOK)
	bw := bufio.NewWriter(w)
	flusher, _ := w.(http.Flusher)
	enc := jsonLineEncoder(bw)
	flush := func() {
		_ = bw.Flush()
		if flusher != nil {
			flusher.Flush()
		}
	}
	stop := s.shutdownOf(r)
	for {
		// Read the job's end before the lines: lines written before it ended are then all read.
		cur, err := s.store.JobByID(r.Context(), jobID)
		if err != nil {
			return nil // the stream has started; the client sees it end without the end line
		}
		for {
			lines, err := s.store.JobLogs(r.Context(), jobID, after, 1000)
			if err != nil {
				return nil
			}
			for _, l := range lines {
				_ = enc(sdk.BuildLog{ID: l.ID, Time: l.CreatedAt, Stage: l.Stage, Level: l.Level, Output: l.Output})
				after = l.ID
			}
			if len(lines) < 1000 {
				break
			}
		}
		done := !cur.Status().Active()
		if !follow || done {
			if follow {
				_ = enc(sdk.BuildLog{Time: s.clock.Now(), End: true, Status: string(cur.Status())})
			}
			flush()
			return nil
		}
		flush()
		select {
		case <-r.Context().Done():
			return nil
		case <-stop:
			return nil
		case <-wake:
		case <-revoked:
			if !s.stillSignedIn(r, u) {
				return nil // the client sees the stream end without the end line
			}
		case <-s.after(30 * time.Second): // a lost wake-up costs at most this
			if !s.stillSignedIn(r, u) {
				return nil // expired meanwhile
			}
		}
	}
}

func (s *Server) pullState(w http.ResponseWriter, r *http.Request, u workspace.User) error {
	ws, err := s.terraformWorkspace(r, u)
	if err != nil {
		return err
	}
	n := 0
	if v := r.URL.Query().Get("build"); v != "" {
		if n, err = buildNumber(v); err != nil {
			return errBadRequest("invalid request", sdk.Validation{Field: "build", Detail: fmt.Sprintf("must be a build number (1, 2, ...) or latest, got %q", v)})
		}
	}
	b, err := s.store.BuildByNumber(r.Context(), ws.ID, n)
	if isNotFound(err) {
		return errNotFound("workspace %q has no such build", ws.Name)
	}
	if err != nil {
		return err
	}
	if b.State == nil && b.StatePruned {
		return errNotFound("the Terraform state of build #%d of workspace %q was removed: only the %d latest builds of a workspace keep theirs", b.Number, ws.Name, store.KeptBuildStates)
	}
	if b.State == nil {
		return errNotFound("build #%d of workspace %q has no Terraform state", b.Number, ws.Name)
	}
	s.log.Info("state pulled", "workspace", ws.Name, "build", b.Number, "by", u.Username)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Hangar-Build-Number", strconv.Itoa(b.Number))
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(b.State)
	return nil
}

func (s *Server) pushState(w http.ResponseWriter, r *http.Request, u workspace.User) (err error) {
	defer s.audit(&r, u, audit.StatePush, workspaceTarget(r, u))(&err)
	if ct := r.Header.Get("Content-Type"); ct != "" && !isJSON(ct) {
		return errUnsupportedMediaType(ct)
	}
	body, release, err := s.readBody(w, r, s.stateBodies, u.ID, protocol.MaxStateBytes)
	if err != nil {
		return err
	}
	defer release()
	if len(body) == 0 {
		return errBadRequest("invalid request", sdk.Validation{Field: "body", Detail: "is empty: send the Terraform state (JSON)"})
	}
	var force bool
	switch v := r.URL.Query().Get("force"); v {
	case "", "false", "0":
	case "true", "1":
		force = true
	default:
		return errBadRequest("invalid request", sdk.Validation{Field: "force", Detail: fmt.Sprintf("must be true or false, got %q", v)})
	}
	// The shape first, before any lookup: a body that is not a Terraform state is a 400 whatever
	// the workspace.
	if _, err := build.ParseState(body); err != nil {
		return stateErr(err)
	}
	ref, err := s.workspaceRef(r, u)
	if err != nil {
		return err
	}
	if err := s.builder.PushState(r.Context(), u, ref, body, force); err != nil {
		return s.buildErr(r, stateErr(err))
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// stateErr maps a refused state push (build.StateError) to its answer, naming the state's field:
// 400 for bytes that are not a Terraform state, 409 for a state that does not follow the saved one
// (force overrides it). Other errors pass through.
func stateErr(err error) error {
	var se *build.StateError
	if !errors.As(err, &se) {
		return err
	}
	v := sdk.Validation{Field: se.Field, Detail: se.Detail}
	if se.Behind {
		return &apiError{code: se.Code(), body: sdk.Error{Message: "state conflict",
			Detail: "the pushed state does not follow the workspace's saved state (use force to replace it anyway)", Validations: []sdk.Validation{v}}}
	}
	return errBadRequest("invalid request", v)
}

// isStateJSON reports whether b can be a Terraform state: one JSON object. (Its content is never
// quoted in an answer or a log.)
func isStateJSON(b []byte) bool {
	b = bytes.TrimSpace(b)
	return len(b) > 0 && b[0] == '{' && json.Valid(b)
}

// --- provisioners

const provisionerTokenPrefix = "hgp_"

type provisionerHandler func(w http.ResponseWriter, r *http.Request, p store.Provisioner) error

func (s *Server) authProvisioner(h provisionerHandler) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		token, ok := bearer(r)
		if !ok {
			s.fail(w, r, errUnauthorized("missing bearer token: send Authorization: Bearer <provisioner token>"))
			return
		}
		p, err := s.store.ProvisionerByTokenHash(r.Context(), HashToken(token))
		if errors.Is(err, store.ErrNotFound) {
			s.fail(w, r, errUnauthorized("invalid provisioner token"))
			return
		}
		if err != nil {
			s.fail(w, r, err)
			return
		}
		if err := s.store.TouchProvisioner(r.Context(), p.ID, s.clock.Now()); err != nil {
			s.log.Warn("cannot record provisioner activity", "provisioner", p.Name, "err", err)
		}
		if err := h(w, r, p); err != nil {
			s.fail(w, r, err)
		}
	}
}

func (s *Server) createProvisioner(w http.ResponseWriter, r *http.Request, u workspace.User) (err error) {
	var req sdk.CreateProvisionerRequest
	if err := decodeJSON(w, r, sdk.MaxBodyBytes, &req); err != nil {
		return err
	}
	defer s.audit(&r, u, audit.ProvisionerCreate, audit.Target{Kind: audit.KindProvisioner, Name: req.Name})(&err)
	if !workspace.IsDNSLabel(req.Name, 63) {
		return errBadRequest("invalid request", sdk.Validation{Field: "name", Detail: fmt.Sprintf("must be a DNS label (lower-case letters, digits, '-'), got %q", req.Name)})
	}
	token := NewToken(provisionerTokenPrefix)
	p := store.Provisioner{ID: uuid.NewString(), Name: req.Name, TokenHash: HashToken(token), CreatedAt: s.clock.Now()}
	audit.From(r.Context()).SetTarget(audit.Target{Kind: audit.KindProvisioner, ID: p.ID, Name: p.Name})
	if err := s.store.CreateProvisioner(r.Context(), p); err != nil {
		return err
	}
	s.log.Info("provisioner registered", "provisioner", p.Name)
	writeJSON(w, http.StatusCreated, sdk.Provisioner{ID: p.ID, Name: p.Name, Token: token, CreatedAt: p.CreatedAt})
	return nil
}

func (s *Server) listProvisioners(w http.ResponseWriter, r *http.Request, _ workspace.User) error {
	ps, err := s.store.ListProvisioners(r.Context())
	if err != nil {
		return err
	}
	out := make([]sdk.Provisioner, 0, len(ps)+1)
	// The daemons this server runs in process (--provisioners) are no registered provisioner, but
	// they run builds: they are listed first, as the built-in provisioner.
	if n, seen, since := s.builder.InProcess(); n > 0 {
		out = append(out, sdk.Provisioner{ID: sdk.BuiltInProvisioner, Name: sdk.BuiltInProvisioner, BuiltIn: true, Daemons: n, CreatedAt: since, LastSeenAt: &seen})
	}
	for _, p := range ps {
		out = append(out, sdk.Provisioner{ID: p.ID, Name: p.Name, CreatedAt: p.CreatedAt, LastSeenAt: p.LastSeenAt})
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// workerID checks a provisioner's worker id: its daemons are told apart by it, within the
// provisioner's own namespace (a token cannot act for another provisioner's worker).
func workerID(p store.Provisioner, id string) (string, error) {
	if id == "" || len(id) > 200 || strings.ContainsRune(id, 0) {
		return "", errBadRequest("invalid request", sdk.Validation{Field: "worker_id", Detail: "is required (at most 200 characters, no NUL): a name for this daemon process"})
	}
	return p.ID + "/" + id, nil
}

// decodeWorkerRequest decodes a provisioner request of at most limit bytes into req, and returns its
// worker id (id points into req), scoped to the provisioner.
func decodeWorkerRequest(w http.ResponseWriter, r *http.Request, p store.Provisioner, limit int64, req any, id *string) (string, error) {
	if err := decodeJSON(w, r, limit, req); err != nil {
		return "", err
	}
	return workerID(p, *id)
}

// longPoll runs fn with the request's context, ended also when the server shuts down: an error
// that only the shutdown caused is none (the long poll answers as if it had timed out).
func (s *Server) longPoll(r *http.Request, fn func(ctx context.Context) error) error {
	ctx, cancel := s.untilShutdown(r)
	defer cancel()
	err := fn(ctx)
	if err != nil && ctx.Err() != nil && r.Context().Err() == nil {
		return nil
	}
	return err
}

func waitOf(secs int) time.Duration { return time.Duration(min(max(secs, 0), 60)) * time.Second }

func (s *Server) provisionerAcquire(w http.ResponseWriter, r *http.Request, p store.Provisioner) error {
	var req protocol.AcquireRequest
	worker, err := decodeWorkerRequest(w, r, p, sdk.MaxBodyBytes, &req, &req.WorkerID)
	if err != nil {
		return err
	}
	release, err := s.openStream(w, r, "provisioner:"+p.ID, waitOf(req.WaitSeconds)+streamSlack)
	if err != nil {
		return err
	}
	defer release()
	var job *protocol.ProvisionerJob
	if err := s.longPoll(r, func(ctx context.Context) (err error) {
		// Ended, 401, when the token is rotated or revoked meanwhile (provisioner_revocation.go).
		ctx, gone, stop := s.untilProvisionerRevoked(ctx, r, p)
		defer stop()
		job, err = s.builder.Acquire(ctx, worker, waitOf(req.WaitSeconds))
		if job == nil && gone() {
			s.log.Info("provisioner acquire ended: its token may no longer be used", "provisioner", p.Name)
			return errUnauthorized("invalid provisioner token")
		}
		return err
	}); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, protocol.AcquireResponse{Job: job})
	return nil
}

func (s *Server) provisionerHeartbeat(w http.ResponseWriter, r *http.Request, p store.Provisioner) error {
	var req protocol.HeartbeatRequest
	worker, err := decodeWorkerRequest(w, r, p, sdk.MaxBodyBytes, &req, &req.WorkerID)
	if err != nil {
		return err
	}
	release, err := s.openStream(w, r, "provisioner:"+p.ID, waitOf(req.WaitSeconds)+streamSlack)
	if err != nil {
		return err
	}
	defer release()
	var canceled bool
	if err := s.longPoll(r, func(ctx context.Context) (err error) {
		canceled, err = s.builder.Heartbeat(ctx, r.PathValue("id"), worker, waitOf(req.WaitSeconds))
		return err
	}); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, protocol.HeartbeatResponse{Canceled: canceled})
	return nil
}

func (s *Server) provisionerLogs(w http.ResponseWriter, r *http.Request, p store.Provisioner) error {
	var req protocol.LogsRequest
	worker, err := decodeWorkerRequest(w, r, p, protocol.MaxProvisionerBodyBytes, &req, &req.WorkerID)
	if err != nil {
		return err
	}
	if len(req.Lines) > protocol.MaxLogLinesPerRequest {
		return errBadRequest("invalid request", sdk.Validation{Field: "lines", Detail: fmt.Sprintf("has %d lines, the limit is %d", len(req.Lines), protocol.MaxLogLinesPerRequest)})
	}
	if err := s.builder.AppendLogs(r.Context(), r.PathValue("id"), worker, req.Lines); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]int{"appended": len(req.Lines)})
	return nil
}

func (s *Server) provisionerFinish(w http.ResponseWriter, r *http.Request, p store.Provisioner) error {
	var req protocol.FinishRequest
	worker, err := decodeWorkerRequest(w, r, p, protocol.MaxProvisionerBodyBytes, &req, &req.WorkerID)
	if err != nil {
		return err
	}
	if len(req.State) > protocol.MaxStateBytes {
		return errBadRequest("invalid request", sdk.Validation{Field: "state", Detail: fmt.Sprintf("is %d bytes, the limit is %d", len(req.State), protocol.MaxStateBytes)})
	}
	if err := s.builder.Finish(r.Context(), r.PathValue("id"), worker, build.Outcome{Canceled: req.Canceled, Error: req.Error, State: req.State, NothingRan: req.NothingRan}); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]bool{"recorded": true})
	return nil
}
