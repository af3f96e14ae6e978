// Package externalauth links Hangar users to their accounts at forges (GitHub, GitLab, Gitea or
// Forgejo, Bitbucket) through OAuth2 applications the admin configures, keeps their tokens sealed
// at rest, refreshes them, and hands them to git in the user's workspaces (docs/decisions.md,
// "Forge identities: external auth (issue 22)"). The decisions are pure functions of their
// inputs (the config's decoding, the refresh decision, the git host match, the sealing); Service
// does the I/O around them.
package externalauth

import (
	"bytes"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"strings"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"
	"sigs.k8s.io/yaml"
)

// Type is a kind of forge.
type Type string

// The forge types.
const (
	GitHub    Type = "github"
	GitLab    Type = "gitlab"
	Gitea     Type = "gitea" // Gitea and Forgejo
	Bitbucket Type = "bitbucket"
)

// Types lists them, in the order errors name them.
var Types = []Type{GitHub, GitLab, Gitea, Bitbucket}

// typeDefaults are what each type's forge is at its public instance (or at BaseURL): the OAuth2
// endpoints, the user API, the scopes that let git clone and push, and the user name git must send
// with an OAuth2 access token as its password.
type typeDefaults struct {
	base                   string // "": BaseURL is required
	authorize, token, user string // paths under the base URL (or full URLs)
	scopes                 []string
	gitUsername            string
	apiBase                string // the user API's base when it is not the base URL's (github.com)
	// clientAuthInBody: the client id and secret go in the token request's body (GitHub's
	// documented way), else in a Basic header (RFC 6749 2.3.1, which the others take). Said per
	// type rather than auto-detected: detection sends a request twice, a refresh token too.
	clientAuthInBody bool
}

var defaults = map[Type]typeDefaults{
	GitHub: {base: "https://github.com", authorize: "/login/oauth/authorize", token: "/login/oauth/access_token", user: "/api/v3/user",
		apiBase: "https://api.github.com", scopes: []string{"repo", "read:user", "user:email"}, gitUsername: "x-access-token", clientAuthInBody: true},
	GitLab: {base: "https://gitlab.com", authorize: "/oauth/authorize", token: "/oauth/token", user: "/api/v4/user",
		scopes: []string{"read_user", "read_repository", "write_repository"}, gitUsername: "oauth2"},
	Gitea: {authorize: "/login/oauth/authorize", token: "/login/oauth/access_token", user: "/api/v1/user",
		scopes: []string{"read:user", "write:repository"}, gitUsername: "oauth2"},
	Bitbucket: {base: "https://bitbucket.org", authorize: "/site/oauth2/authorize", token: "/site/oauth2/access_token", user: "/2.0/user",
		apiBase: "https://api.bitbucket.org", scopes: []string{"account", "repository:write"}, gitUsername: "x-token-auth"},
}

