package wshelper

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/url"
	"strings"
)

// Git's credential helper protocol (git-credential(1), "INPUT/OUTPUT FORMAT"), as the workspace
// speaks it (docs/decisions.md, "Git credentials in the workspace"): git runs
// `hangar git-credential get` with the attributes of the remote it needs (protocol, host, path) on
// standard input; the command asks the workspace helper over its local socket, the helper asks the
// Hangar server with its own token, and the server answers with the workspace owner's forge token.
// The token is in nobody's environment, file or spec: it is fetched for each git operation, so an
// unlink or a suspension ends git access at the next one.

// MaxCredentialRequestBytes caps what git (or anything on the socket) may send: git sends a few
// short lines.
const MaxCredentialRequestBytes = 64 << 10

// CredentialRequest is what git asks for: the remote's protocol, host (with its port) and path
// (git sends the path only with credential.useHttpPath, which the workspace sets).
type CredentialRequest struct {
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

// ParseCredentialRequest reads git's attributes, one `key=value` per line, up to a blank line or
// the end of input. Attributes this helper does not use (capability[], wwwauth[], password, ...)
// are read and dropped, as the protocol asks; `url` is split into its parts when the others are
// missing. It refuses what git never sends: a line without '=', a NUL, input over
// MaxCredentialRequestBytes, and a request without protocol or host.
func ParseCredentialRequest(r io.Reader) (CredentialRequest, error) {
	var req CredentialRequest
	var rawURL string
	sc := bufio.NewScanner(io.LimitReader(r, MaxCredentialRequestBytes+1))
	sc.Buffer(make([]byte, 0, 4096), MaxCredentialRequestBytes+1)
	total := 0
	for sc.Scan() {
		line := sc.Bytes()
		total += len(line) + 1
		if total > MaxCredentialRequestBytes {
			return CredentialRequest{}, fmt.Errorf("git credential request: over %d bytes", MaxCredentialRequestBytes)
		}
		line = bytes.TrimSuffix(line, []byte("\r"))
		if len(line) == 0 {
			break
		}
		if bytes.IndexByte(line, 0) >= 0 {
			return CredentialRequest{}, errors.New("git credential request: a NUL byte in a line")
		}
		key, value, ok := strings.Cut(string(line), "=")
		if !ok || key == "" {
			return CredentialRequest{}, fmt.Errorf("git credential request: line %q is not key=value", truncate(string(line), 40))
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
			return CredentialRequest{}, fmt.Errorf("git credential request: over %d bytes", MaxCredentialRequestBytes)
		}
		return CredentialRequest{}, fmt.Errorf("git credential request: %w", err)
	}
	if rawURL != "" && (req.Protocol == "" || req.Host == "") {
		u, err := url.Parse(rawURL)
		if err != nil || u.Scheme == "" || u.Host == "" {
			return CredentialRequest{}, fmt.Errorf("git credential request: url %q is not an absolute URL", truncate(rawURL, 80))
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
		return CredentialRequest{}, errors.New("git credential request: no protocol")
	}
	if req.Host == "" {
		return CredentialRequest{}, errors.New("git credential request: no host")
	}
	return req, nil
}

// Format writes the request as git would send it.
func (r CredentialRequest) Format(w io.Writer) error {
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

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
