package externalauth

import (
	"bytes"
	"errors"
	"os"
	"strings"
	"testing"
)

func env(m map[string]string) Env {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

func files(m map[string]string) ReadFile {
	return func(p string) ([]byte, error) {
		if v, ok := m[p]; ok {
			return []byte(v), nil
		}
		return nil, os.ErrNotExist
	}
}

func TestDecodeDefaultsPerType(t *testing.T) {
	cfg := `
providers:
  - {id: github, type: github, client_id: gh, client_secret_env: GH_SECRET}
  - {id: gitlab, type: gitlab, client_id: gl, client_secret_file: /s/gl}
  - {id: work, type: gitea, client_id: gt, client_secret_file: /s/gt, base_url: "https://git.example.com/"}
  - {id: bb, type: bitbucket, client_id: bb, client_secret_env: BB, scopes: [repository]}
  - {id: ghe, type: github, client_id: e, client_secret_env: BB, base_url: "https://ghe.example.com", hosts: [ghe.example.com/team]}
`
	ps, err := Decode([]byte(cfg), env(map[string]string{"GH_SECRET": "s1\n", "BB": "s2"}), files(map[string]string{"/s/gl": "s3", "/s/gt": " s4 "}))
	if err != nil {
		t.Fatal(err)
	}
	want := []struct{ authorize, token, user, api, secret, git, scopes string }{
		{"https://github.com/login/oauth/authorize", "https://github.com/login/oauth/access_token", "https://api.github.com/user", "https://api.github.com", "s1", "x-access-token", "repo read:user user:email"},
		{"https://gitlab.com/oauth/authorize", "https://gitlab.com/oauth/token", "https://gitlab.com/api/v4/user", "https://gitlab.com/api/v4", "s3", "oauth2", "read_user read_repository write_repository"},
		{"https://git.example.com/login/oauth/authorize", "https://git.example.com/login/oauth/access_token", "https://git.example.com/api/v1/user", "https://git.example.com/api/v1", "s4", "oauth2", "read:user write:repository"},
		{"https://bitbucket.org/site/oauth2/authorize", "https://bitbucket.org/site/oauth2/access_token", "https://api.bitbucket.org/2.0/user", "https://api.bitbucket.org/2.0", "s2", "x-token-auth", "repository"},
		{"https://ghe.example.com/login/oauth/authorize", "https://ghe.example.com/login/oauth/access_token", "https://ghe.example.com/api/v3/user", "https://ghe.example.com/api/v3", "s2", "x-access-token", "repo read:user user:email"},
	}
	for i, w := range want {
		p := ps[i]
		if p.AuthorizeURL != w.authorize || p.TokenURL != w.token || p.UserURL != w.user || p.APIURL != w.api || p.ClientSecret != w.secret ||
			p.GitUsername() != w.git || strings.Join(p.Scopes, " ") != w.scopes || p.clientAuthInBody() != (p.Type == GitHub) {
			t.Errorf("%s: %+v\nwant %+v", p.ID, p, w)
		}
	}
}

// TestDecodeErrorsNameTheField: each error names the entry and the field.
func TestDecodeErrorsNameTheField(t *testing.T) {
	secret := "client_secret_env: S, "
	for _, tc := range []struct{ cfg, want string }{
		{`providers: []`, "providers: want at least one forge"},
		{`{providers: [{id: "Bad_ID", type: github, client_id: x}]}`, `providers[0] (Bad_ID): id: want 1 to 32`},
		{`{providers: [{id: a, type: svn, client_id: x}]}`, `providers[0] (a): type: want one of github, gitlab, gitea, bitbucket, got "svn"`},
		{`{providers: [{id: a, type: github, ` + secret + `}]}`, "providers[0] (a): client_id: required"},
		{`{providers: [{id: a, type: github, client_id: x}]}`, "providers[0] (a): client_secret_file: required"},
		{`{providers: [{id: a, type: github, client_id: x, client_secret_env: NOPE}]}`, "providers[0] (a): client_secret_env: the environment variable NOPE is not set"},
		{`{providers: [{id: a, type: github, client_id: x, client_secret_file: /none}]}`, "providers[0] (a): client_secret_file: file does not exist"},
		{`{providers: [{id: a, type: github, client_id: x, client_secret_file: /f, client_secret_env: S}]}`, "providers[0] (a): client_secret_file: give the client secret once"},
		{`{providers: [{id: a, type: gitea, client_id: x, ` + secret + `}]}`, "providers[0] (a): base_url: required for type gitea"},
		{`{providers: [{id: a, type: gitea, client_id: x, ` + secret + `base_url: "http://git.example.com"}]}`, "providers[0] (a): base_url: want an https:// URL"},
		{`{providers: [{id: a, type: github, client_id: x, ` + secret + `token_url: "ftp://x"}]}`, "providers[0] (a): token_url: want an https:// URL"},
		{`{providers: [{id: a, type: github, client_id: x, ` + secret + `scopes: ["a b"]}]}`, `providers[0] (a): scopes: "a b" is not a scope`},
		{`{providers: [{id: a, type: github, client_id: x, ` + secret + `hosts: ["https://u:p@h"]}]}`, `providers[0] (a): hosts: "https://u:p@h"`},
		{`{providers: [{id: a, type: gitea, client_id: x, ` + secret + `base_url: "https://git.example.com", hosts: ["http://10.99.0.2:3000"]}]}`, `providers[0] (a): hosts: "http://10.99.0.2:3000": want an https:// URL without query (http:// only on a loopback address), got "http://10.99.0.2:3000" (or set allow_http_hosts: true`},
		{`{providers: [{id: a, type: gitea, client_id: x, ` + secret + `base_url: "https://git.example.com", allow_http_hosts: true, hosts: ["http://u:p@10.99.0.2:3000"]}]}`, `providers[0] (a): hosts: "http://u:p@10.99.0.2:3000"`},
		{`{providers: [{id: a, type: github, client_id: x, ` + secret + `}, {id: a, type: gitlab, client_id: y, ` + secret + `}]}`, `providers[1] (a): id: "a" is used twice`},
		{`{providers: [{id: a, type: github, client_id: x, ` + secret + `}, {id: b, type: github, client_id: y, ` + secret + `}]}`, `providers[1] (b): hosts: github.com is served by a already`},
		{`{providers: [{id: a, type: github, client_id: x, ` + secret + `client_secret: inline}]}`, `unknown field "client_secret"`},
		{`{providers: [{id: a, type: github, client_id: x, ` + secret + `hosts: [github.com, "ssh://github.com"]}]}`, `providers[0] (a): ssh_known_hosts: no key for ssh://github.com (a line ` + "`github.com KEYTYPE BASE64`"},
		{`{providers: [{id: a, type: github, client_id: x, ` + secret + `hosts: ["ssh://git.example.com:2222"], ssh_known_hosts: "` + knownGitHub + `"}]}`, `ssh_known_hosts: no key for ssh://git.example.com:2222 (a line ` + "`[git.example.com]:2222 KEYTYPE"},
		{`{providers: [{id: a, type: github, client_id: x, ` + secret + `hosts: ["ssh://github.com"], ssh_known_hosts: "github.com ssh-ed25519 !!"}]}`, `providers[0] (a): ssh_known_hosts: line 1: `},
		{`{providers: [{id: a, type: github, client_id: x, ` + secret + `ssh_known_hosts: "` + knownGitHub + `"}]}`, `providers[0] (a): ssh_known_hosts: given, but hosts names no ssh:// host`},
		{`{providers: [{id: a, type: github, client_id: x, ` + secret + `hosts: ["ssh://github.com"], ssh_known_hosts: "` + knownGitHub + `\n@revoked ` + knownGitHub + `"}]}`, `providers[0] (a): ssh_known_hosts: line 2: the @revoked marker is not supported`},
		{`{providers: [{id: a, type: github, client_id: x, ` + secret + `hosts: ["ssh://github.com"], ssh_known_hosts: "` + knownGitHub + `\n@cert-authority ` + knownGitHub + `"}]}`, `providers[0] (a): ssh_known_hosts: line 2: the @cert-authority marker is not supported`},
		{`{providers: [{id: a, type: github, client_id: x, ` + secret + `hosts: ["ssh://git@github.com"]}]}`, `providers[0] (a): hosts: "ssh://git@github.com": want an SSH host`},
	} {
		_, err := Decode([]byte(tc.cfg), env(map[string]string{"S": "s"}), files(nil))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Decode(%s) = %v\nwant an error with %q", tc.cfg, err, tc.want)
		}
	}
}

