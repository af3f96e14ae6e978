package repodef

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
)

// ForgeReader reads a repository through its forge's REST API: GitHub's contents API, GitLab's
// repository files and tree, Gitea's (and Forgejo's) raw and contents, Bitbucket Cloud's src.
type ForgeReader struct {
	// Type is "github", "gitlab", "gitea" or "bitbucket" (externalauth's types).
	Type string
	// APIBase is the API's root: https://api.github.com, https://gitlab.example.com/api/v4,
	// https://gitea.example.com/api/v1, https://api.bitbucket.org/2.0.
	APIBase string
	// Repo is the repository's path on the forge ("owner/name"; GitLab: "group/sub/name"), escaped
	// into the API's URLs (a '?' or '#' in it stays in the path).
	Repo string
	// Ref is the branch, tag or commit ("": the default branch).
	Ref string
	// Token is the user's access token ("": anonymous, for public repositories).
	Token string
	// HTTP is the client (nil: http.DefaultClient).
	HTTP *http.Client

	bitbucketRef  string // Bitbucket's src needs a ref: the default branch, asked once
	defaultBranch string // the repository's default branch, from Check (or rootRef, asked once)
}

// maxListBytes bounds a directory listing's JSON.
const maxListBytes = 1 << 20

// Check implements Reader: the repository's own resource.
func (f *ForgeReader) Check(ctx context.Context) error {
	var u string
	switch f.Type {
	case "github", "gitea":
		u = f.APIBase + "/repos/" + escapePath(f.Repo)
	case "gitlab":
		u = f.APIBase + "/projects/" + url.PathEscape(f.Repo)
	case "bitbucket":
		u = f.APIBase + "/repositories/" + escapePath(f.Repo)
	default:
		return fmt.Errorf("reading a repository: unknown forge type %q", f.Type)
	}
	b, err := f.get(ctx, u, "application/json", maxListBytes, "the repository")
	if errors.Is(err, ErrNotFound) {
		return f.refused(http.StatusNotFound)
	}
	if err != nil {
		return err
	}
	// The default branch, for Pin without a ref (each forge names it in the repository's JSON).
	var repo struct {
		DefaultBranch string                `json:"default_branch"`
		MainBranch    struct{ Name string } `json:"mainbranch"`
	}
	if json.Unmarshal(b, &repo) == nil {
		f.defaultBranch = repo.DefaultBranch
		if f.Type == "bitbucket" {
			f.defaultBranch = repo.MainBranch.Name
		}
	}
	return nil
}

// Pin implements Reader: the commit of the ref (else of the default branch Check read), through
// GitHub's commits/{ref} (its sha media type), GitLab's repository/commits/{ref}, Gitea's
// git/commits/{ref} and Bitbucket's commit/{ref}; later reads are at that commit.
func (f *ForgeReader) Pin(ctx context.Context) (string, error) {
	ref := f.Ref
	if ref == "" {
		ref = f.defaultBranch
	}
	if ref == "" {
		return "", errors.New("reading the repository: the forge did not say its default branch (is it empty?)")
	}
	var u, accept, field string
	switch f.Type {
	case "github":
		u, accept = f.APIBase+"/repos/"+escapePath(f.Repo)+"/commits/"+url.PathEscape(ref), "application/vnd.github.sha"
	case "gitea":
		u, field = f.APIBase+"/repos/"+escapePath(f.Repo)+"/git/commits/"+url.PathEscape(ref)+"?stat=false&verification=false&files=false", "sha"
	case "gitlab":
		u, field = f.APIBase+"/projects/"+url.PathEscape(f.Repo)+"/repository/commits/"+url.PathEscape(ref), "id"
	case "bitbucket":
		u, field = f.APIBase+"/repositories/"+escapePath(f.Repo)+"/commit/"+url.PathEscape(ref), "hash"
	default:
		return "", fmt.Errorf("reading a repository: unknown forge type %q", f.Type)
	}
	b, err := f.get(ctx, u, accept, maxListBytes, "the commit of "+ref)
	if errors.Is(err, ErrNotFound) {
		return "", &RefError{Ref: ref}
	}
	if err != nil {
		return "", err
	}
	sha, err := decodeCommit(field, b)
	if err != nil {
		return "", fmt.Errorf("reading the commit of %s: %w", ref, err)
	}
	f.Ref, f.bitbucketRef = sha, sha
	return sha, nil
}

