package workspace

import (
	"net/url"
	"strings"
	"testing"
	"unicode"
)

func TestCheckDotfilesRepo(t *testing.T) {
	for _, ok := range []string{"", "https://git.example.com/a/dots.git", "http://10.0.0.1:3000/a/dots.git#main", "ssh://git@git.example.com:2222/a/dots.git",
		"git@git.example.com:a/dots.git", "git.example.com:a/dots#v1.2", "https://git.example.com/a/dots#0123abcd"} {
		if msg := CheckDotfilesRepo(ok); msg != "" {
			t.Errorf("CheckDotfilesRepo(%q) = %q, want accepted", ok, msg)
		}
	}
	for _, bad := range []string{"file:///etc", "/home/a/dots", "dots", "https://git.example.com", "https://git.example.com/", "ftp://h/x",
		"https://u:p@h/x", "-uhttps://h/x", "https://h/x#", "https://h/x#-b", "https://h/x#a..b", "https://h/a b", "https://h/x\n",
		"https://h/" + strings.Repeat("x", MaxDotfilesRepoLength)} {
		if msg := CheckDotfilesRepo(bad); msg == "" {
			t.Errorf("CheckDotfilesRepo(%q) accepted", bad)
		}
	}
}

func TestCheckFullNameAndEmail(t *testing.T) {
	for _, c := range []struct {
		check func(string) string
		v     string
		ok    bool
	}{
		{CheckFullName, "Ada Lovelace", true}, {CheckFullName, "Zoë 李", true}, {CheckFullName, "", true},
		{CheckFullName, "A <b>", false}, {CheckFullName, "a\nb", false}, {CheckFullName, strings.Repeat("x", 257), false}, {CheckFullName, "\xff", false},
		{CheckEmail, "ada@example.com", true}, {CheckEmail, "", true}, {CheckEmail, "ada", false}, {CheckEmail, "@x", false},
		{CheckEmail, "a@", false}, {CheckEmail, "a@b@c", false}, {CheckEmail, "a b@c", false}, {CheckEmail, "<a@b>", false},
	} {
		if got := c.check(c.v) == ""; got != c.ok {
			t.Errorf("check(%q) accepted %v, want %v", c.v, got, c.ok)
		}
	}
	if n, e := (User{Username: "ada"}).GitIdentity(); n != "ada" || e != "" {
		t.Errorf("GitIdentity without a profile = %q %q", n, e)
	}
}

// FuzzCheckDotfilesRepo: what is accepted is bounded, free of spaces and control characters,
// does not begin with '-', and is an http(s)/ssh URL with a host and path or scp-like; the ref
// after '#' is non-empty.
func FuzzCheckDotfilesRepo(f *testing.F) {
	for _, s := range []string{"https://git.example.com/a/d.git#main", "git@h:a/d", "ssh://h/x", "file:///x", "h:#", "-x:y"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if CheckDotfilesRepo(s) != "" || s == "" {
			return
		}
		if len(s) > MaxDotfilesRepoLength || strings.HasPrefix(s, "-") || strings.ContainsFunc(s, func(r rune) bool { return unicode.IsControl(r) || r == ' ' || r == '\t' }) {
			t.Fatalf("accepted %q", s)
		}
		repo, ref := SplitDotfilesRepo(s)
		if strings.Contains(s, "#") && ref == "" {
			t.Fatalf("accepted an empty ref: %q", s)
		}
		if strings.Contains(repo, "://") {
			u, err := url.Parse(repo)
			if err != nil || (u.Scheme != "https" && u.Scheme != "http" && u.Scheme != "ssh") || u.Host == "" {
				t.Fatalf("accepted %q (%v)", s, err)
			}
			if _, has := u.User.Password(); has {
				t.Fatalf("accepted a password: %q", s)
			}
		} else if !strings.Contains(repo, ":") {
			t.Fatalf("accepted %q: neither a URL nor scp-like", s)
		}
	})
}