// knownGitHub is GitHub's published ed25519 host key as a known_hosts line.
const knownGitHub = "github.com ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl"

func TestMatchHosts(t *testing.T) {
	ps, err := Decode([]byte(`
providers:
  - {id: gh, type: github, client_id: x, client_secret_env: S}
  - {id: team, type: gitea, client_id: y, client_secret_env: S, base_url: "https://git.example.com", hosts: ["git.example.com/team"]}
  - {id: all, type: gitea, client_id: z, client_secret_env: S, base_url: "https://git.example.com"}
  - {id: local, type: gitea, client_id: w, client_secret_env: S, base_url: "http://127.0.0.1:3000"}
  - {id: inside, type: gitea, client_id: v, client_secret_env: S, base_url: "http://127.0.0.1:3002", allow_http_hosts: true, hosts: ["http://10.99.0.2:3002", "ssh://10.99.0.2:2222"],
     ssh_known_hosts: "# the test forge\n[10.99.0.2]:2222 ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl\n"}
  - {id: ghssh, type: github, client_id: u, client_secret_env: S, base_url: "https://ghe.example.com", hosts: ["ssh://GHE.example.com:22/team"], ssh_known_hosts: "ghe.example.com ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl"}
`), env(map[string]string{"S": "s"}), files(nil))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		req  CredentialRequest
		want string // "" none
	}{
		{CredentialRequest{Protocol: "https", Host: "github.com", Path: "o/r.git"}, "gh"},
		{CredentialRequest{Protocol: "https", Host: "GitHub.com"}, "gh"},
		{CredentialRequest{Protocol: "http", Host: "github.com"}, ""}, // no scheme in the entry: https only
		{CredentialRequest{Protocol: "https", Host: "github.com.evil.example"}, ""},
		{CredentialRequest{Protocol: "https", Host: "git.example.com", Path: "team/app.git"}, "team"},
		{CredentialRequest{Protocol: "https", Host: "git.example.com", Path: "/team"}, "team"},
		{CredentialRequest{Protocol: "https", Host: "git.example.com", Path: "teammate/app.git"}, "all"},
		{CredentialRequest{Protocol: "https", Host: "git.example.com"}, "all"},
		{CredentialRequest{Protocol: "http", Host: "127.0.0.1:3000", Path: "a/b"}, "local"},
		{CredentialRequest{Protocol: "https", Host: "127.0.0.1:3000"}, ""},
		{CredentialRequest{Protocol: "http", Host: "127.0.0.1:3001"}, ""},
		{CredentialRequest{Protocol: "http", Host: "10.99.0.2:3002", Path: "alice/app.git"}, "inside"}, // allow_http_hosts
		{CredentialRequest{Protocol: "https", Host: "10.99.0.2:3002"}, ""},
		// SSH remotes: only an ssh:// entry serves them, port 22 implied either way.
		{CredentialRequest{Protocol: "ssh", Host: "10.99.0.2:2222", Path: "alice/app.git"}, "inside"},
		{CredentialRequest{Protocol: "ssh", Host: "10.99.0.2:3002"}, ""},
		{CredentialRequest{Protocol: "ssh", Host: "github.com", Path: "o/r"}, ""},
		{CredentialRequest{Protocol: "ssh", Host: "ghe.example.com", Path: "team/r"}, "ghssh"},
		{CredentialRequest{Protocol: "ssh", Host: "ghe.example.com:22", Path: "team/r"}, "ghssh"},
		{CredentialRequest{Protocol: "ssh", Host: "ghe.example.com", Path: "other/r"}, ""},
		{CredentialRequest{Protocol: "https", Host: "ghe.example.com", Path: "team/r"}, ""},
	} {
		p, ok := Match(ps, tc.req)
		if got := map[bool]string{true: p.ID}[ok]; got != tc.want {
			t.Errorf("Match(%+v) = %q, want %q", tc.req, got, tc.want)
		}
	}
}