// decodeCommit reads a forge's answer about a commit: the bare id (field ""), or the JSON object's
// field; only a full commit id is an answer.
func decodeCommit(field string, b []byte) (string, error) {
	sha := strings.TrimSpace(string(b))
	if field != "" {
		var obj map[string]any
		if json.Unmarshal(b, &obj) != nil {
			return "", errors.New("the forge's answer is not a commit")
		}
		sha, _ = obj[field].(string)
	}
	if !IsCommit(sha) {
		return "", errors.New("the forge answered no commit id")
	}
	return sha, nil
}

// ReadFile implements Reader.
func (f *ForgeReader) ReadFile(ctx context.Context, p string) ([]byte, error) {
	var u string
	accept := ""
	switch f.Type {
	case "github":
		u, accept = f.APIBase+"/repos/"+escapePath(f.Repo)+"/contents/"+escapePath(p)+f.refQuery("ref"), "application/vnd.github.raw+json"
	case "gitlab":
		ref := f.Ref
		if ref == "" {
			ref = "HEAD"
		}
		u = f.APIBase + "/projects/" + url.PathEscape(f.Repo) + "/repository/files/" + url.PathEscape(p) + "/raw?ref=" + url.QueryEscape(ref)
	case "gitea":
		u = f.APIBase + "/repos/" + escapePath(f.Repo) + "/raw/" + escapePath(p) + f.refQuery("ref")
	case "bitbucket":
		ref, err := f.bbRef(ctx)
		if err != nil {
			return nil, err
		}
		u = f.APIBase + "/repositories/" + escapePath(f.Repo) + "/src/" + url.PathEscape(ref) + "/" + escapePath(p)
	default:
		return nil, fmt.Errorf("reading a repository: unknown forge type %q", f.Type)
	}
	b, err := f.get(ctx, u, accept, MaxFileBytes, p)
	if err != nil {
		return nil, err
	}
	if f.Type == "bitbucket" && strings.HasPrefix(strings.TrimSpace(string(b)), `{"pagelen"`) {
		return nil, ErrNotFound // a directory of that name, not a file
	}
	return b, nil
}

// List implements Reader.
func (f *ForgeReader) List(ctx context.Context, dir string) ([]Entry, error) {
	var u string
	switch f.Type {
	case "github":
		u = f.APIBase + "/repos/" + escapePath(f.Repo) + "/contents/" + escapePath(dir) + f.refQuery("ref")
	case "gitea":
		u = f.APIBase + "/repos/" + escapePath(f.Repo) + "/contents/" + escapePath(dir) + f.refQuery("ref")
	case "gitlab":
		u = f.APIBase + "/projects/" + url.PathEscape(f.Repo) + "/repository/tree?per_page=100&path=" + url.QueryEscape(dir)
		if f.Ref != "" {
			u += "&ref=" + url.QueryEscape(f.Ref)
		}
	case "bitbucket":
		ref, err := f.bbRef(ctx)
		if err != nil {
			return nil, err
		}
		u = f.APIBase + "/repositories/" + escapePath(f.Repo) + "/src/" + url.PathEscape(ref) + "/" + escapePath(dir) + "/?pagelen=100"
	default:
		return nil, fmt.Errorf("reading a repository: unknown forge type %q", f.Type)
	}
	b, err := f.get(ctx, u, "application/json", maxListBytes, dir)
	if err != nil {
		return nil, err
	}
	out, err := decodeEntries(f.Type, dir, b)
	if err != nil {
		return nil, err
	}
	if len(out) > MaxEntries {
		out = out[:MaxEntries]
	}
	return out, nil
}

// ReadLink returns a symlink's target. GitHub's raw content follows a symlink, and Gitea's
// contents API names its target: both are read as JSON; GitLab's and Bitbucket's raw content
// of a symlink is its target.
func (f *ForgeReader) ReadLink(ctx context.Context, p string) (string, error) {
	if f.Type != "github" && f.Type != "gitea" {
		b, err := f.ReadFile(ctx, p)
		return string(b), err
	}
	u := f.APIBase + "/repos/" + escapePath(f.Repo) + "/contents/" + escapePath(p) + f.refQuery("ref")
	b, err := f.get(ctx, u, "application/json", maxListBytes, p)
	if err != nil {
		return "", err
	}
	var c struct{ Type, Target, Content, Encoding string }
	if err := json.Unmarshal(b, &c); err != nil {
		return "", fmt.Errorf("reading the symlink %s: the forge's answer is not an object: %v", p, err)
	}
	if c.Target != "" || c.Encoding != "base64" {
		return c.Target, nil
	}
	t, err := base64.StdEncoding.DecodeString(strings.ReplaceAll(c.Content, "\n", ""))
	return string(t), err
}

