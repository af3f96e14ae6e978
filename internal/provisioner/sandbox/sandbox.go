// Package sandbox isolates template code: the terraform a provisioner runs for a build, with the
// providers and local-exec commands it starts, runs as an unprivileged user of its own, in a
// private mount namespace where the server's data directory, the provisioner's work root (but the
// build's own directory), its token file and /tmp are hidden (docs/decisions.md, "Template
// isolation").
//
// The provisioner (package terraform) does not start terraform itself: it starts the hangar binary
// with the Spec in its environment (Env). That process — the sandbox stage, still with the
// provisioner's privileges — enters a new mount namespace, hides and exposes what the Spec says,
// drops to the build user (no supplementary groups, no capabilities, no_new_privs) and becomes
// terraform (exec). So the survival shim, which starts "terraform" in a session of its own, starts
// the sandbox stage in it, and terraform keeps outliving a provisioner that is killed.
package sandbox

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// Env carries the Spec to the sandbox stage; the stage removes it before terraform starts.
const Env = "HANGAR_TF_SANDBOX"

// PluginDir is the filesystem mirror inside the sandbox: the hangar binary is offered there as
// Hangar's provider (the provisioner's own mirror may lie in a directory the build user cannot
// reach). It is under the sandbox's private /tmp.
const PluginDir = "/tmp/.hangar/plugins"

// Spec is what the sandbox stage does before it becomes terraform.
type Spec struct {
	// UID and GID are the build user's: terraform runs as them, with no supplementary group.
	UID int `json:"uid"`
	GID int `json:"gid"`
	// Groups are the build user's supplementary groups (those of a named user: an operator may put
	// it in the docker group, for instance); none for a numeric user.
	Groups []int `json:"groups,omitempty"`
	// Terraform is the real terraform executable the stage becomes.
	Terraform string `json:"terraform"`
	// Hide are paths the build must not see: a directory is covered by an empty tmpfs, a file by
	// an unreadable empty one. /tmp is always replaced by an empty private tmpfs.
	Hide []string `json:"hide,omitempty"`
	// Expose are directories under a hidden path that the build does see, read-write, at the same
	// path (the build's own work directory).
	Expose []string `json:"expose,omitempty"`
	// Provider, if set, is the hangar executable, offered read-only under PluginDir as the
	// provider hangar.dev/hangar/hangar at ProviderVersion.
	Provider        string `json:"provider,omitempty"`
	ProviderAddress string `json:"provider_address,omitempty"`
	ProviderVersion string `json:"provider_version,omitempty"`
}

// Encode is the value of Env for s.
func (s Spec) Encode() (string, error) {
	b, err := json.Marshal(s)
	return string(b), err
}

// Decode reads the value of Env.
func Decode(v string) (Spec, error) {
	var s Spec
	if err := json.Unmarshal([]byte(v), &s); err != nil {
		return Spec{}, fmt.Errorf("sandbox spec: %w", err)
	}
	if s.UID <= 0 || s.GID <= 0 || slices.Contains(s.Groups, 0) || slices.ContainsFunc(s.Groups, func(g int) bool { return g < 0 }) {
		return Spec{}, fmt.Errorf("sandbox spec: the build user must not be root or in its group (uid %d, gid %d, groups %v)", s.UID, s.GID, s.Groups)
	}
	if !filepath.IsAbs(s.Terraform) {
		return Spec{}, fmt.Errorf("sandbox spec: terraform %q is not an absolute path", s.Terraform)
	}
	for _, p := range append(append([]string{}, s.Hide...), s.Expose...) {
		if !filepath.IsAbs(p) || filepath.Clean(p) != p || p == "/" {
			return Spec{}, fmt.Errorf("sandbox spec: %q is not a clean absolute path other than /", p)
		}
	}
	if s.Provider != "" && (!filepath.IsAbs(s.Provider) || s.ProviderAddress == "" || s.ProviderVersion == "" ||
		strings.Contains(s.ProviderVersion, "/") || strings.Count(s.ProviderAddress, "/") != 2 || strings.Contains(s.ProviderAddress, "..")) {
		return Spec{}, fmt.Errorf("sandbox spec: bad provider %q %q %q", s.Provider, s.ProviderAddress, s.ProviderVersion)
	}
	return s, nil
}