// KnownHosts gathers the forges' known_hosts lines, for the workspaces.
func TestKnownHostsOfTheForges(t *testing.T) {
	ps, err := Decode([]byte(`
providers:
  - {id: gh, type: github, client_id: x, client_secret_env: S}
  - {id: ssh, type: github, client_id: y, client_secret_env: S, hosts: ["ssh://github.com"], ssh_known_hosts: "`+knownGitHub+`"}
`), env(map[string]string{"S": "s"}), files(nil))
	if err != nil {
		t.Fatal(err)
	}
	if got := KnownHosts(ps); got != knownGitHub+"\n" {
		t.Fatalf("KnownHosts = %q", got)
	}
}

func TestDecodeAccount(t *testing.T) {
	for _, tc := range []struct{ body, login, email string }{
		{`{"login":"octo","email":"o@example.com","id":1}`, "octo", "o@example.com"},                 // GitHub, Gitea
		{`{"username":"gl-user","email":"g@example.com"}`, "gl-user", "g@example.com"},               // GitLab
		{`{"username":"bb","nickname":"B"}`, "bb", ""},                                               // Bitbucket
		{`{"sub":"x","preferred_username":"oidc","email":"p@example.com"}`, "oidc", "p@example.com"}, // OpenID userinfo
	} {
		l, e, err := DecodeAccount([]byte(tc.body))
		if err != nil || l != tc.login || e != tc.email {
			t.Errorf("DecodeAccount(%s) = %q, %q, %v", tc.body, l, e, err)
		}
	}
	for _, body := range []string{`[]`, `{"id":1}`, `not json`} {
		if _, _, err := DecodeAccount([]byte(body)); !errors.Is(err, ErrForge) {
			t.Errorf("DecodeAccount(%s) = %v, want ErrForge", body, err)
		}
	}
}

