package externalauth

import (
	"fmt"
	"net/url"
	"strings"
)

// hostPrefix is one entry of a forge's hosts: a scheme ("" means https), a host (with its port,
// lower case) and a path prefix ("" for the whole host).
type hostPrefix struct {
	scheme, host, path string
}

func (h hostPrefix) String() string {
	s := h.host
	if h.path != "" {
		s += "/" + h.path
	}
	if h.scheme != "" {
		s = h.scheme + "://" + s
	}
	return s
}

// parseHost reads "host[:port][/path]" or "scheme://host[:port][/path]". An http:// URL is
// accepted on loopback, or anywhere with allowHTTP (allow_http_hosts); an ssh:// one anywhere (SSH
// checks the host's key, against the forge's ssh_known_hosts), its port 22 implied.
func parseHost(s string, allowHTTP bool) (hostPrefix, error) {
	raw := s
	if strings.HasPrefix(strings.ToLower(s), "ssh://") {
		u, err := url.Parse(s)
		if err != nil || u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" || u.Port() == "0" {
			return hostPrefix{}, fmt.Errorf("%q: want an SSH host such as ssh://github.com or ssh://git.example.com:2222 (no user)", raw)
		}
		return hostPrefix{scheme: "ssh", host: sshHost(u.Host), path: strings.Trim(u.Path, "/")}, nil
	}
	if !strings.Contains(s, "://") {
		s = "https://" + s
	} else if allowHTTP && strings.HasPrefix(strings.ToLower(s), "http://") {
		if err := checkURL("https://" + s[len("http://"):]); err != nil {
			return hostPrefix{}, fmt.Errorf("%q: %w", raw, err)
		}
	} else if err := checkURL(s); err != nil {
		return hostPrefix{}, fmt.Errorf("%q: %w (or set allow_http_hosts: true for a forge on a private network without TLS)", raw, err)
	}
	u, err := url.Parse(s)
	if err != nil || u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return hostPrefix{}, fmt.Errorf("%q: want a host such as github.com, or a URL prefix such as https://git.example.com/team", raw)
	}
	h := hostPrefix{host: strings.ToLower(u.Host), path: strings.Trim(u.Path, "/")}
	if strings.Contains(raw, "://") {
		h.scheme = u.Scheme
	}
	if h.scheme == "https" {
		h.scheme = ""
	}
	return h, nil
}

// sshHost is an SSH host as hosts entries hold it: lower case, without the default port 22.
func sshHost(h string) string {
	return strings.TrimSuffix(strings.ToLower(h), ":22")
}

// CredentialRequest is what git asks a credential helper (git-credential(1)): the protocol, the
// host (with its port) and, with credential.useHttpPath, the repository's path.
type CredentialRequest struct {
	Protocol string `json:"protocol"`
	Host     string `json:"host"`
	Path     string `json:"path,omitempty"`
}

// Match returns the forge that serves the repository req names (Protocol "ssh" for an SSH remote): the entry of the longest path
// prefix that matches req's host and path. ok is false when none does.
func Match(providers []Provider, req CredentialRequest) (Provider, bool) {
	proto := strings.ToLower(req.Protocol)
	if proto == "https" {
		proto = ""
	}
	host, path := strings.ToLower(req.Host), strings.Trim(req.Path, "/")
	if proto == "ssh" {
		host = sshHost(host)
	}
	best, bestLen, found := Provider{}, -1, false
	for _, p := range providers {
		for _, h := range p.hosts {
			if h.scheme != proto || h.host != host {
				continue
			}
			if h.path != "" && path != h.path && !strings.HasPrefix(path, h.path+"/") {
				continue
			}
			if len(h.path) > bestLen {
				best, bestLen, found = p, len(h.path), true
			}
		}
	}
	return best, found
}
