package forgetest

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
	"unicode/utf8"
)

// FuzzParseGitCommand: what an SSH client asks to run never names a repository outside the
// forge's tree, nor another program.
func FuzzParseGitCommand(f *testing.F) {
	for _, s := range []string{"git-upload-pack 'alice/app.git'", "git-receive-pack '/alice/app.git'", "git upload-pack alice/app",
		"git-upload-pack '../../etc.git'", "sh -c id", "git-upload-pack 'a/b/c.git'", `git-upload-pack "a/b"`, "git-upload-pack ''"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, command string) {
		service, owner, name, err := parseGitCommand(command)
		if err != nil {
			return
		}
		if service != "git-upload-pack" && service != "git-receive-pack" {
			t.Fatalf("%q: service %q", command, service)
		}
		if !validName(owner) || !validName(name) || strings.Contains(owner+name, "/") {
			t.Fatalf("%q: repository %q/%q", command, owner, name)
		}
	})
}

// FuzzParseRepoPath: an HTTP path names a repository by two valid names, and what follows never
// climbs out of it.
func FuzzParseRepoPath(f *testing.F) {
	for _, s := range []string{"/alice/app.git/info/refs", "/alice/app/git-upload-pack", "/alice/../x/info/refs", "/a/b.git/objects/../../c",
		"//x", "/alice/app.git/"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, p string) {
		owner, name, rest, ok := parseRepoPath(p)
		if !ok {
			return
		}
		if !validName(owner) || !validName(name) || rest == "" || strings.Contains(rest, "..") {
			t.Fatalf("%q: %q %q %q", p, owner, name, rest)
		}
	})
}

// FuzzTokenForm: the token endpoint's body (a form or JSON) is read within its bound or refused.
func FuzzTokenForm(f *testing.F) {
	f.Add("application/x-www-form-urlencoded", "grant_type=authorization_code&code=x")
	f.Add("application/json", `{"grant_type":"refresh_token","refresh_token":"x","n":1}`)
	f.Add("application/json", `[`)
	f.Fuzz(func(t *testing.T, ct, body string) {
		r, err := http.NewRequest("POST", "/login/oauth/access_token", strings.NewReader(body))
		if err != nil {
			return
		}
		r.Header.Set("Content-Type", ct)
		v, err := readTokenForm(r)
		if err != nil {
			return
		}
		for k := range v {
			// JSON's decoder makes each byte of invalid UTF-8 a U+FFFD (3 bytes): count runes.
			if utf8.RuneCountInString(k) > len(body) {
				t.Fatalf("key %q longer than the body", k)
			}
		}
		_ = url.Values(v).Encode()
	})
}
