package server

import (
	"net/http"
	"slices"
	"unicode/utf8"

	"github.com/hangar-dev/hangar/internal/protocol"
	"github.com/hangar-dev/hangar/internal/sdk"
	"github.com/hangar-dev/hangar/internal/workspace"
)

// helperDotfiles serves PUT protocol.DotfilesStatusPath: a workspace's helper reports, with its
// token, how the install of the owner's dotfiles goes (docs/decisions.md, "A team's repository:
// the definition follows the repository"); the latest report is shown with the workspace.
func (s *Server) helperDotfiles(w http.ResponseWriter, r *http.Request) {
	if err := s.helperDotfilesErr(w, r); err != nil {
		s.fail(w, r, err)
	}
}

func (s *Server) helperDotfilesErr(w http.ResponseWriter, r *http.Request) error {
	ws, _, err := s.helperOf(r)
	if err != nil {
		return err
	}
	var req protocol.DotfilesStatus
	if err := decodeJSON(w, r, sdk.MaxBodyBytes, &req); err != nil {
		return err
	}
	if err := checkDotfilesStatus(req); err != nil {
		return err
	}
	if err := s.store.SetWorkspaceDotfiles(r.Context(), ws.ID, workspace.DotfilesStatus{State: req.State, Repository: req.Repository,
		Script: req.Script, Error: req.Error, Log: req.Log, UpdatedAt: s.clock.Now()}); err != nil {
		return err
	}
	s.log.Debug("dotfiles status reported", "workspace", ws.ID, "state", req.State)
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// checkDotfilesStatus checks a helper's report: a known state, bounded valid UTF-8 text, each
// problem named by field.
func checkDotfilesStatus(st protocol.DotfilesStatus) error {
	v := &workspace.ValidationError{}
	if !slices.Contains([]string{protocol.DotfilesInstalling, protocol.DotfilesInstalled, protocol.DotfilesFailed}, st.State) {
		v.Add("state", "want %s, %s or %s, got %q", protocol.DotfilesInstalling, protocol.DotfilesInstalled, protocol.DotfilesFailed, clip(st.State))
	}
	for _, f := range []struct {
		name, value string
		max         int
	}{{"repository", st.Repository, 2048}, {"script", st.Script, 256}, {"error", st.Error, 4096}, {"log", st.Log, protocol.MaxDotfilesLogBytes}} {
		switch {
		case len(f.value) > f.max:
			v.Add(f.name, "is %d bytes, at most %d", len(f.value), f.max)
		case !utf8.ValidString(f.value):
			v.Add(f.name, "is not valid UTF-8")
		}
	}
	if st.Repository == "" {
		v.Add("repository", "is required: the dotfiles repository installed")
	}
	return v.Err()
}

// dotfilesOf is what a workspace shows of its owner's dotfiles: the helper's latest report, else
// "not configured" (the owner has no dotfiles repository) or "pending" (installed at the next
// start). A Terraform workspace's helper installs none: nothing unless one was reported.
func (s *Server) dotfilesOf(r *http.Request, ws workspace.Workspace) *sdk.WorkspaceDotfiles {
	d, err := s.store.WorkspaceDotfiles(r.Context(), ws.ID)
	if err == nil {
		at := d.UpdatedAt
		return &sdk.WorkspaceDotfiles{Status: d.State, Repository: d.Repository, Script: d.Script, Error: d.Error, Log: d.Log, UpdatedAt: &at}
	}
	if !isNotFound(err) {
		s.log.Warn("cannot read a workspace's dotfiles status", "workspace", ws.OwnerName+"/"+ws.Name, "err", err)
		return nil
	}
	switch {
	case ws.Backend != workspace.KindKubernetes:
		return nil
	case ws.OwnerDotfilesRepo == "":
		return &sdk.WorkspaceDotfiles{Status: "not configured"}
	default:
		return &sdk.WorkspaceDotfiles{Status: "pending", Repository: ws.OwnerDotfilesRepo}
	}
}