// ListsTrees says whether ListTree serves this forge (GitHub, Gitea).
func (f *ForgeReader) ListsTrees() bool { return f.Type == "github" || f.Type == "gitea" }

// ListTree lists a folder with its entries' git modes (whether a file is executable), through
// GitHub's and Gitea's git trees API: sha is the folder's tree (an Entry's SHA), "" the root at
// Ref (or the default branch). Other forges: errors.ErrUnsupported (their List says the modes).
func (f *ForgeReader) ListTree(ctx context.Context, sha string) ([]Entry, error) {
	if !f.ListsTrees() {
		return nil, errors.ErrUnsupported
	}
	if sha == "" {
		ref, err := f.rootRef(ctx)
		if err != nil {
			return nil, err
		}
		sha = ref
	}
	u := f.APIBase + "/repos/" + escapePath(f.Repo) + "/git/trees/" + url.PathEscape(sha)
	if f.Type == "gitea" {
		u += "?per_page=" + strconv.Itoa(MaxEntries)
	}
	b, err := f.get(ctx, u, "application/json", maxListBytes, "a folder of the repository")
	if err != nil {
		return nil, err
	}
	return decodeTree(b)
}

// decodeTree reads a git trees API answer (GitHub's and Gitea's shape).
func decodeTree(b []byte) ([]Entry, error) {
	var t struct {
		Tree []struct {
			Path, Mode, Type, SHA string
			Size                  int64
		}
	}
	if err := json.Unmarshal(b, &t); err != nil {
		return nil, fmt.Errorf("reading a folder of the repository: the forge's answer is not a tree: %v", err)
	}
	var out []Entry
	for _, e := range t.Tree {
		mode, _ := strconv.ParseUint(e.Mode, 8, 32)
		if e.Path == "" || e.Path == "." || e.Path == ".." || strings.ContainsAny(e.Path, "/\x00") {
			continue
		}
		out = append(out, Entry{Name: e.Path, Dir: e.Type == "tree", Symlink: mode == 0o120000, Submodule: e.Type == "commit",
			Size: max(e.Size, 0), Mode: uint32(mode), SHA: e.SHA})
		if len(out) == MaxEntries {
			break
		}
	}
	return out, nil
}

// rootRef is Ref, else the repository's default branch (asked once).
func (f *ForgeReader) rootRef(ctx context.Context) (string, error) {
	if f.Ref != "" {
		return f.Ref, nil
	}
	if f.defaultBranch != "" {
		return f.defaultBranch, nil
	}
	b, err := f.get(ctx, f.APIBase+"/repos/"+escapePath(f.Repo), "application/json", maxListBytes, "the repository")
	if err != nil {
		return "", err
	}
	var repo struct {
		DefaultBranch string `json:"default_branch"`
	}
	if json.Unmarshal(b, &repo) != nil || repo.DefaultBranch == "" {
		return "", errors.New("reading the repository: the forge did not say its default branch")
	}
	f.defaultBranch = repo.DefaultBranch
	return f.defaultBranch, nil
}

