package workspace

import (
	"fmt"
	"net/url"
	"regexp"
	"strings"
	"unicode"
	"unicode/utf8"
)

// A user's profile (docs/decisions.md, "A team's repository: dotfiles and identity (issue 22)"):
// the name and email of their git commits in a workspace, and the dotfiles repository its helper
// installs at the first start.

// Bounds of the profile's fields, in bytes.
const (
	MaxFullNameLength     = 256
	MaxEmailLength        = 320 // RFC 3696's bound on an address
	MaxDotfilesRepoLength = 1024
)

// ProfileChange is a user's change of their own profile: nil leaves a field as it is, "" clears
// it. A full name or email the user sets is theirs: OIDC sign-ins stop filling it; clearing it
// hands it back to the provider's claims.
type ProfileChange struct {
	FullName, Email, DotfilesRepo *string
}

// CheckFullName reports what is wrong with a full name ("" when nothing). Git refuses '<', '>'
// and line breaks in an identity (they delimit it in a commit), so they are refused here.
func CheckFullName(s string) string {
	if len(s) > MaxFullNameLength {
		return fmt.Sprintf("must be at most %d bytes, got %d", MaxFullNameLength, len(s))
	}
	if msg := checkText(s); msg != "" {
		return msg
	}
	if strings.ContainsAny(s, "<>") {
		return "must not contain '<' or '>' (git delimits the email with them)"
	}
	return ""
}

// CheckEmail reports what is wrong with an email ("" when nothing or empty): one '@' with
// something on both sides, no space, '<' or '>'. Whether the address receives mail is not
// checked: git only records it.
func CheckEmail(s string) string {
	if s == "" {
		return ""
	}
	if len(s) > MaxEmailLength {
		return fmt.Sprintf("must be at most %d bytes, got %d", MaxEmailLength, len(s))
	}
	if msg := checkText(s); msg != "" {
		return msg
	}
	local, domain, ok := strings.Cut(s, "@")
	if !ok || local == "" || domain == "" || strings.Contains(domain, "@") || strings.ContainsAny(s, " \t<>") {
		return fmt.Sprintf("must be an email address like name@example.com, got %q", s)
	}
	return ""
}

// scpLike is git's scp-like syntax, [user@]host:path, where the host has no slash before the
// colon (git(1), "GIT URLS").
var scpLike = regexp.MustCompile(`^(?:[A-Za-z0-9._~+-]+@)?[A-Za-z0-9.-]+:[^\\]+$`)

// CheckDotfilesRepo reports what is wrong with a dotfiles repository ("" when nothing or empty):
// an https://, http:// or ssh:// git URL, or an scp-like one (git@host:owner/repo.git), with an
// optional #ref (branch, tag or commit).
func CheckDotfilesRepo(s string) string {
	if s == "" {
		return ""
	}
	if len(s) > MaxDotfilesRepoLength {
		return fmt.Sprintf("must be at most %d bytes, got %d", MaxDotfilesRepoLength, len(s))
	}
	if msg := checkText(s); msg != "" {
		return msg
	}
	if strings.ContainsAny(s, " \t") {
		return fmt.Sprintf("must be a git URL without spaces, got %q", s)
	}
	repo, ref := SplitDotfilesRepo(s)
	if strings.Contains(s, "#") && (ref == "" || strings.HasPrefix(ref, "-") || strings.Contains(ref, "..")) {
		return fmt.Sprintf("has an invalid ref %q after '#': give a branch, tag or commit", ref)
	}
	if strings.HasPrefix(repo, "-") {
		return fmt.Sprintf("must not begin with '-', got %q", s)
	}
	if i := strings.Index(repo, "://"); i >= 0 {
		u, err := url.Parse(repo)
		if err != nil {
			return fmt.Sprintf("is not a URL: %v", err)
		}
		switch u.Scheme {
		case "https", "http", "ssh":
		default:
			return fmt.Sprintf("must be an https://, http:// or ssh:// git URL, or git@host:path, got scheme %q", u.Scheme)
		}
		if u.Host == "" || strings.Trim(u.Path, "/") == "" {
			return fmt.Sprintf("must name a host and a repository path, got %q", repo)
		}
		if u.User != nil {
			if _, has := u.User.Password(); has {
				return "must not hold a password: the helper asks the server for your forge credentials"
			}
		}
		return ""
	}
	if !scpLike.MatchString(repo) {
		return fmt.Sprintf("must be an https://, http:// or ssh:// git URL, or git@host:path, got %q", repo)
	}
	return ""
}

// SplitDotfilesRepo splits a dotfiles repository setting into the URL and the ref after '#'
// ("" for the default branch).
func SplitDotfilesRepo(s string) (repo, ref string) {
	repo, ref, _ = strings.Cut(s, "#")
	return repo, ref
}

// checkText refuses invalid UTF-8 and control characters (line breaks included).
func checkText(s string) string {
	if !utf8.ValidString(s) {
		return "must be valid UTF-8"
	}
	for _, r := range s {
		if unicode.IsControl(r) {
			return fmt.Sprintf("must not contain control characters (found %q)", r)
		}
	}
	return ""
}

// GitIdentity is the name and email a user's commits get in a workspace: the profile's, the name
// falling back to the username and the email to none.
func (u User) GitIdentity() (name, email string) {
	name = u.FullName
	if name == "" {
		name = u.Username
	}
	return name, u.Email
}