// Provider is one forge's OAuth2 application, as configured and then completed with its type's
// defaults (Decode).
type Provider struct {
	// ID names the forge in the API and the CLI (hangar external-auth link ID).
	ID   string `json:"id"`
	Type Type   `json:"type"`
	// Name is shown to users (default: the ID).
	Name     string `json:"name,omitempty"`
	ClientID string `json:"client_id"`
	// The client secret comes from a file or an environment variable, never from the config file
	// itself nor the command line; ClientSecret holds it once read (never printed).
	ClientSecretFile string `json:"client_secret_file,omitempty"`
	ClientSecretEnv  string `json:"client_secret_env,omitempty"`
	ClientSecret     string `json:"-"`
	// BaseURL is a self-hosted forge's URL (GitLab, Gitea; GitHub Enterprise); required for Gitea.
	BaseURL string `json:"base_url,omitempty"`
	// AuthorizeURL, TokenURL and UserURL default from the type and BaseURL.
	AuthorizeURL string `json:"authorize_url,omitempty"`
	TokenURL     string `json:"token_url,omitempty"`
	UserURL      string `json:"user_url,omitempty"`
	// APIURL is the root of the forge's REST API, where a workspace's definition is read from its
	// repository (https://api.github.com, <base>/api/v4, <base>/api/v1, https://api.bitbucket.org/2.0);
	// defaults from the type and BaseURL.
	APIURL string `json:"api_url,omitempty"`
	// Scopes default to the type's: enough to clone and push.
	Scopes []string `json:"scopes,omitempty"`
	// Hosts are the git hosts, or URL prefixes, whose credentials this forge gives: "github.com",
	// "git.example.com/team", "http://127.0.0.1:3000" (without a scheme: https only), and the SSH
	// hosts whose remotes it serves: "ssh://github.com", "ssh://git.example.com:2222" (the user's
	// git SSH key signs for them). Default: the base URL.
	Hosts []string `json:"hosts,omitempty"`
	// SSHKnownHosts is known_hosts lines (ssh's format) with the host keys of this forge's ssh://
	// hosts, one at least for each: the clone at a workspace's start and git's ssh in it check the
	// forge's key against them, never trusting whatever key answers first.
	SSHKnownHosts string `json:"ssh_known_hosts,omitempty"`
	// AllowHTTPHosts lets hosts name http:// URLs beyond loopback: a forge that the workspaces
	// reach on a private network without TLS (the local test cluster's namespace). git's tokens
	// then cross that network in the clear, so it is never the default.
	AllowHTTPHosts bool `json:"allow_http_hosts,omitempty"`

	hosts []hostPrefix
}

// clientAuthInBody tells how this forge takes the client's credentials at its token endpoint.
func (p Provider) clientAuthInBody() bool { return defaults[p.Type].clientAuthInBody }

// GitUsername is the user name git sends with an access token of this forge as its password.
func (p Provider) GitUsername() string { return defaults[p.Type].gitUsername }

// Config is the --external-auth-config file: YAML or JSON.
type Config struct {
	Providers []Provider `json:"providers"`
}

// maxConfigBytes bounds the config file.
const maxConfigBytes = 1 << 20

