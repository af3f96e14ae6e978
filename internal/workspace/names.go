package workspace

import (
	"fmt"
	"math/big"
	"strconv"
	"strings"

	"github.com/google/uuid"
)

// Naming rules (docs/decisions.md, "Workspace names, cluster names and URLs").
//
// A workspace is named by its owner and its name: names are unique per owner among the workspaces
// that are not Terminated. In the cluster it is named by its cluster name (KubeName), unique across
// every workspace ever created. Its URL's host is HostLabel(port, name, owner) in the agent's DNS
// zone; ParseHostLabel reads one back.
const (
	// MaxNameLength bounds workspace names.
	MaxNameLength = 40
	// MaxUsernameLength bounds new usernames (older ones may be up to 63 characters).
	MaxUsernameLength = 32
	// MaxNameAndOwnerLength bounds a workspace name and its owner's username together, so that
	// `<port>-<name>--<owner>` is one DNS label (at most 63 characters) for any port.
	MaxNameAndOwnerLength = 63 - len("65535-") - len(HostSeparator)
	// HostSeparator separates the workspace name from the owner in a host label. Names and
	// usernames may not contain it, which makes a host label name one workspace only.
	HostSeparator = "--"
	// MaxKubeNameLength leaves room for the per-workspace namespace `hangar-<kube name>`.
	MaxKubeNameLength = 63 - len(NamespacePrefix)
	// NamespacePrefix starts every per-workspace namespace.
	NamespacePrefix = "hangar-"
)

// CheckName reports what is wrong with a new workspace name ("" when nothing).
func CheckName(name string) string {
	if !IsDNSLabel(name, MaxNameLength) {
		return fmt.Sprintf("must be 1 to %d lower-case letters, digits or '-', starting and ending with a letter or digit, got %q", MaxNameLength, name)
	}
	if strings.Contains(name, HostSeparator) {
		return fmt.Sprintf("must not contain %q (it separates the name from the owner in the workspace's URL), got %q", HostSeparator, name)
	}
	return ""
}

// CheckUsername reports what is wrong with a new username ("" when nothing).
func CheckUsername(name string) string {
	if !IsDNSLabel(name, MaxUsernameLength) {
		return fmt.Sprintf("must be 1 to %d lower-case letters, digits or '-', starting and ending with a letter or digit, got %q", MaxUsernameLength, name)
	}
	if strings.Contains(name, HostSeparator) {
		return fmt.Sprintf("must not contain %q (it separates the workspace name from the owner in workspace URLs), got %q", HostSeparator, name)
	}
	return ""
}

// CheckNameForOwner reports what is wrong with a new workspace name given its owner's username:
// the name's own rules, and whether the two fit one URL label. Usernames from before these rules
// may contain "--" or be long; their owners are told which.
func CheckNameForOwner(name, owner string) string {
	if msg := CheckName(name); msg != "" {
		return msg
	}
	if strings.Contains(owner, HostSeparator) {
		return fmt.Sprintf("cannot get a URL: your username %q contains %q, which workspace URLs use as a separator; ask an admin for a new user", owner, HostSeparator)
	}
	if len(name)+len(owner) > MaxNameAndOwnerLength {
		return fmt.Sprintf("is %d characters and your username %q %d: together they may be at most %d, so that the URL's host <port>-<name>--<owner> is one DNS label of at most 63 characters",
			len(name), owner, len(owner), MaxNameAndOwnerLength)
	}
	return ""
}

// HostLabel is the first label of a workspace endpoint's host: `<port>-<name>--<owner>`.
func HostLabel(port int, name, owner string) string {
	return strconv.Itoa(port) + "-" + name + HostSeparator + owner
}

// HostTemplate is HostLabel with the port left as the Go template `{{.port}}`, followed by the zone.
func HostTemplate(name, owner, zone string) string {
	return "{{.port}}-" + name + HostSeparator + owner + "." + zone
}

// ParseHostLabel reads a host label made by HostLabel back into its port, workspace name and owner.
// It accepts exactly what HostLabel makes of a port from 1 to 65535 and a name and owner that pass
// CheckNameForOwner (owners of up to 63 characters, as older usernames may be), so that a label
// names at most one workspace.
func ParseHostLabel(label string) (port int, name, owner string, ok bool) {
	if len(label) > 63 {
		return 0, "", "", false
	}
	p, rest, found := strings.Cut(label, "-")
	if !found || p == "" || len(p) > 5 || p[0] == '0' {
		return 0, "", "", false
	}
	for _, c := range p {
		if c < '0' || c > '9' {
			return 0, "", "", false
		}
	}
	port, _ = strconv.Atoi(p)
	if port > 65535 {
		return 0, "", "", false
	}
	name, owner, found = strings.Cut(rest, HostSeparator)
	if !found || CheckName(name) != "" || !IsDNSLabel(owner, 63) || strings.Contains(owner, HostSeparator) {
		return 0, "", "", false
	}
	return port, name, owner, true
}

