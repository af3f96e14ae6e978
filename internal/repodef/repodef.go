// Package repodef finds a workspace's definition in its repository (issue 22, item 1): the
// repository's devfile, else its devcontainer.json, else none (the caller's default). It reads the
// few files it needs through the forge's API, with the user's token, without cloning: one request
// per candidate path, each answer bounded.
package repodef

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"path"
	"slices"
	"strings"
)

// Kind is what a definition is written in.
type Kind string

const (
	Devfile      Kind = "devfile"
	Devcontainer Kind = "devcontainer"
)

// Definition is the file found, or none (Kind ""), and the commit it was looked for at.
type Definition struct {
	Kind    Kind
	Path    string
	Content []byte
	// Commit is the commit the ref named when the definition was read (Reader.Pin).
	Commit string
}

// MaxFileBytes bounds a definition file (a devfile in a create request has the same bound).
const MaxFileBytes = 256 << 10

// MaxEntries bounds a directory listing (.devcontainer/).
const MaxEntries = 1000

// MaxFolders bounds the folders of .devcontainer/ probed for a devcontainer.json (one request to
// the forge each): past it, the definition must be named (devcontainer_path), so that one create
// does not send the forge a request per entry (anonymous ones spend the server's own rate limit).
const MaxFolders = 20

// ErrNotFound is a file or directory the repository does not have at the ref.
var ErrNotFound = errors.New("not found")

// Entry is one entry of a directory.
type Entry struct {
	Name string
	Dir  bool
	// Symlink: a symbolic link (ReadFile or ReadLink gives its target). Submodule: a submodule,
	// whose content the repository does not hold.
	Symlink, Submodule bool
	// Size is a file's size when the listing says it (0 otherwise).
	Size int64
	// Mode is a file's git mode when the listing says it (0o100755 executable, 0o100644 not);
	// 0 when it does not (GitHub's and Gitea's contents API).
	Mode uint32
	// SHA is the entry's git object (a folder's tree), when the listing says it.
	SHA string
}

// Reader reads a repository at one ref.
type Reader interface {
	// Check returns nil when the repository exists and may be read, else why not (forges answer a
	// private repository and a missing one alike: *RefusedError).
	Check(ctx context.Context) error
	// ReadFile returns a file's content (at most MaxFileBytes, else an error saying so), or
	// ErrNotFound.
	ReadFile(ctx context.Context, path string) ([]byte, error)
	// List returns a directory's entries (at most MaxEntries), or ErrNotFound.
	List(ctx context.Context, dir string) ([]Entry, error)
	// Pin resolves the reader's ref (a branch to its newest commit; "": the default branch) to a
	// commit, and reads at that commit from then on, so that every file of one definition comes
	// from one commit. A ref the repository does not have is a *RefError.
	Pin(ctx context.Context) (string, error)
}

// RefError is a ref the repository does not have.
type RefError struct{ Ref string }

func (e *RefError) Error() string {
	return fmt.Sprintf("the repository has no branch, tag or commit %q", e.Ref)
}

// IsCommit reports whether s is a full commit id (SHA-1 or SHA-256, lower-case hex).
func IsCommit(s string) bool {
	if len(s) != 40 && len(s) != 64 {
		return false
	}
	return !strings.ContainsFunc(s, func(r rune) bool { return (r < '0' || r > '9') && (r < 'a' || r > 'f') })
}

// The paths tried, in order (the issue's; devcontainer's own spec lists the same three places).
var (
	devfilePaths      = []string{".devfile.yaml", "devfile.yaml"}
	devcontainerPaths = []string{".devcontainer/devcontainer.json", ".devcontainer.json"}
)