var idPattern = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,30}[a-z0-9])?$`)

// Env and ReadFile are how Decode reads client secrets (os.LookupEnv and os.ReadFile outside tests).
type (
	Env      func(string) (string, bool)
	ReadFile func(string) ([]byte, error)
)

// Decode reads a config (YAML or JSON), fills each forge's defaults, reads its client secret and
// checks everything; an error names the entry and the field.
func Decode(data []byte, env Env, readFile ReadFile) ([]Provider, error) {
	if len(data) > maxConfigBytes {
		return nil, fmt.Errorf("external auth config: %d bytes, at most %d", len(data), maxConfigBytes)
	}
	var c Config
	if err := yaml.UnmarshalStrict(data, &c); err != nil {
		return nil, fmt.Errorf("external auth config: %w", err)
	}
	if len(c.Providers) == 0 {
		return nil, errors.New("external auth config: providers: want at least one forge")
	}
	seen := map[string]bool{}
	hostOwner := map[hostPrefix]string{}
	for i := range c.Providers {
		p := &c.Providers[i]
		where := fmt.Sprintf("providers[%d]", i)
		if p.ID != "" {
			where = fmt.Sprintf("providers[%d] (%s)", i, p.ID)
		}
		if err := p.complete(env, readFile); err != nil {
			return nil, fmt.Errorf("external auth config: %s: %w", where, err)
		}
		if seen[p.ID] {
			return nil, fmt.Errorf("external auth config: %s: id: %q is used twice", where, p.ID)
		}
		seen[p.ID] = true
		for _, h := range p.hosts {
			if other, ok := hostOwner[h]; ok {
				return nil, fmt.Errorf("external auth config: %s: hosts: %s is served by %s already", where, h, other)
			}
			hostOwner[h] = p.ID
		}
	}
	return c.Providers, nil
}

// complete checks p and fills its defaults.
func (p *Provider) complete(env Env, readFile ReadFile) error {
	if !idPattern.MatchString(p.ID) {
		return fmt.Errorf("id: want 1 to 32 lower-case letters, digits and dashes (such as github or gitlab-work), got %q", p.ID)
	}
	d, ok := defaults[p.Type]
	if !ok {
		return fmt.Errorf("type: want one of %s, got %q", joinTypes(), p.Type)
	}
	if p.Name == "" {
		p.Name = p.ID
	}
	if len(p.Name) > 64 {
		return fmt.Errorf("name: at most 64 characters, got %d", len(p.Name))
	}
	if p.ClientID == "" {
		return errors.New("client_id: required (the OAuth2 application's client id)")
	}
	secret, err := p.secret(env, readFile)
	if err != nil {
		return err
	}
	p.ClientSecret = secret
	base := strings.TrimSuffix(p.BaseURL, "/")
	if base == "" {
		if d.base == "" {
			return fmt.Errorf("base_url: required for type %s (the forge's URL, such as https://gitea.example.com)", p.Type)
		}
		base = d.base
	} else if err := checkURL(base); err != nil {
		return fmt.Errorf("base_url: %w", err)
	}
	p.BaseURL = base
	apiBase := base
	if d.apiBase != "" && base == d.base {
		apiBase = d.apiBase
	}
	for _, u := range []struct {
		field string
		v     *string
		def   string
	}{{"authorize_url", &p.AuthorizeURL, base + d.authorize}, {"token_url", &p.TokenURL, base + d.token}, {"user_url", &p.UserURL, userURL(p.Type, apiBase, d)},
		{"api_url", &p.APIURL, restAPI(p.Type, base, apiBase, d)}} {
		if *u.v == "" {
			*u.v = u.def
		} else if err := checkURL(*u.v); err != nil {
			return fmt.Errorf("%s: %w", u.field, err)
		}
	}
	if len(p.Scopes) == 0 {
		p.Scopes = slices.Clone(d.scopes)
	}
	for _, sc := range p.Scopes {
		if !scopeToken(sc) {
			return fmt.Errorf("scopes: %q is not a scope (printable characters but space, \" and \\)", sc)
		}
	}
	if len(p.Hosts) == 0 {
		p.Hosts = []string{base}
	}
	p.hosts = nil
	for _, h := range p.Hosts {
		hp, err := parseHost(h, p.AllowHTTPHosts)
		if err != nil {
			return fmt.Errorf("hosts: %w", err)
		}
		p.hosts = append(p.hosts, hp)
	}
	return p.checkKnownHosts()
}

// checkKnownHosts checks that ssh_known_hosts parses and names every ssh:// host of p (by its
// plain name: a hashed line names no host that can be checked here).
func (p *Provider) checkKnownHosts() error {
	named := map[string]bool{}
	rest := []byte(p.SSHKnownHosts)
	for line := 1; len(bytes.TrimSpace(rest)) > 0; line++ {
		first, after, _ := bytes.Cut(rest, []byte("\n"))
		if t := bytes.TrimSpace(first); len(t) > 0 && t[0] != '#' {
			marker, hosts, _, _, _, err := ssh.ParseKnownHosts(first)
			if err != nil {
				return fmt.Errorf("ssh_known_hosts: line %d: %v (want ssh's known_hosts format: HOST KEYTYPE BASE64)", line, err)
			}
			if marker != "" {
				// OpenSSH in the workspace would honour it, the clone at the start would not
				// (gitcred.HostKeyCheck): the two must check the same keys.
				return fmt.Errorf("ssh_known_hosts: line %d: the @%s marker is not supported: list each host's keys as HOST KEYTYPE BASE64 lines (a revoked key: remove its line)", line, marker)
			}
			for _, h := range hosts {
				named[h] = true
			}
		}
		rest = after
	}
	serves := false
	for _, h := range p.hosts {
		if h.scheme != "ssh" {
			continue
		}
		serves = true
		if !named[knownhosts.Normalize(h.host)] {
			return fmt.Errorf("ssh_known_hosts: no key for %s (a line `%s KEYTYPE BASE64`, from the forge's published keys or ssh-keyscan on a trusted network): the host's key is checked, never trusted on first use",
				h, knownhosts.Normalize(h.host))
		}
	}
	if !serves && strings.TrimSpace(p.SSHKnownHosts) != "" {
		return errors.New("ssh_known_hosts: given, but hosts names no ssh:// host for it")
	}
	return nil
}

// KnownHosts is the known_hosts lines of every forge that serves SSH hosts: what a workspace
// checks the forges' SSH host keys against.
func KnownHosts(providers []Provider) string {
	var b strings.Builder
	for _, p := range providers {
		if s := strings.TrimSpace(p.SSHKnownHosts); s != "" {
			b.WriteString(s + "\n")
		}
	}
	return b.String()
}

// userURL is the type's user API: api.github.com/user at github.com, <base>/api/v3/user on GitHub
// Enterprise; api.bitbucket.org/2.0/user.
func userURL(t Type, apiBase string, d typeDefaults) string {
	if t == GitHub && apiBase == d.apiBase {
		return apiBase + "/user"
	}
	return apiBase + d.user
}

// restAPI is the type's REST API root: api.github.com (or <base>/api/v3 on GitHub Enterprise),
// <base>/api/v4 (GitLab), <base>/api/v1 (Gitea, Forgejo), api.bitbucket.org/2.0.
func restAPI(t Type, base, apiBase string, d typeDefaults) string {
	switch t {
	case GitHub:
		if apiBase == d.apiBase {
			return apiBase
		}
		return base + "/api/v3"
	case GitLab:
		return base + "/api/v4"
	case Gitea:
		return base + "/api/v1"
	default: // Bitbucket Cloud
		return apiBase + "/2.0"
	}
}

func (p *Provider) secret(env Env, readFile ReadFile) (string, error) {
	switch {
	case p.ClientSecretFile != "" && p.ClientSecretEnv != "":
		return "", errors.New("client_secret_file: give the client secret once: in a file or in an environment variable (client_secret_env)")
	case p.ClientSecretFile != "":
		b, err := readFile(p.ClientSecretFile)
		if err != nil {
			return "", fmt.Errorf("client_secret_file: %w", err)
		}
		if s := strings.TrimSpace(string(b)); s != "" {
			return s, nil
		}
		return "", fmt.Errorf("client_secret_file: %s is empty", p.ClientSecretFile)
	case p.ClientSecretEnv != "":
		if s, ok := env(p.ClientSecretEnv); ok && strings.TrimSpace(s) != "" {
			return strings.TrimSpace(s), nil
		}
		return "", fmt.Errorf("client_secret_env: the environment variable %s is not set", p.ClientSecretEnv)
	}
	return "", errors.New("client_secret_file: required, or client_secret_env (the OAuth2 application's client secret; never in this file)")
}

// checkURL accepts https URLs, and http ones on a loopback address (a test forge).
func checkURL(s string) error {
	u, err := url.Parse(s)
	if err != nil || u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" ||
		!(u.Scheme == "https" || u.Scheme == "http" && loopback(u.Hostname())) {
		return fmt.Errorf("want an https:// URL without query (http:// only on a loopback address), got %q", s)
	}
	return nil
}

func loopback(host string) bool {
	return host == "localhost" || host == "127.0.0.1" || host == "::1" || strings.HasPrefix(host, "127.")
}

func joinTypes() string {
	var s []string
	for _, t := range Types {
		s = append(s, string(t))
	}
	return strings.Join(s, ", ")
}

// scopeToken is RFC 6749's scope-token: %x21 / %x23-5B / %x5D-7E.
func scopeToken(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x21 || c > 0x7e || c == '"' || c == '\\' {
			return false
		}
	}
	return s != ""
}