// ParseHost reads a host `<label>.<zone>` (any case, an optional port or trailing dot ignored) into
// its port, workspace name and owner, for a proxy that routes by host.
func ParseHost(host, zone string) (port int, name, owner string, ok bool) {
	host = strings.ToLower(host)
	if h, _, found := strings.Cut(host, ":"); found {
		host = h
	}
	host = strings.TrimSuffix(host, ".")
	label, found := strings.CutSuffix(host, "."+strings.ToLower(strings.TrimSuffix(zone, ".")))
	if !found || strings.Contains(label, ".") {
		return 0, "", "", false
	}
	return ParseHostLabel(label)
}

// KubeName is the cluster name of a new workspace: the name of its objects and, in a namespace of
// its own, the namespace's after NamespacePrefix. It is the name (cut to fit) followed by the
// workspace's id in base 36, so that two workspaces never share it — two owners' `dev`, or a `dev`
// created again while the previous one is still being deleted — and it never changes. A name that
// starts with a digit gets "w-" in front: the Service it names must start with a letter.
func KubeName(name, id string) string {
	u, err := uuid.Parse(id)
	suffix := ""
	if err == nil {
		suffix = new(big.Int).SetBytes(u[:]).Text(36)
		suffix = strings.Repeat("0", 25-len(suffix)) + suffix
	} else {
		suffix = strings.ToLower(strings.ReplaceAll(id, "-", ""))
	}
	head := name
	if head != "" && head[0] >= '0' && head[0] <= '9' {
		// A Service's name must start with a letter (RFC 1035), and the Service is named by this.
		head = "w-" + head
	}
	if max := MaxKubeNameLength - 1 - len(suffix); len(head) > max {
		head = strings.TrimRight(head[:max], "-")
	}
	return head + "-" + suffix
}

// Namespace is the namespace of a workspace with a namespace of its own.
func Namespace(kubeName string) string { return NamespacePrefix + kubeName }

// Ref is how the API and the CLI name a workspace: `name` (the caller's own) or `owner/name`.
type Ref struct {
	Owner string // "" means the caller
	Name  string
}

func (r Ref) String() string {
	if r.Owner == "" {
		return r.Name
	}
	return r.Owner + "/" + r.Name
}

// ParseRef reads `name` or `owner/name`. It checks the shape only (DNS labels of at most 63
// characters: names and usernames of older versions are looked up too); field names the field in
// the error.
func ParseRef(field, s string) (Ref, error) {
	owner, name, qualified := strings.Cut(s, "/")
	if !qualified {
		owner, name = "", s
	}
	v := &ValidationError{}
	if qualified && !IsDNSLabel(owner, 63) {
		v.Add(field, "the owner in owner/name must be a username (lower-case letters, digits or '-'), got %q", owner)
	}
	if !IsDNSLabel(name, 63) {
		v.Add(field, "must be a workspace name or owner/name (lower-case letters, digits or '-'), got %q", s)
	}
	if err := v.Err(); err != nil {
		return Ref{}, err
	}
	return Ref{Owner: owner, Name: name}, nil
}

// NormalizeHost reads a host as browsers send it (the Host header): lower-case letters, digits,
// '-' and '.', an optional trailing dot, an optional port. It returns the name without the port,
// and the host with its port (where a redirect goes back to); ok is false for anything else.
func NormalizeHost(h string) (name, withPort string, ok bool) {
	h = strings.ToLower(h)
	name, port, hasPort := strings.Cut(h, ":")
	if hasPort {
		if port == "" || len(port) > 5 || port[0] == '0' || strings.Trim(port, "0123456789") != "" {
			return "", "", false // digits only: Atoi alone takes "+80"
		}
		if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
			return "", "", false
		}
	}
	name = strings.TrimSuffix(name, ".")
	if name == "" || len(name) > 253 {
		return "", "", false
	}
	for _, label := range strings.Split(name, ".") {
		if label == "" || len(label) > 63 {
			return "", "", false // "..", ".a", "a..b": no empty labels
		}
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '.') {
			return "", "", false
		}
	}
	if hasPort {
		return name, name + ":" + port, true
	}
	return name, name, true
}
