// Package projectclone is `hangar project-clone`, the init container that clones a devfile's projects
// into PROJECTS_ROOT before a workspace starts (the devfile spec's project cloning). It runs from the
// agent's tools image with the workspace data volume mounted; the projects come as JSON in
// HANGAR_PROJECTS (devfile.ProjectsEnv), written by the server's generator.
//
// A project whose directory holds a git repository (.git) is left as it is, so that work survives
// restarts; a directory in the way that is neither empty nor a repository is an error. A clone goes to
// a temporary directory first and is renamed into place only when complete, so that a failed clone
// is retried at the next start instead of being taken for a finished one.
package projectclone

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	neturl "net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/transport"
	githttp "github.com/go-git/go-git/v5/plumbing/transport/http"

	"github.com/hangar-dev/hangar/internal/gitcred"
)

// Project is one repository to clone, as the generator writes it.
type Project struct {
	Name     string            `json:"name"`
	Path     string            `json:"path"` // relative to the projects root
	Remotes  map[string]string `json:"remotes"`
	Remote   string            `json:"remote,omitempty"`   // the remote to clone from
	Revision string            `json:"revision,omitempty"` // branch, tag or commit; empty: the remote's default branch
}

// Options change how Clone reaches the remotes.
type Options struct {
	// CABundle is PEM certificates trusted besides the system's (HANGAR_GIT_CA_FILE in the pod).
	CABundle []byte
	// Ask, when set, gives the credentials of an http(s) remote: the workspace owner's, from the
	// Hangar server (HANGAR_HELPER_SERVER_URL and HANGAR_HELPER_TOKEN_FILE in the pod), as git in
	// the workspace gets them.
	Ask gitcred.AskFunc
	// SSH, when set, is where an SSH remote's signatures come from: the owner's git SSH key, held
	// and used by the Hangar server, which also gives the forges' host keys to check (the same
	// server and token as Ask).
	SSH *gitcred.SSHServer
}

// Main runs the subcommand: it reads PROJECTS_ROOT, HANGAR_PROJECTS and HANGAR_GIT_CA_FILE from
// getenv, logs each step to out and every failure, clearly, to errOut, and returns the exit code.
func Main(ctx context.Context, getenv func(string) string, out, errOut io.Writer) int {
	root := getenv("PROJECTS_ROOT")
	if root == "" {
		root = "/projects"
	}
	var projects []Project
	if err := json.Unmarshal([]byte(getenv("HANGAR_PROJECTS")), &projects); err != nil {
		fmt.Fprintf(errOut, "hangar project-clone: HANGAR_PROJECTS is not the JSON list of projects: %v\n", err)
		return 2
	}
	var opts Options
	if f := getenv("HANGAR_GIT_CA_FILE"); f != "" {
		b, err := os.ReadFile(f)
		if err != nil {
			fmt.Fprintf(errOut, "hangar project-clone: read HANGAR_GIT_CA_FILE: %v\n", err)
			return 2
		}
		opts.CABundle = b
	}
	if server, file := getenv("HANGAR_HELPER_SERVER_URL"), getenv("HANGAR_HELPER_TOKEN_FILE"); server != "" && file != "" {
		b, err := os.ReadFile(file)
		if err != nil {
			fmt.Fprintf(errOut, "hangar project-clone: read HANGAR_HELPER_TOKEN_FILE: %v\n", err)
			return 2
		}
		hc := &http.Client{Timeout: 30 * time.Second}
		token := strings.TrimSpace(string(b))
		opts.Ask = gitcred.AskServer(hc, server, token)
		opts.SSH = &gitcred.SSHServer{HTTP: hc, BaseURL: server, Token: token}
	}
	if err := Clone(ctx, root, projects, opts, out); err != nil {
		fmt.Fprintf(errOut, "hangar project-clone: %v\n", err)
		return 1
	}
	return 0
}

// Clone clones every project that is not there yet into root, in order, and stops at the first
// failure.
func Clone(ctx context.Context, root string, projects []Project, opts Options, log io.Writer) error {
	keys := &sshKeys{server: opts.SSH}
	for _, p := range projects {
		dir, err := within(root, p.Path)
		if err != nil {
			return fmt.Errorf("project %q: %w", p.Name, err)
		}
		done, err := cloned(dir)
		if err != nil {
			return fmt.Errorf("project %q: %w", p.Name, err)
		}
		if done {
			fmt.Fprintf(log, "project %s: %s exists, left as it is\n", p.Name, dir)
			continue
		}
		if err := cloneOne(ctx, dir, p, opts, keys, log); err != nil {
			return fmt.Errorf("project %q: %w", p.Name, err)
		}
	}
	return nil
}

// cloned reports whether dir holds a finished clone: a directory with .git. A missing or empty
// directory is not one (the clone goes there); anything else is in the way, and an error says so
// rather than leaving the project uncloned without a word.
func cloned(dir string) (bool, error) {
	fi, err := os.Lstat(dir)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return false, nil
	case err != nil:
		return false, err
	case !fi.IsDir():
		return false, fmt.Errorf("%s exists and is not a directory; remove it to have the project cloned", dir)
	}
	if _, err := os.Lstat(filepath.Join(dir, ".git")); err == nil {
		return true, nil
	} else if !errors.Is(err, os.ErrNotExist) {
		return false, err
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return false, err
	}
	if len(entries) > 0 {
		return false, fmt.Errorf("%s exists and is not a git repository (no .git, %d entries); move its files away to have the project cloned", dir, len(entries))
	}
	return false, nil
}