// Find returns the repository's definition: `.devfile.yaml` or `devfile.yaml`; else
// `.devcontainer/devcontainer.json` or `.devcontainer.json`; else the one
// `.devcontainer/<name>/devcontainer.json` (several: an error that lists them, to name one with
// devcontainerPath); else none. A devcontainerPath given is read and nothing else. Every file is read
// at the commit the ref names when Find begins (Definition.Commit).
func Find(ctx context.Context, r Reader, devcontainerPath string) (Definition, error) {
	if err := r.Check(ctx); err != nil {
		return Definition{}, err
	}
	commit, err := r.Pin(ctx)
	if err != nil {
		return Definition{}, err
	}
	d, err := find(ctx, r, devcontainerPath)
	d.Commit = commit
	return d, err
}

func find(ctx context.Context, r Reader, devcontainerPath string) (Definition, error) {
	if devcontainerPath != "" {
		p, detail := cleanPath(devcontainerPath)
		if detail != "" {
			return Definition{}, &PathError{Detail: detail}
		}
		b, err := r.ReadFile(ctx, p)
		if errors.Is(err, ErrNotFound) {
			return Definition{}, &PathError{Detail: fmt.Sprintf("the repository has no %s at this ref", p)}
		}
		if err != nil {
			return Definition{}, err
		}
		return Definition{Kind: Devcontainer, Path: p, Content: b}, nil
	}
	for _, c := range []struct {
		kind  Kind
		paths []string
	}{{Devfile, devfilePaths}, {Devcontainer, devcontainerPaths}} {
		for _, p := range c.paths {
			b, err := r.ReadFile(ctx, p)
			if errors.Is(err, ErrNotFound) {
				continue
			}
			if err != nil {
				return Definition{}, err
			}
			return Definition{Kind: c.kind, Path: p, Content: b}, nil
		}
	}
	entries, err := r.List(ctx, ".devcontainer")
	if errors.Is(err, ErrNotFound) {
		return Definition{}, nil
	}
	if err != nil {
		return Definition{}, err
	}
	var folders int
	for _, e := range entries {
		if e.Dir {
			folders++
		}
	}
	if folders > MaxFolders {
		return Definition{}, &PathError{Detail: fmt.Sprintf("the repository's .devcontainer/ has %d folders (at most %d are looked into): name the definition, such as .devcontainer/<folder>/devcontainer.json", folders, MaxFolders)}
	}
	var found []string
	for _, e := range entries {
		if !e.Dir {
			continue
		}
		p := ".devcontainer/" + e.Name + "/devcontainer.json"
		if _, err := r.ReadFile(ctx, p); errors.Is(err, ErrNotFound) {
			continue
		} else if err != nil {
			return Definition{}, err
		}
		found = append(found, p)
	}
	slices.Sort(found)
	switch len(found) {
	case 0:
		return Definition{}, nil
	case 1:
		b, err := r.ReadFile(ctx, found[0])
		if err != nil {
			return Definition{}, err
		}
		return Definition{Kind: Devcontainer, Path: found[0], Content: b}, nil
	default:
		return Definition{}, &ChoiceError{Paths: found}
	}
}

// PathError is a problem with the devcontainer path given to Find, or the need to give one.
type PathError struct{ Detail string }

func (e *PathError) Error() string { return "devcontainer_path: " + e.Detail }

// ChoiceError says the repository has several devcontainer definitions and none was named.
type ChoiceError struct{ Paths []string }

func (e *ChoiceError) Error() string {
	return fmt.Sprintf("the repository has %d devcontainer definitions (%s): name one with devcontainer_path (hangar create --devcontainer-path)", len(e.Paths), strings.Join(e.Paths, ", "))
}

// CleanPath checks a path inside the repository: relative, no "..", no NUL, at most 512 bytes.
func CleanPath(field, p string) (string, error) {
	c, detail := cleanPath(p)
	if detail != "" {
		return "", fmt.Errorf("%s: %s", field, detail)
	}
	return c, nil
}

