package devfile

import (
	"fmt"
	"maps"
	"net/url"
	"path"
	"slices"
	"strings"

	"github.com/devfile/api/v2/pkg/apis/workspaces/v1alpha2"

	"github.com/hangar-dev/hangar/internal/workspace"
)

// parseProjects reads the git repositories to clone into PROJECTS_ROOT: projects (the first one is
// PROJECT_SOURCE), then dependentProjects. Hangar clones over http(s) only (a workspace has no SSH
// key when it starts); zip and custom projects are refused.
func (d *Devfile) parseProjects(v *workspace.ValidationError, projects, dependent []v1alpha2.Project) {
	names, paths := map[string]bool{}, map[string]string{}
	for _, list := range []struct {
		field string
		items []v1alpha2.Project
	}{{"devfile.projects", projects}, {"devfile.dependentProjects", dependent}} {
		for i, p := range list.items {
			f := fmt.Sprintf("%s[%d]", list.field, i)
			if !workspace.IsDNSLabel(p.Name, 63) {
				v.Add(f+".name", "must be a DNS label (lowercase letters, digits and '-', at most 63 characters), got %q", p.Name)
			} else if names[p.Name] {
				v.Add(f+".name", "%q is used by another project; project names must be unique", p.Name)
			}
			names[p.Name] = true
			pr := project{Name: p.Name, Path: p.Name}
			if p.ClonePath != "" {
				cp := path.Clean(p.ClonePath)
				if path.IsAbs(p.ClonePath) || cp == "." || cp == ".." || strings.HasPrefix(cp, "../") || strings.IndexFunc(p.ClonePath, isControl) >= 0 {
					v.Add(f+".clonePath", "must be a path inside PROJECTS_ROOT such as src/app, got %q", p.ClonePath)
				}
				pr.Path = cp
			}
			if prev, dup := paths[pr.Path]; dup {
				v.Add(f+".clonePath", "%s is cloned into %q already; each project needs its own directory", prev, pr.Path)
			}
			// A project inside another's directory would make the clone of the first create the
			// directory of the second, which would then be taken for a finished clone (or the reverse).
			for _, other := range slices.Sorted(maps.Keys(paths)) {
				if strings.HasPrefix(pr.Path, other+"/") || strings.HasPrefix(other, pr.Path+"/") {
					v.Add(f+".clonePath", "%q is inside %q or contains it (%s); projects are cloned into separate directories", pr.Path, other, paths[other])
				}
			}
			paths[pr.Path] = f
			switch {
			case p.Zip != nil:
				v.Add(f+".zip", "is not supported: Hangar clones git projects; give the repository under git.remotes")
				continue
			case p.Custom != nil:
				v.Add(f+".custom", "is not supported: Hangar clones git projects")
				continue
			case p.Git == nil:
				v.Add(f, "must set git (remotes and, optionally, checkoutFrom)")
				continue
			}
			g := p.Git
			if len(g.Remotes) == 0 {
				v.Add(f+".git.remotes", "must name at least one remote, such as origin: https://example.com/team/app.git")
			}
			for _, name := range slices.Sorted(maps.Keys(g.Remotes)) {
				rf := fieldPath(f+".git.remotes", name)
				if !remoteNameOK(name) {
					v.Add(rf, "%q is not a usable git remote name", name)
				}
				if !remoteURLOK(g.Remotes[name]) {
					v.Add(rf, "must be an https:// (or http://) URL, or an SSH remote (ssh://host/path or user@host:path, cloned with the owner's git SSH key), got %q", g.Remotes[name])
				}
			}
			pr.Remotes = g.Remotes
			if co := g.CheckoutFrom; co != nil {
				pr.Remote, pr.Revision = co.Remote, co.Revision
				if co.Remote != "" && g.Remotes[co.Remote] == "" {
					v.Add(f+".git.checkoutFrom.remote", "%q is not one of the project's remotes", co.Remote)
				}
				if strings.IndexFunc(co.Revision, isSpaceOrControl) >= 0 || strings.HasPrefix(co.Revision, "-") {
					v.Add(f+".git.checkoutFrom.revision", "must be a branch, tag or commit, got %q", co.Revision)
				}
			}
			if pr.Remote == "" && len(g.Remotes) > 1 {
				v.Add(f+".git.checkoutFrom.remote", "is required when a project has several remotes: name the one to clone")
			}
			if pr.Remote == "" && len(g.Remotes) == 1 {
				for name := range g.Remotes {
					pr.Remote = name
				}
			}
			d.projects = append(d.projects, pr)
		}
	}
	if len(projects) > 0 && len(d.projects) > 0 {
		d.source = d.projects[0].Path
	}
}

// remoteURLOK accepts what project-clone clones: an http(s) URL (with the owner's forge
// credentials) or an SSH remote, ssh:// or scp-like (with the owner's git SSH key).
func remoteURLOK(s string) bool {
	if strings.IndexFunc(s, isSpaceOrControl) >= 0 || strings.HasPrefix(s, "-") {
		return false
	}
	if !strings.Contains(s, "://") {
		// scp-like [user@]host:path, as git reads it: a ':' before any '/'.
		host, p, ok := strings.Cut(s[strings.LastIndex(s[:max(strings.IndexByte(s, ':'), 0)], "@")+1:], ":")
		return ok && host != "" && !strings.Contains(host, "/") && strings.Trim(p, "/") != ""
	}
	u, err := url.Parse(s)
	return err == nil && (u.Scheme == "https" || u.Scheme == "http" || u.Scheme == "ssh") && u.Host != ""
}

func remoteNameOK(s string) bool {
	return s != "" && !strings.HasPrefix(s, "-") && strings.IndexFunc(s, func(r rune) bool {
		return isSpaceOrControl(r) || strings.ContainsRune(`~^:?*[\`, r)
	}) < 0 && !strings.Contains(s, "..")
}

func isControl(r rune) bool { return r < ' ' || r == 0x7f }