// decodeEntries reads a directory listing of forge type typ.
func decodeEntries(typ, dir string, b []byte) ([]Entry, error) {
	var out []Entry
	switch typ {
	case "github", "gitea":
		var list []struct {
			Name, Type string
			Size       int64
		}
		if err := json.Unmarshal(b, &list); err != nil {
			return nil, ErrNotFound // a file of that name answers an object, not a list
		}
		for _, e := range list {
			out = append(out, Entry{Name: e.Name, Dir: e.Type == "dir", Symlink: e.Type == "symlink", Submodule: e.Type == "submodule", Size: max(e.Size, 0)})
		}
	case "gitlab":
		var list []struct{ Name, Type, Mode string }
		if err := json.Unmarshal(b, &list); err != nil {
			return nil, fmt.Errorf("reading %s: the forge's answer is not a list: %v", dir, err)
		}
		if len(list) == 0 {
			return nil, ErrNotFound // GitLab lists a missing path as empty
		}
		for _, e := range list {
			mode, _ := strconv.ParseUint(e.Mode, 8, 32)
			out = append(out, Entry{Name: e.Name, Dir: e.Type == "tree", Symlink: mode == 0o120000, Submodule: e.Type == "commit", Mode: uint32(mode)})
		}
	case "bitbucket":
		var page struct {
			Values []struct {
				Path, Type string
				Size       int64
				Attributes []string
			}
		}
		if err := json.Unmarshal(b, &page); err != nil {
			return nil, fmt.Errorf("reading %s: the forge's answer is not a listing: %v", dir, err)
		}
		for _, e := range page.Values {
			name := e.Path[strings.LastIndexByte(e.Path, '/')+1:]
			en := Entry{Name: name, Dir: e.Type == "commit_directory", Symlink: slices.Contains(e.Attributes, "link"), Submodule: slices.Contains(e.Attributes, "subrepository"), Size: max(e.Size, 0)}
			if e.Type == "commit_file" && !en.Symlink {
				en.Mode = 0o100644
				if slices.Contains(e.Attributes, "executable") {
					en.Mode = 0o100755
				}
			}
			out = append(out, en)
		}
	}
	// A name is one path element: a forge that answers otherwise does not get its entry followed.
	out = slices.DeleteFunc(out, func(e Entry) bool {
		return e.Name == "" || e.Name == "." || e.Name == ".." || strings.ContainsAny(e.Name, "/\x00")
	})
	return out, nil
}

func (f *ForgeReader) refQuery(name string) string {
	if f.Ref == "" {
		return ""
	}
	return "?" + name + "=" + url.QueryEscape(f.Ref)
}

// bbRef is the ref Bitbucket's src is read at: Ref, else the repository's main branch.
func (f *ForgeReader) bbRef(ctx context.Context) (string, error) {
	if f.Ref != "" {
		return f.Ref, nil
	}
	if f.bitbucketRef != "" {
		return f.bitbucketRef, nil
	}
	b, err := f.get(ctx, f.APIBase+"/repositories/"+escapePath(f.Repo), "application/json", maxListBytes, "the repository")
	if err != nil {
		if errors.Is(err, ErrNotFound) {
			return "", f.refused(http.StatusNotFound)
		}
		return "", err
	}
	var repo struct {
		MainBranch struct{ Name string } `json:"mainbranch"`
	}
	if json.Unmarshal(b, &repo) != nil || repo.MainBranch.Name == "" {
		return "", errors.New("reading the repository: Bitbucket did not say its main branch")
	}
	f.bitbucketRef = repo.MainBranch.Name
	return f.bitbucketRef, nil
}

// get reads u, at most limit bytes (more is an error naming what), mapping 404 to ErrNotFound and
// a refusal to an error that says what to do.
func (f *ForgeReader) get(ctx context.Context, u, accept string, limit int64, what string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	if f.Token != "" {
		req.Header.Set("Authorization", "Bearer "+f.Token)
	}
	hc := f.HTTP
	if hc == nil {
		hc = http.DefaultClient
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("reading %s from the forge: %w", what, err)
	}
	defer resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusNotFound:
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
		return nil, ErrNotFound
	case resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden:
		return nil, f.refused(resp.StatusCode)
	case resp.StatusCode/100 != 2:
		return nil, fmt.Errorf("reading %s from the forge: it answered %s", what, resp.Status)
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, limit+1))
	if err != nil {
		return nil, fmt.Errorf("reading %s from the forge: %w", what, err)
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("%s is larger than %d KiB", what, limit>>10)
	}
	return b, nil
}

// RefusedError is the forge refusing to show the repository (or a missing repository, which
// forges answer alike to whom may not see it).
type RefusedError struct{ Status int }

func (e *RefusedError) Error() string {
	return fmt.Sprintf("the forge refused to read the repository (%d): it is private and your linked account cannot read it, or it does not exist", e.Status)
}

func (f *ForgeReader) refused(status int) error { return &RefusedError{Status: status} }

// escapePath escapes each element of a repository path for a URL path.
func escapePath(p string) string {
	parts := strings.Split(p, "/")
	for i, s := range parts {
		parts[i] = url.PathEscape(s)
	}
	return strings.Join(parts, "/")
}
