// Package gitcred is git's credential helper protocol (git-credential(1), "INPUT/OUTPUT FORMAT")
// as Hangar speaks it, and the one question a workspace asks the Hangar server for a git remote's
// credentials (docs/decisions.md, "Git credentials in the workspace"). The workspace helper's
// `hangar git-credential` and the project-clone init container both use it.
package gitcred

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/hangar-dev/hangar/internal/apiclient"
	"github.com/hangar-dev/hangar/internal/protocol"
)

// In a workspace, git runs
// `hangar git-credential get` with the attributes of the remote it needs (protocol, host, path) on
// standard input; the command asks the workspace helper over its local socket, the helper asks the
// Hangar server with its own token, and the server answers with the workspace owner's forge token.
// The token is in nobody's environment, file or spec: it is fetched for each git operation, so an
// unlink or a suspension ends git access at the next one.

// MaxRequestBytes caps what git (or anything on the socket) may send: git sends a few
// short lines.
const MaxRequestBytes = 64 << 10

// Request is what git asks for: the remote's protocol, host (with its port) and path
// (git sends the path only with credential.useHttpPath, which the workspace sets).
type Request struct {
	Protocol string `json:"protocol"`
	Host     string `json:"host"`
	Path     string `json:"path,omitempty"`
	Username string `json:"username,omitempty"`
}

// Credential is the answer git gets.
type Credential struct {
	Username string `json:"username"`
	Password string `json:"password"`
}

// ParseRequest reads git's attributes, one `key=value` per line, up to a blank line or
// the end of input. Attributes this helper does not use (capability[], wwwauth[], password, ...)
// are read and dropped, as the protocol asks; `url` is split into its parts when the others are
// missing. It refuses what git never sends: a line without '=', a NUL, input over
// MaxRequestBytes, and a request without protocol or host.
func ParseRequest(r io.Reader) (Request, error) {
	var req Request
	var rawURL string
	sc := bufio.NewScanner(io.LimitReader(r, MaxRequestBytes+1))
	sc.Buffer(make([]byte, 0, 4096), MaxRequestBytes+1)
	total := 0
	for sc.Scan() {
		line := sc.Bytes()
		total += len(line) + 1
		if total > MaxRequestBytes {
			return Request{}, fmt.Errorf("git credential request: over %d bytes", MaxRequestBytes)
		}
		line = bytes.TrimSuffix(line, []byte("\r"))
		if len(line) == 0 {
			break
		}
		if bytes.IndexByte(line, 0) >= 0 {
			return Request{}, errors.New("git credential request: a NUL byte in a line")
		}
		// The scanner drops one carriage return before the newline, as git's own reader does;
		// another in the line would be read back differently (and no host, path or name has one).
		if bytes.IndexByte(line, '\r') >= 0 {
			return Request{}, fmt.Errorf("git credential request: a carriage return in line %q", truncate(string(line), 40))
		}
		key, value, ok := strings.Cut(string(line), "=")
		if !ok || key == "" {
			return Request{}, fmt.Errorf("git credential request: line %q is not key=value", truncate(string(line), 40))
		}
		switch key {
		case "protocol":
			req.Protocol = value
		case "host":
			req.Host = value
		case "path":
			req.Path = value
		case "username":
			req.Username = value
		case "url":
			rawURL = value
		}
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return Request{}, fmt.Errorf("git credential request: over %d bytes", MaxRequestBytes)
		}
		return Request{}, fmt.Errorf("git credential request: %w", err)
	}
	if rawURL != "" && (req.Protocol == "" || req.Host == "") {
		u, err := url.Parse(rawURL)
		if err != nil || u.Scheme == "" || u.Host == "" {
			return Request{}, fmt.Errorf("git credential request: url %q is not an absolute URL", truncate(rawURL, 80))
		}
		req.Protocol, req.Host = u.Scheme, u.Host
		if req.Path == "" {
			req.Path = strings.TrimPrefix(u.Path, "/")
		}
		if req.Username == "" && u.User != nil {
			req.Username = u.User.Username()
		}
	}
	if req.Protocol == "" {
		return Request{}, errors.New("git credential request: no protocol")
	}
	if req.Host == "" {
		return Request{}, errors.New("git credential request: no host")
	}
	return req, nil
}

// Format writes the request as git would send it.
func (r Request) Format(w io.Writer) error {
	var b strings.Builder
	for _, kv := range [][2]string{{"protocol", r.Protocol}, {"host", r.Host}, {"path", r.Path}, {"username", r.Username}} {
		if kv[1] != "" {
			b.WriteString(kv[0] + "=" + kv[1] + "\n")
		}
	}
	b.WriteString("\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// FormatCredential writes what `git credential-<helper> get` prints for git: the username and
// password, or, with quit, `quit=1` so that git asks nobody else and stops (the reason went to
// standard error). A value holding a newline or a NUL would forge another attribute: refused.
func FormatCredential(w io.Writer, c Credential) error {
	for _, v := range []string{c.Username, c.Password} {
		if v == "" || strings.ContainsAny(v, "\n\r\x00") {
			return errors.New("the credential holds an empty value, a newline or a NUL")
		}
	}
	_, err := fmt.Fprintf(w, "username=%s\npassword=%s\n", c.Username, c.Password)
	return err
}

// Answer is the answer to one Request: a credential, or why there is none and
// whether git should stop asking (Quit: the server knows the host, and the user must act first,
// for example link their account).
type Answer struct {
	Credential
	Error string
	Quit  bool
}

// AskFunc answers one credential request.
type AskFunc func(ctx context.Context, req Request) Answer

// AskServer returns the AskFunc of a helper connected out to baseURL with token: each request is
// POST protocol.GitCredentialsPath. A 404 (no forge serves that host) lets git go on to its other
// helpers; any other refusal stops git with the server's message.
func AskServer(hc *http.Client, baseURL, token string) AskFunc {
	return func(ctx context.Context, req Request) Answer {
		var c Credential
		err := apiclient.Do(ctx, hc, baseURL, token, http.MethodPost, protocol.GitCredentialsPath, req, &c, MaxRequestBytes)
		var se *apiclient.StatusError
		switch {
		case err == nil:
			if c.Username == "" || c.Password == "" {
				return Answer{Error: "the Hangar server answered without a username or password"}
			}
			return Answer{Credential: c}
		case errors.As(err, &se):
			msg := ErrorMessage(se.Body)
			if se.Code == http.StatusNotFound {
				return Answer{Error: msg}
			}
			return Answer{Error: msg, Quit: se.Code/100 == 4}
		default:
			return Answer{Error: "could not ask the Hangar server: " + err.Error()}
		}
	}
}

// ErrorMessage is an error body's message (sdk.Error), or the body itself.
func ErrorMessage(body string) string {
	var e struct {
		Message string `json:"message"`
	}
	if json.Unmarshal([]byte(body), &e) == nil && e.Message != "" {
		return e.Message
	}
	return body
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
