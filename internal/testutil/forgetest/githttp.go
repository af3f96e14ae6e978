package forgetest

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/cgi"
	"os"
	"strings"
)

// parseRepoPath splits /{owner}/{repo}[.git]/{rest} (Gitea serves both spellings).
func parseRepoPath(p string) (owner, name, rest string, ok bool) {
	parts := strings.SplitN(strings.TrimPrefix(p, "/"), "/", 3)
	if len(parts) != 3 || parts[2] == "" {
		return "", "", "", false
	}
	owner, name, rest = parts[0], strings.TrimSuffix(parts[1], ".git"), parts[2]
	if !validName(owner) || !validName(name) || strings.Contains(rest, "..") {
		return "", "", "", false
	}
	return owner, name, rest, true
}

// httpCredentials returns the user a request's HTTP Basic credentials name: the password is an
// access token (OAuth2 or personal) and the username anything, as at Gitea; or the token is the
// username and the password empty or "x-oauth-basic". given tells whether credentials were sent.
func (f *Forge) httpCredentials(r *http.Request) (login string, given bool) {
	user, pass, ok := r.BasicAuth()
	if !ok {
		return "", false
	}
	if l := f.userForToken(pass); l != "" {
		return l, true
	}
	if pass == "" || pass == "x-oauth-basic" {
		return f.userForToken(user), true
	}
	return "", true
}

// gitHTTP serves git's smart HTTP (and the dumb protocol's reads) through `git http-backend`.
func (f *Forge) gitHTTP(w http.ResponseWriter, r *http.Request) {
	owner, name, rest, ok := parseRepoPath(r.URL.Path)
	if !ok {
		http.NotFound(w, r)
		return
	}
	write := rest == "git-receive-pack" || (rest == "info/refs" && r.URL.Query().Get("service") == "git-receive-pack")
	login, given := f.httpCredentials(r)
	if given && login == "" {
		f.access("http", "", owner, name, write) // logged as the anonymous refusal it is
		unauthorized(w)
		return
	}
	switch f.access("http", login, owner, name, write) {
	case http.StatusOK:
	case http.StatusUnauthorized:
		unauthorized(w)
		return
	case http.StatusForbidden:
		http.Error(w, "User permission denied", http.StatusForbidden)
		return
	default:
		http.Error(w, "Repository not found", http.StatusNotFound)
		return
	}
	// git http-backend serves receive-pack only to an authenticated REMOTE_USER; the forge decided.
	env := append(f.gitConfigEnv(), "GIT_PROJECT_ROOT="+f.root, "GIT_HTTP_EXPORT_ALL=1")
	if login != "" {
		env = append(env, "REMOTE_USER="+login)
	}
	h := &cgi.Handler{
		// timeout(1) bounds the process: net/http/cgi has no deadline of its own.
		Path:       timeoutPath(),
		Args:       []string{"--kill-after=5s", fmt.Sprintf("%ds", int(f.opts.GitTimeout.Seconds())), "git", "http-backend"},
		Dir:        f.root,
		Env:        env,
		InheritEnv: []string{"PATH"},
		Stderr:     os.Stderr,
	}
	r.URL.Path = "/" + owner + "/" + name + ".git/" + rest
	if r.ContentLength < 0 && r.Body != nil {
		// git sends a pack over its postBuffer (1 MiB) chunked, and net/http/cgi refuses chunked
		// bodies: spool it to a file (the body is already bounded by MaxRequestBody).
		spool, err := os.CreateTemp(f.home, "body-")
		if err != nil {
			http.Error(w, "spool: "+err.Error(), http.StatusInternalServerError)
			return
		}
		defer os.Remove(spool.Name())
		defer spool.Close()
		n, err := io.Copy(spool, r.Body)
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			http.Error(w, "request body too large", http.StatusRequestEntityTooLarge)
			return
		}
		if err == nil {
			_, err = spool.Seek(0, io.SeekStart)
		}
		if err != nil {
			http.Error(w, "read body: "+err.Error(), http.StatusBadRequest)
			return
		}
		r.Body, r.ContentLength, r.TransferEncoding = spool, n, nil
	}
	h.ServeHTTP(w, r)
}

func timeoutPath() string {
	for _, p := range []string{"/usr/bin/timeout", "/bin/timeout"} {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	return "timeout"
}

func unauthorized(w http.ResponseWriter) {
	w.Header().Set("WWW-Authenticate", `Basic realm="Gitea"`)
	http.Error(w, "Unauthorized", http.StatusUnauthorized)
}