// IsSandbox reports whether this process was started as the sandbox stage (cmd/hangar checks it).
func IsSandbox() bool { return os.Getenv(Env) != "" }

// DefaultUID is the first user id the default build users take: `hangar server`'s in-process
// provisioner n runs its builds as DefaultUID+n (group the same number), `hangar provisioner` as
// DefaultStandaloneUID. They have no entry in /etc/passwd, which they do not need. The numbers are
// in the range systemd leaves unused (1879048192–2147483647: above the container ranges, below the
// ids with signedness problems), so that no system, regular, DynamicUser (61184–65519) or container
// user shares them: every process of a build user is killed when its build ends.
const (
	DefaultUID           = 2000000000
	DefaultStandaloneUID = 2000000100
)

// Process is a process KillUser killed.
type Process struct {
	PID  int
	Args []string // its command line, as it was
}

// IsHelper reports whether p is a Hangar workspace helper or agent: `… workspace-helper` (what a
// hangar_agent's init script execs, under whatever name the binary has: inside the sandbox the
// only hangar binary is the provider mirror's) or `hangar agent` (a binary named hangar*, so that
// another program's agent subcommand is not taken for Hangar's).
func (p Process) IsHelper() bool {
	if len(p.Args) < 2 {
		return false
	}
	switch p.Args[1] {
	case "workspace-helper":
		return true
	case "agent":
		name := filepath.Base(p.Args[0])
		return strings.HasPrefix(name, "hangar") || strings.HasPrefix(name, "terraform-provider-hangar")
	}
	return false
}

// User is the build user of one provisioner daemon.
type User struct {
	UID, GID int
	// Groups are a named user's supplementary groups (from /etc/group).
	Groups []int
}

// ParseUser reads a --provisioner-user value: "auto" (def, the default build user), a user id
// ("64000", group the same number), "UID:GID", or the name of a user of /etc/passwd (its primary
// group). offset is added to numeric ids (the in-process provisioner's index, so that each daemon
// has a user of its own); a name serves a single daemon only (offset 0).
func ParseUser(v string, def, offset int) (User, error) {
	if v == "" || v == "auto" {
		return User{UID: def + offset, GID: def + offset}, nil
	}
	uidText, gidText, hasGID := strings.Cut(v, ":")
	if uid, err := strconv.Atoi(uidText); err == nil {
		gid := uid
		if hasGID {
			if gid, err = strconv.Atoi(gidText); err != nil {
				return User{}, fmt.Errorf("want UID, UID:GID, a user name or auto; the group %q is not a number", gidText)
			}
		}
		if uid <= 0 || gid <= 0 || uid+offset >= 1<<31 || gid+offset >= 1<<31 {
			return User{}, fmt.Errorf("want a user id and group id above 0 (not root) and below 2^31, got %q", v)
		}
		return User{UID: uid + offset, GID: gid + offset}, nil
	}
	if hasGID {
		return User{}, fmt.Errorf("want UID, UID:GID, a user name or auto, got %q", v)
	}
	if offset != 0 {
		return User{}, fmt.Errorf("the user %q can serve one provisioner only: give a numeric user id instead (provisioner n uses UID+n)", v)
	}
	u, err := user.Lookup(v)
	if err != nil {
		return User{}, fmt.Errorf("no user %q: %w", v, err)
	}
	uid, err1 := strconv.Atoi(u.Uid)
	gid, err2 := strconv.Atoi(u.Gid)
	if err := errors.Join(err1, err2); err != nil {
		return User{}, fmt.Errorf("user %q: %w", v, err)
	}
	if uid == 0 || gid == 0 {
		return User{}, fmt.Errorf("the build user %q must not be root", v)
	}
	ids, err := u.GroupIds()
	if err != nil {
		return User{}, fmt.Errorf("the groups of user %q: %w", v, err)
	}
	var groups []int
	for _, id := range ids {
		g, err := strconv.Atoi(id)
		if err != nil {
			return User{}, fmt.Errorf("the groups of user %q: %w", v, err)
		}
		if g == 0 {
			return User{}, fmt.Errorf("the build user %q must not be in the root group", v)
		}
		if g != gid {
			groups = append(groups, g)
		}
	}
	return User{UID: uid, GID: gid, Groups: groups}, nil
}

