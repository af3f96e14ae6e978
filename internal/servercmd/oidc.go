package servercmd

import (
	"fmt"
	"net"
	neturl "net/url"
	"os"
	"strings"

	"github.com/hangar-dev/hangar/internal/server"
)

// OIDCConfig is the server's options for sign-in with OIDC (docs/decisions.md, "Sign-in with
// OIDC"); all empty: none.
type OIDCConfig struct {
	IssuerURL, ClientID string
	// ClientSecret comes from --oidc-client-secret, HANGAR_OIDC_CLIENT_SECRET or the file
	// ClientSecretFile names: one of them. It is never printed.
	ClientSecret, ClientSecretFile string
	Scopes, Name                   string
	AdminGroup, GroupsClaim        string
	AdminEmails, AllowedDomains    string
	// ProviderLogout is "false" to keep sign-out from going on to the provider's
	// end_session_endpoint (--oidc-provider-logout).
	ProviderLogout string
}

func (c OIDCConfig) empty() bool {
	return c == OIDCConfig{GroupsClaim: c.GroupsClaim, Scopes: c.Scopes, ProviderLogout: c.ProviderLogout}
}

// OIDCOptions reads the OIDC options (nil when none is set): the provider's URL, the client's id
// and secret are required together; redirects come back to <accessURL>/oidc/callback.
func OIDCOptions(c OIDCConfig, accessURL string) (*server.OIDCOptions, error) {
	if c.empty() {
		return nil, nil
	}
	if c.IssuerURL == "" {
		return nil, fmt.Errorf("--oidc-issuer-url: required with the other --oidc-* options (the provider's issuer URL, such as https://accounts.example.com)")
	}
	u, err := neturl.Parse(c.IssuerURL)
	if err != nil || u.Host == "" || u.RawQuery != "" || u.Fragment != "" || u.User != nil || !(u.Scheme == "https" || u.Scheme == "http" && isLoopback(u.Hostname())) {
		return nil, fmt.Errorf("--oidc-issuer-url: want the provider's https:// issuer URL (http:// only on a loopback address), got %q", c.IssuerURL)
	}
	if c.ClientID == "" {
		return nil, fmt.Errorf("--oidc-client-id: required with --oidc-issuer-url (the client id the provider gave Hangar)")
	}
	secret, err := c.secret()
	if err != nil {
		return nil, err
	}
	opts := &server.OIDCOptions{IssuerURL: c.IssuerURL, ClientID: c.ClientID, ClientSecret: secret, Name: strings.TrimSpace(c.Name),
		RedirectURL: strings.TrimSuffix(accessURL, "/") + server.OIDCCallbackPath, AdminGroup: strings.TrimSpace(c.AdminGroup),
		GroupsClaim: strings.TrimSpace(c.GroupsClaim), NoProviderLogout: c.ProviderLogout == "false"}
	if len(opts.Name) > 64 {
		return nil, fmt.Errorf("--oidc-name: at most 64 characters, got %d", len(opts.Name))
	}
	for _, sc := range fields(c.Scopes) {
		if !scopeToken(sc) {
			return nil, fmt.Errorf("--oidc-scopes: %q is not a scope (printable characters but space, \" and \\)", sc)
		}
		opts.Scopes = append(opts.Scopes, sc)
	}
	if opts.GroupsClaim == "" || strings.ContainsAny(opts.GroupsClaim, " \t,") {
		return nil, fmt.Errorf("--oidc-groups-claim: want a claim name such as groups, got %q", c.GroupsClaim)
	}
	for _, e := range fields(c.AdminEmails) {
		if i := strings.LastIndexByte(e, '@'); i <= 0 || i == len(e)-1 {
			return nil, fmt.Errorf("--oidc-admin-emails: %q is not an email address", e)
		}
		opts.AdminEmails = append(opts.AdminEmails, strings.ToLower(e))
	}
	for _, d := range fields(c.AllowedDomains) {
		d = strings.ToLower(strings.TrimPrefix(d, "@"))
		if !dnsName.MatchString(d) {
			return nil, fmt.Errorf("--oidc-allowed-domains: %q is not a domain such as example.com", d)
		}
		opts.AllowedDomains = append(opts.AllowedDomains, d)
	}
	return opts, nil
}

// secret is the client secret from exactly one of its three sources.
func (c OIDCConfig) secret() (string, error) {
	switch {
	case c.ClientSecret != "" && c.ClientSecretFile != "":
		return "", fmt.Errorf("--oidc-client-secret-file: give the client secret once: in a file, or in --oidc-client-secret / HANGAR_OIDC_CLIENT_SECRET")
	case c.ClientSecret != "":
		return c.ClientSecret, nil
	case c.ClientSecretFile != "":
		b, err := os.ReadFile(c.ClientSecretFile)
		if err != nil {
			return "", fmt.Errorf("--oidc-client-secret-file: %w", err)
		}
		s := strings.TrimSpace(string(b))
		if s == "" {
			return "", fmt.Errorf("--oidc-client-secret-file: %s is empty", c.ClientSecretFile)
		}
		return s, nil
	}
	return "", fmt.Errorf("--oidc-client-secret-file: required with --oidc-issuer-url (or HANGAR_OIDC_CLIENT_SECRET): the client secret the provider gave Hangar")
}

// fields splits a list on commas and white space.
func fields(s string) []string {
	return strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == ' ' || r == '\t' || r == '\n' })
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

func isLoopback(host string) bool {
	ip := net.ParseIP(host)
	return host == "localhost" || ip != nil && ip.IsLoopback()
}
