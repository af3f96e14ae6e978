package server

import (
	"bytes"
	"encoding/json"
	"slices"
	"testing"

	"github.com/hangar-dev/hangar/internal/workspace"
)

func TestOIDCUsername(t *testing.T) {
	for _, c := range []struct{ preferred, email, want string }{
		{"Alice.Smith", "alice@example.com", "alice-smith"},
		{"", "Bob_Jones@example.com", "bob-jones"},
		{"carol@corp.example", "", "carol"}, // a UPN: its local part
		{"--x--y--", "", "x-y"},
		{"Zoë", "", "zo"},
		{"日本", "jp@example.com", "jp"}, // nothing left of preferred_username: the email's
		{"", "", "user"},
		{"@", "@", "user"},
		{"a-very-long-preferred-username-that-goes-on", "", "a-very-long-preferred-userna"},
	} {
		got := oidcUsername(c.preferred, c.email)
		if got != c.want || workspace.CheckUsername(got) != "" {
			t.Errorf("oidcUsername(%q, %q) = %q, want %q", c.preferred, c.email, got, c.want)
		}
	}
}

func TestParseOIDCClaims(t *testing.T) {
	c, err := parseOIDCClaims([]byte(`{"sub":"x","email":"a@b.c","email_verified":"false","preferred_username":"a","roles":"admins"}`), "roles")
	if err != nil || c.Email != "a@b.c" || c.EmailVerified == nil || *c.EmailVerified || c.PreferredUsername != "a" || !slices.Equal(c.Groups, []string{"admins"}) {
		t.Fatalf("parseOIDCClaims = %+v, %v", c, err)
	}
	c, err = parseOIDCClaims([]byte(`{"email":null,"groups":["a","b"],"email_verified":true}`), "groups")
	if err != nil || c.Email != "" || !*c.EmailVerified || !slices.Equal(c.Groups, []string{"a", "b"}) {
		t.Fatalf("parseOIDCClaims = %+v, %v", c, err)
	}
	for _, bad := range []string{`[]`, `null`, `{"email":1}`, `{"email_verified":"yes"}`, `{"groups":{"a":1}}`, `{"preferred_username":[]}`} {
		if _, err := parseOIDCClaims([]byte(bad), "groups"); err == nil {
			t.Errorf("parseOIDCClaims(%s) accepted", bad)
		}
	}
}

// FuzzOIDCClaims: any ID token payload is read or refused without a panic, and the username asked
// for follows the username rules, with room for a suffix.
func FuzzOIDCClaims(f *testing.F) {
	f.Add([]byte(`{"sub":"x","email":"Alice.Smith@example.com","email_verified":true,"groups":["devs"]}`), "groups")
	f.Add([]byte(`{"preferred_username":"日本--x","email_verified":"false","roles":"a"}`), "roles")
	f.Add([]byte(`{"email":"@","groups":null}`), "groups")
	f.Add([]byte(`{"name":"Ada <Lovelace>","email":"ada@example.com","email_verified":"false"}`), "groups")
	f.Fuzz(func(t *testing.T, payload []byte, claim string) {
		c, err := parseOIDCClaims(payload, claim)
		if err != nil {
			return
		}
		if !json.Valid(payload) || bytes.TrimSpace(payload)[0] != '{' {
			t.Fatalf("accepted a payload that is not a JSON object: %q", payload)
		}
		name := oidcUsername(c.PreferredUsername, c.Email)
		if msg := workspace.CheckUsername(name); msg != "" {
			t.Fatalf("username %q: %s", name, msg)
		}
		if msg := workspace.CheckUsername(name + "-100"); msg != "" {
			t.Fatalf("username %q with a suffix: %s", name, msg)
		}
		// The profile gets only what its own rules accept, and never an unverified email.
		full, email := profileClaims(c)
		if msg := workspace.CheckFullName(full); msg != "" {
			t.Fatalf("full name %q: %s", full, msg)
		}
		if msg := workspace.CheckEmail(email); msg != "" {
			t.Fatalf("email %q: %s", email, msg)
		}
		if email != "" && c.EmailVerified != nil && !*c.EmailVerified {
			t.Fatalf("unverified email %q went to the profile", email)
		}
	})
}

// FuzzParseOIDCLogin: a sign-in cookie is read or refused without a panic; what is read sends the
// browser back to a path of this server only, and encodes back to the same sign-in.
func FuzzParseOIDCLogin(f *testing.F) {
	good := oidcLogin{secret: bytes.Repeat([]byte{7}, 32), started: 1767243600, returnTo: "/proxy/authorize?host=x&path=%2F"}
	f.Add(good.encode())
	f.Add("..")
	f.Add(oidcLogin{secret: bytes.Repeat([]byte{1}, 32), started: 1, returnTo: "//evil.example.com"}.encode())
	f.Fuzz(func(t *testing.T, v string) {
		l, err := parseOIDCLogin(v)
		if err != nil {
			return
		}
		if !SafeReturnPath(l.returnTo) || len(l.secret) != 32 || l.started <= 0 {
			t.Fatalf("accepted %q: %+v", v, l)
		}
		again, err := parseOIDCLogin(l.encode())
		if err != nil || !bytes.Equal(again.secret, l.secret) || again.started != l.started || again.returnTo != l.returnTo || again.state() != l.state() {
			t.Fatalf("%q does not round-trip: %+v, %v", v, again, err)
		}
	})
}