func FuzzDecode(f *testing.F) {
	f.Add([]byte(`{providers: [{id: a, type: github, client_id: x, client_secret_env: S}]}`))
	f.Add([]byte("providers:\n  - id: w\n    type: gitea\n    client_id: y\n    client_secret_file: /f\n    base_url: https://git.example.com\n    hosts: [git.example.com/team, \"http://127.0.0.1:3000\"]\n"))
	f.Add([]byte(`{"providers":[{"id":"b","type":"bitbucket","client_id":"c","client_secret_env":"S","scopes":["x"]}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		ps, err := Decode(data, env(map[string]string{"S": "s"}), files(map[string]string{"/f": "s"}))
		if err != nil {
			return
		}
		for _, p := range ps {
			if p.ClientSecret == "" || p.AuthorizeURL == "" || p.TokenURL == "" || p.UserURL == "" || len(p.hosts) == 0 || p.GitUsername() == "" {
				t.Fatalf("accepted an incomplete forge: %+v", p)
			}
			for _, h := range p.hosts {
				// Every accepted host entry is served by its forge.
				req := CredentialRequest{Protocol: map[string]string{"": "https"}[h.scheme] + h.scheme, Host: h.host, Path: h.path}
				if got, ok := Match(ps, req); !ok || got.ID != p.ID && len(got.hosts) == 0 {
					t.Fatalf("host %s of %s: Match = %v, %v", h, p.ID, got.ID, ok)
				}
			}
		}
	})
}

func FuzzDecodeAccount(f *testing.F) {
	f.Add([]byte(`{"login":"octo","email":"o@example.com"}`))
	f.Add([]byte(`{"username":""}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		l, _, err := DecodeAccount(body)
		if err == nil && (l == "" || len(l) > 200) {
			t.Fatalf("DecodeAccount(%q) accepted login %q", body, l)
		}
	})
}

// DerivedKeys: one key per key of the file, the current first, each its own and the purpose's
// own, the same for every replica given the same file.
func TestDerivedKeys(t *testing.T) {
	file := "new:" + strings.Repeat("A", 43) + "=\nold:" + strings.Repeat("B", 43) + "=\n"
	k, err := ParseKeys([]byte(file))
	if err != nil {
		t.Fatal(err)
	}
	again, _ := ParseKeys([]byte(file))
	got, same, other := k.DerivedKeys("p"), again.DerivedKeys("p"), k.DerivedKeys("q")
	if len(got) != 2 || len(got[0]) != 32 || bytes.Equal(got[0], got[1]) || bytes.Equal(got[0], other[0]) || !bytes.Equal(got[0], same[0]) || !bytes.Equal(got[1], same[1]) {
		t.Fatalf("derived keys %x, again %x, other purpose %x", got, same, other)
	}
	swapped, _ := ParseKeys([]byte("old:" + strings.Repeat("B", 43) + "=\n"))
	if !bytes.Equal(swapped.DerivedKeys("p")[0], got[1]) {
		t.Fatal("a key's derived key depends on its place in the file")
	}
}