// cleanPath is CleanPath's check: the clean path, or what is wrong with p.
func cleanPath(p string) (string, string) {
	c := path.Clean(strings.TrimPrefix(p, "./"))
	if p == "" || len(p) > 512 || strings.HasPrefix(p, "/") || strings.ContainsRune(p, 0) || c == "." || c == ".." || strings.HasPrefix(c, "../") {
		return "", fmt.Sprintf("want a relative path inside the repository, got %q", p)
	}
	return c, ""
}

// Source is a repository and a ref in it, as `hangar create --repo URL[#REF]` gives them.
type Source struct {
	URL string
	// Ref is a branch, a tag or a commit; "": the repository's default branch.
	Ref string
}

// ParseSource reads "URL[#REF]": an http(s) URL with a host and a path (no credentials, query or
// other fragment), or an SSH remote (ssh://host/path or scp-like user@host:path); a ref of at
// most 255 bytes, without spaces or control characters, not beginning with '-'.
func ParseSource(field, s string) (Source, error) {
	if len(s) > 2048 {
		return Source{}, fmt.Errorf("%s: longer than 2048 bytes", field)
	}
	raw, ref, _ := strings.Cut(s, "#")
	if ref != "" || strings.HasSuffix(s, "#") {
		if ref == "" || len(ref) > 255 || strings.HasPrefix(ref, "-") || strings.ContainsFunc(ref, func(r rune) bool { return r <= ' ' || r == 0x7f || r == '~' || r == '^' || r == ':' || r == '\\' }) {
			return Source{}, fmt.Errorf("%s: the ref after '#' must be a branch, tag or commit name, got %q", field, ref)
		}
	}
	if strings.ContainsFunc(raw, func(r rune) bool { return r <= ' ' || r == 0x7f }) {
		return Source{}, fmt.Errorf("%s: %q holds spaces or control characters", field, raw)
	}
	if _, _, err := RepoHostPath(raw); err != nil {
		return Source{}, fmt.Errorf("%s: %w", field, err)
	}
	return Source{URL: raw, Ref: ref}, nil
}

// RepoHostPath returns a remote's host (with its port) and its path without a leading '/' nor a
// trailing ".git" or '/'.
func RepoHostPath(remote string) (host, repoPath string, err error) {
	if i := strings.Index(remote, "://"); i >= 0 {
		u, err := url.Parse(remote)
		if err != nil {
			return "", "", fmt.Errorf("%q is not a URL: %v", remote, err)
		}
		switch {
		case u.Scheme != "https" && u.Scheme != "http" && u.Scheme != "ssh":
			return "", "", fmt.Errorf("want an https://, http:// or ssh:// URL (or user@host:path), got %q", remote)
		case u.Host == "":
			return "", "", fmt.Errorf("%q has no host", remote)
		case u.User != nil && u.Scheme != "ssh":
			return "", "", errors.New("the URL holds credentials: give the repository's URL alone (Hangar uses your linked forge account)")
		case u.RawQuery != "" || u.Fragment != "":
			return "", "", fmt.Errorf("%q has a query or a fragment", remote)
		}
		host, repoPath = u.Host, u.Path
	} else {
		// scp-like: [user@]host:path
		at := strings.LastIndex(remote[:max(strings.IndexByte(remote, ':'), 0)], "@")
		h, p, ok := strings.Cut(remote[at+1:], ":")
		if !ok || h == "" || strings.ContainsAny(h, "/") {
			return "", "", fmt.Errorf("want an https://, http:// or ssh:// URL (or user@host:path), got %q", remote)
		}
		host, repoPath = h, p
	}
	repoPath = strings.TrimSuffix(strings.Trim(repoPath, "/"), ".git")
	repoPath = strings.Trim(repoPath, "/")
	if repoPath == "" || strings.Contains(repoPath, "//") || slices.Contains(strings.Split(repoPath, "/"), "..") {
		return "", "", fmt.Errorf("%q names no repository (want host/owner/name)", remote)
	}
	return host, repoPath, nil
}