// within joins rel to root and refuses a path that leaves root.
func within(root, rel string) (string, error) {
	if rel == "" || filepath.IsAbs(rel) {
		return "", fmt.Errorf("clone path %q must be relative to the projects root", rel)
	}
	dir := filepath.Join(root, rel)
	if r, err := filepath.Rel(root, dir); err != nil || r == "." || r == ".." || strings.HasPrefix(r, ".."+string(filepath.Separator)) {
		return "", fmt.Errorf("clone path %q leaves the projects root", rel)
	}
	return dir, nil
}

func cloneOne(ctx context.Context, dir string, p Project, opts Options, keys *sshKeys, log io.Writer) error {
	remote := p.Remote
	if remote == "" && len(p.Remotes) == 1 {
		for name := range p.Remotes {
			remote = name
		}
	}
	url := p.Remotes[remote]
	if url == "" {
		return fmt.Errorf("no remote %q among %d remotes: name the one to clone in checkoutFrom.remote", remote, len(p.Remotes))
	}
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return err
	}
	tmp, err := os.MkdirTemp(filepath.Dir(dir), ".hangar-clone-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)

	auth, err := credentials(ctx, url, opts.Ask, log)
	if err != nil {
		return err
	}
	viaSSH := false
	if auth == nil {
		if auth, err = keys.auth(ctx, url); err != nil {
			return err
		}
		viaSSH = auth != nil
	}
	fmt.Fprintf(log, "project %s: cloning %s (remote %s) into %s\n", p.Name, url, remote, dir)
	repo, err := git.PlainCloneContext(ctx, tmp, false, &git.CloneOptions{
		URL: url, RemoteName: remote, CABundle: opts.CABundle, Tags: git.AllTags, Auth: auth,
	})
	if err != nil {
		if viaSSH && strings.Contains(err.Error(), "unable to authenticate") {
			return fmt.Errorf("clone %s: the forge refused the workspace owner's git SSH key (add it to your forge account: `hangar gitssh` prints it): %w", url, err)
		}
		return fmt.Errorf("clone %s: %w", url, err)
	}
	for name, u := range p.Remotes {
		if name == remote {
			continue
		}
		if _, err := repo.CreateRemote(&config.RemoteConfig{Name: name, URLs: []string{u}}); err != nil {
			return fmt.Errorf("add remote %s: %w", name, err)
		}
	}
	if p.Revision != "" {
		if err := checkout(repo, remote, p.Revision); err != nil {
			return fmt.Errorf("check out %q from %s: %w", p.Revision, url, err)
		}
		fmt.Fprintf(log, "project %s: checked out %s\n", p.Name, p.Revision)
	}
	if err := os.Remove(dir); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err // an empty directory left by an earlier start (cloned checked it is empty)
	}
	if err := os.Rename(tmp, dir); err != nil {
		return err
	}
	fmt.Fprintf(log, "project %s: done\n", p.Name)
	return nil
}

// credentials asks for the credentials of an http(s) remote: none when there is nobody to ask, or
// the server knows no forge for its host (a public remote, or one the image's own means reach); an
// error when the server refuses with a reason the user must act on (the account is not linked).
func credentials(ctx context.Context, remote string, ask gitcred.AskFunc, log io.Writer) (transport.AuthMethod, error) {
	u, err := neturl.Parse(remote)
	if ask == nil || err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, nil
	}
	a := ask(ctx, gitcred.Request{Protocol: u.Scheme, Host: u.Host, Path: strings.TrimPrefix(u.Path, "/")})
	switch {
	case a.Error == "":
		return &githttp.BasicAuth{Username: a.Username, Password: a.Password}, nil
	case a.Quit:
		return nil, fmt.Errorf("credentials for %s://%s: %s", u.Scheme, u.Host, a.Error)
	default:
		fmt.Fprintf(log, "cloning %s without credentials: %s\n", remote, a.Error)
		return nil, nil
	}
}

// checkout moves the worktree to rev: a branch of the remote (checked out as a local branch of the
// same name), a tag, or a commit (detached).
func checkout(repo *git.Repository, remote, rev string) error {
	wt, err := repo.Worktree()
	if err != nil {
		return err
	}
	if ref, err := repo.Reference(plumbing.NewRemoteReferenceName(remote, rev), true); err == nil {
		branch := plumbing.NewBranchReferenceName(rev)
		if head, err := repo.Head(); err == nil && head.Name() == branch {
			return nil // the default branch, already checked out
		}
		if err := wt.Checkout(&git.CheckoutOptions{Branch: branch, Hash: ref.Hash(), Create: true}); err != nil {
			return err
		}
		return repo.CreateBranch(&config.Branch{Name: rev, Remote: remote, Merge: branch})
	}
	hash, err := repo.ResolveRevision(plumbing.Revision(rev))
	if err != nil {
		return fmt.Errorf("no branch, tag or commit of that name")
	}
	return wt.Checkout(&git.CheckoutOptions{Hash: *hash})
}