// Config is how a terraform.Runner isolates its builds.
type Config struct {
	User User
	// Hide are the paths the builds must not see besides the work root (which is always hidden,
	// but for the build's own directory) and /tmp: the server's data directory, token files.
	Hide []string
	// Exe is the hangar executable: the sandbox stage, and Hangar's provider.
	Exe string
	// Claim holds User for this process (ClaimUser); Release it when the daemon ends.
	Claim *Claim
}

// InsecureWarning is what a provisioner logs at start when it runs templates without isolation.
const InsecureWarning = "template isolation is OFF: terraform, its providers and every local-exec of every template run as " +
	"this process's user and can read everything it can: the server's data directory (the database, the admin token), " +
	"token files, and the work directories of other builds (their state and variables). Only the environment is scrubbed. " +
	"Run as root (templates then run as an unprivileged user in a private mount namespace), or run `hangar provisioner` " +
	"apart from the server"

// Options are a provisioner's isolation flags.
type Options struct {
	// User is --provisioner-user ("auto", UID, UID:GID or a name).
	User string
	// Insecure is --insecure-no-template-isolation: run templates as this process's user.
	Insecure bool
}

// PrivateTmpSize bounds the build's private /tmp (a tmpfs: memory). Terraform's providers and
// plugin cache are not under it.
const PrivateTmpSize = "1g"

// SecretsDir is where docs/deploy-vm.md and deploy/systemd keep Hangar's environment and config
// files (the database URL, credentials for --provisioner-env): always hidden from templates.
const SecretsDir = "/etc/hangar"

// Decide returns the isolation of the builds of a daemon (offset: the in-process provisioner's
// index, 0 for `hangar provisioner`; def the default build user id) — nil when opts.Insecure — or
// an error saying why templates cannot be isolated here and what to do. It never falls back to
// running templates unisolated by itself. It claims the build user (ClaimUser: the default one, or
// the next free id when that is taken; a chosen one or an error): the caller releases
// Config.Claim when the daemon ends. owner names the daemon (ClaimUser).
func Decide(opts Options, def, offset int, exe string, hide []string, owner string) (*Config, error) {
	if opts.Insecure {
		return nil, nil
	}
	const how = "; pass --insecure-no-template-isolation to run templates as this process's user anyway (they can then read everything it can: its data, its tokens)"
	if !Supported {
		return nil, fmt.Errorf("template isolation needs Linux (private mount namespaces)" + how)
	}
	if os.Geteuid() != 0 {
		return nil, fmt.Errorf("template isolation runs terraform as another user in a private mount namespace, which needs root; this process runs as user %d%s", os.Geteuid(), how)
	}
	u, err := ParseUser(opts.User, def, offset)
	if err != nil {
		return nil, fmt.Errorf("--provisioner-user: %w", err)
	}
	var clean []string
	for _, p := range hide {
		if p == "" {
			continue
		}
		a, err := filepath.Abs(p)
		if err != nil {
			return nil, err
		}
		if r, err := filepath.EvalSymlinks(a); err == nil {
			a = r
		}
		clean = append(clean, a)
	}
	claim, err := ClaimUser(u, opts.User == "" || opts.User == "auto", owner)
	if err != nil {
		return nil, fmt.Errorf("--provisioner-user: %w", err)
	}
	return &Config{User: claim.User, Hide: clean, Exe: exe, Claim: claim}, nil
}
