// Package devcontainer translates a devcontainer.json (the format VS Code, Codespaces, DevPod and
// Coder read) into a devfile, so that a workspace defined by one runs through the same parser,
// generator and security rules as any devfile (internal/devfile): one pod, unprivileged, non-root,
// without Docker.
//
// Translate is pure: the text, the workspace's name and id and the agent's caps in, a devfile and
// warnings out, or a *workspace.ValidationError naming every field ("devcontainer.runArgs[1]") that
// cannot be honoured. docs/decisions.md ("devcontainer.json on Kubernetes") says what each field
// becomes and why the others are refused.
package devcontainer

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io/fs"
	"maps"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/hangar-dev/hangar/internal/devfile"
	"github.com/hangar-dev/hangar/internal/imagebuild"
	"github.com/hangar-dev/hangar/internal/workspace"
)

// Options are the facts about the workspace that a devcontainer.json's variables and
// hostRequirements need.
type Options struct {
	// Basename is ${localWorkspaceFolderBasename}: the name of the folder the definition comes
	// from; the workspace's name when given directly.
	Basename string
	// ID is ${devcontainerId}: stable for the workspace (its id).
	ID string
	// Caps are the agent's max_resources_per_workspace (hostRequirements must fit them).
	Caps workspace.Resources
	// FromRepository says the definition comes from the repository the workspace clones (its first
	// project, named Basename): as VS Code does, the repository is the workspace folder
	// (/workspaces/<Basename>, or the workspaceMount's target), so the data volume is mounted at
	// its parent (PROJECTS_ROOT) and the repository cloned into it under its own name.
	FromRepository bool
	// Repo reads the repository's files, when the definition comes from one (nil when it was
	// given directly): the Dockerfile, build context and compose files a devcontainer.json names.
	// Dir is the devcontainer.json's folder in it ("." for the root), which their paths are
	// relative to. Reads are bounded by the reader (internal/repodef reads through the forge's API).
	Repo fs.FS
	Dir  string
}

// Result is a translated devcontainer.json.
type Result struct {
	// Devfile is the devfile YAML that devfile.Parse reads; it carries the definition's kind and
	// the translation's warnings as attributes, so that they are shown with the workspace.
	Devfile []byte
	// Warnings lists what is accepted but not honoured, for the user to read.
	Warnings []string
	// Build is the image build the definition needs (its `build` and `features`), nil when its
	// `image` runs as it is. The devfile's main container then runs the build's image.
	Build *imagebuild.Spec
}

// Name of the main container component and of the lifecycle commands.
const (
	componentName = "devcontainer"
	// dataSize is the workspace data volume's size (the generator's): hostRequirements.storage must fit.
	dataSize = "50Gi"
)

// Users the Dev Containers images create, and their uid: remoteUser and containerUser name them,
// and Kubernetes runs a container as a number (runAsUser), not a name it cannot look up in the image.
var knownUsers = map[string]int64{"vscode": 1000, "node": 1000, "codespace": 1000}

// devcontainersImages is the prefix of the Dev Containers images, whose user is vscode.
const devcontainersImages = "mcr.microsoft.com/devcontainers/"

// refusedBuild is the message for the fields that need an image built.
const refusedBuild = "needs an image build in the cluster, which Hangar does not do yet; use `image` or an admin-mapped prebuilt image"

type translator struct {
	v        *workspace.ValidationError
	warnings []string
	opts     Options
	folder   string // ${containerWorkspaceFolder}
	image    string
	local    string // ${localWorkspaceFolder}
	// build collects the image build (Base and Steps from `build`, Features from `features`);
	// nil while nothing needs one.
	build *imagebuild.Spec
	// users are remoteUser and containerUser, as given (the build's _REMOTE_USER and
	// _CONTAINER_USER).
	users [2]string
	// featuresRefused: a feature was refused (overrideFeatureInstallOrder is not checked then).
	featuresRefused bool
	// compose is the docker-compose definition (compose.go); nil without dockerComposeFile.
	compose *composeSetup
}

func (t *translator) warn(format string, args ...any) {
	t.warnings = append(t.warnings, fmt.Sprintf(format, args...))
}

// Translate reads a devcontainer.json and returns the devfile it stands for.
func Translate(data []byte, opts Options) (*Result, error) {
	v := &workspace.ValidationError{}
	raw, err := decodeObject(data)
	if err != nil {
		v.Add("devcontainer", "%v", err)
		return nil, v
	}
	if opts.Basename == "" {
		opts.Basename = "workspace"
	}
	t := &translator{v: v, opts: opts}
	d, ok := t.translate(raw)
	if !ok {
		return nil, v.Err()
	}
	d.attrs[devfile.DefinitionAttribute] = devfile.DefinitionDevcontainer
	if t.build != nil {
		// The devfile carries the build; the generator runs it (or the agent's prebuilt image for
		// its hash) and gives its image to the main container.
		if t.build.Base == "" {
			t.build.Base = t.image
		}
		t.build.RemoteUser, t.build.ContainerUser = t.users[0], t.users[1]
		if _, ok := d.container["image"]; !ok {
			d.container["image"] = t.build.Base
		}
		d.attrs[devfile.ImageBuildAttribute] = t.build
	}
	if len(t.warnings) > 0 {
		d.attrs[devfile.DefinitionWarningsAttribute] = t.warnings
	}
	// JSON, which is YAML: it carries any string (a YAML writer refuses control characters).
	out, err := json.MarshalIndent(d.devfile(), "", "  ")
	if err != nil {
		return nil, fmt.Errorf("devcontainer: write its devfile: %w", err)
	}
	// The devfile is the one Hangar parses: a devcontainer.json the generator refuses (a port
	// taken, a volume name) is refused here with the devfile's own words.
	df, err := devfile.Parse(out)
	if err != nil {
		return nil, err
	}
	// The devfile's warnings: the translation's, then what the devfile itself says (the build's
	// hash, which an admin maps to a prebuilt image).
	return &Result{Devfile: out, Warnings: df.Warnings(), Build: t.build}, nil
}

// doc is the devfile being built.
type doc struct {
	attrs      map[string]any
	container  map[string]any
	volumes    []string
	commands   []map[string]any
	postStart  []string
	mainAttrs  map[string]any
	podUser    *int64
	podGroup   *int64
	sourcePath string
	// extra are the components after the main container and its volumes: a compose
	// devcontainer's other services and their volumes; hostAliases the names the pod maps to
	// 127.0.0.1 (compose.go).
	extra       []any
	hostAliases []string
}

func (d *doc) devfile() map[string]any {
	comps := []any{map[string]any{"name": componentName, "attributes": d.mainAttrs, "container": d.container}}
	for _, name := range d.volumes {
		comps = append(comps, map[string]any{"name": name, "volume": map[string]any{}})
	}
	comps = append(comps, d.extra...)
	spec := map[string]any{}
	if d.podUser != nil {
		sc := map[string]any{"runAsUser": *d.podUser}
		if d.podGroup != nil {
			sc["runAsGroup"] = *d.podGroup
		}
		spec["securityContext"] = sc
	}
	if len(d.hostAliases) > 0 {
		spec["hostAliases"] = []any{map[string]any{"ip": "127.0.0.1", "hostnames": d.hostAliases}}
	}
	if len(spec) > 0 {
		d.attrs["pod-overrides"] = map[string]any{"spec": spec}
	}
	out := map[string]any{
		"schemaVersion": "2.2.0",
		"metadata":      map[string]any{"name": "devcontainer"},
		"attributes":    d.attrs,
		"components":    comps,
	}
	if len(d.commands) > 0 {
		out["commands"] = d.commands
		out["events"] = map[string]any{"postStart": d.postStart}
	}
	return out
}

// fields Hangar reads; the rest are accepted and listed in the warnings.
var ignoredQuietly = map[string]bool{"$schema": true, "name": true}

func (t *translator) translate(raw map[string]json.RawMessage) (*doc, bool) {
	d := &doc{attrs: map[string]any{}, mainAttrs: map[string]any{devfile.MainAttribute: true, devfile.EditorAttribute: devfile.EditorCodeServer}}
	handled := map[string]bool{}
	take := func(k string) (json.RawMessage, bool) {
		handled[k] = true
		r, ok := raw[k]
		return r, ok && string(r) != "null"
	}

	// Refused: what needs an image build, several services, privileges, or the user's own machine.
	if r, ok := take("features"); ok {
		t.features(r)
	}
	for _, k := range []string{"dockerComposeFile", "service", "runServices"} {
		if _, ok := take(k); ok && k == "dockerComposeFile" {
			t.compose = t.composeRead(raw)
		}
	}
	if r, ok := take("privileged"); ok {
		var b bool
		if err := json.Unmarshal(r, &b); err != nil {
			t.v.Add("devcontainer.privileged", "must be true or false")
		} else if b {
			t.v.Add("devcontainer.privileged", "is refused: workspaces run unprivileged, under the restricted Pod Security Standard")
		}
	}
	if r, ok := take("capAdd"); ok && !isEmptyArray(r) {
		t.v.Add("devcontainer.capAdd", "is refused: workspaces run with every Linux capability dropped")
	}
	if r, ok := take("securityOpt"); ok && !isEmptyArray(r) {
		t.v.Add("devcontainer.securityOpt", "is refused: workspaces run with the runtime's default seccomp profile and no other security options")
	}
	if _, ok := take("initializeCommand"); ok {
		t.v.Add("devcontainer.initializeCommand", "is refused: it runs on the user's own machine before the container is created, and a Hangar workspace has no such machine")
	}

	// The workspace folder first: the variables of every other field may name it.
	t.local = "/workspaces/" + t.opts.Basename
	t.folder = t.local
	mountTarget, mountField := "", "devcontainer.workspaceMount"
	if t.compose != nil {
		// The repository is where the primary service binds it, and cloned from it.
		t.opts.FromRepository = true
		mountTarget, mountField = t.compose.repoDir, t.compose.repoField
		t.folder = cmpOr(mountTarget, t.folder)
		if _, ok := take("workspaceMount"); ok {
			t.warn("workspaceMount is ignored with dockerComposeFile: the primary service's volumes say where the repository is")
		}
	} else if r, ok := take("workspaceMount"); ok {
		if s, ok := t.str("devcontainer.workspaceMount", r); ok {
			mountTarget = t.workspaceMount(t.expand(s, "devcontainer.workspaceMount"))
			t.folder = cmpOr(mountTarget, t.folder) // the spec wants workspaceFolder with it; else its target
		}
	}
	if r, ok := take("workspaceFolder"); ok {
		if s, ok := t.str("devcontainer.workspaceFolder", r); ok {
			t.folder = t.expand(s, "devcontainer.workspaceFolder")
		}
	}
	d.sourcePath = cmpOr(mountTarget, t.folder)
	if t.opts.FromRepository {
		repoDir := cmpOr(mountTarget, t.local)
		if path.Base(repoDir) != t.opts.Basename {
			t.v.Add(mountField, "puts the repository at %q: Hangar clones it into a folder named after it (%s), so the target must end in /%s", repoDir, t.opts.Basename, t.opts.Basename)
		}
		d.sourcePath = path.Dir(repoDir)
	}
	if !path.IsAbs(t.folder) || path.Clean(t.folder) == "/" {
		t.v.Add("devcontainer.workspaceFolder", "must be an absolute path such as /workspaces/app, got %q", t.folder)
	} else if mountTarget != "" && t.folder != mountTarget && !strings.HasPrefix(t.folder, strings.TrimSuffix(mountTarget, "/")+"/") {
		t.v.Add("devcontainer.workspaceFolder", "%q is not inside the workspaceMount's target %q, where the workspace's files are", t.folder, mountTarget)
	}
	if !path.IsAbs(d.sourcePath) || path.Clean(d.sourcePath) != d.sourcePath || d.sourcePath == "/" {
		t.v.Add("devcontainer.workspaceFolder", "must be a clean absolute path other than /, got %q", d.sourcePath)
	}

	ctr := map[string]any{"mountSources": true, "sourceMapping": d.sourcePath}
	d.container = ctr
	if t.compose != nil {
		ctr["image"], t.image = t.compose.image, t.compose.image
		if _, ok := take("image"); ok {
			t.warn("image is ignored with dockerComposeFile: the primary service's image runs")
		}
	} else if base := t.dockerBuild(take); base != "" {
		// The image build: the devfile's main container names Base, and the generator gives it
		// the image built from Base and the Steps (hangar.dev/image-build, named by the Spec's
		// hash) or the agent's prebuilt image for that hash.
		ctr["image"], t.image = base, base
	} else if r, ok := take("image"); ok {
		if s, ok := t.str("devcontainer.image", r); ok {
			s = t.expand(s, "devcontainer.image")
			if s == "" || strings.ContainsFunc(s, func(r rune) bool { return r <= ' ' || r == 0x7f }) {
				t.v.Add("devcontainer.image", "must be a container image reference such as mcr.microsoft.com/devcontainers/base:ubuntu, got %q", s)
			}
			ctr["image"], t.image = s, s
		}
	} else if raw["build"] == nil && raw["dockerFile"] == nil && raw["dockerfile"] == nil && raw["dockerComposeFile"] == nil {
		t.v.Add("devcontainer.image", "is required: Hangar runs a devcontainer.json that names its image")
	}

	env := t.env(take, d)
	if t.compose != nil {
		// The primary service's environment, under containerEnv's (the devcontainer.json's wins).
		env = append(slices.DeleteFunc(slices.Clone(t.compose.env), func(e map[string]any) bool {
			return slices.ContainsFunc(env, func(o map[string]any) bool { return o["name"] == e["name"] })
		}), env...)
	}
	t.runArgs(take, &env)
	if len(env) > 0 {
		ctr["env"] = env
	}
	t.user(take, d)
	t.featureOrder(take)
	t.ports(take, ctr)
	t.mounts(take, d, ctr)
	t.hostRequirements(take, ctr)
	t.lifecycle(take, d)
	t.customizations(take, d)
	if t.compose != nil {
		t.composeFinish(t.compose, d, ctr)
	}

	if r, ok := take("overrideCommand"); ok && string(r) == "false" {
		t.warn("overrideCommand false is not honoured: Hangar runs its helper (SSH, the lifecycle commands) as the container's command, not the image's entrypoint")
	}
	// init: the helper is the container's first process and reaps orphans (wshelper/reap.go).
	take("init")
	for _, k := range slices.Sorted(maps.Keys(raw)) {
		if handled[k] || ignoredQuietly[k] {
			continue
		}
		switch k {
		case "updateRemoteUserUID":
			t.warn("updateRemoteUserUID is ignored: the workspace runs as the uid remoteUser maps to, and its volumes belong to that uid's group")
		case "userEnvProbe":
			t.warn("userEnvProbe is ignored: lifecycle commands and SSH sessions get the container's environment, not a login shell's")
		case "shutdownAction":
			t.warn("shutdownAction is ignored: a workspace stops when it is stopped (hangar stop, its schedule)")
		case "waitFor":
			t.warn("waitFor is ignored: SSH and the editor are served once the lifecycle commands of the start have ended")
		default:
			t.warn("%s is not supported by Hangar and is ignored", k)
		}
	}
	if t.build != nil && t.build.Base == "" && t.image != "" && !workspace.IsImageReference(t.image) {
		t.v.Add("devcontainer.image", "must be a full image reference for features to be installed on, such as mcr.microsoft.com/devcontainers/base:ubuntu, got %q", t.image)
	}
	return d, t.v.Err() == nil
}

// workspaceMount reads a Docker --mount string and returns its target: the workspace's data
// volume is mounted there. Its source is the user's checkout (${localWorkspaceFolder}) or a named
// volume; any other bind mount is refused.
func (t *translator) workspaceMount(s string) string {
	const f = "devcontainer.workspaceMount"
	m, err := parseMount(s)
	if err != nil {
		t.v.Add(f, "%v", err)
		return ""
	}
	switch {
	case m.target == "":
		t.v.Add(f, "has no target: say where the workspace's files go, e.g. target=/workspaces/app")
	case m.typ == "bind" && m.source != t.local:
		t.v.Add(f, "binds %q of the host: bind mounts are refused (a workspace has no access to its node's files); the workspace's files are its data volume", m.source)
	case m.typ != "bind" && m.typ != "volume":
		t.v.Add(f, "has type %q; Hangar mounts the workspace's data volume (bind of ${localWorkspaceFolder}, or volume)", m.typ)
	}
	if m.typ == "volume" && m.source != "" {
		t.warn("workspaceMount names the volume %q: the workspace's own data volume is mounted at %s instead", m.source, m.target)
	}
	return m.target
}

type mount struct{ typ, source, target string }

// parseMount reads a Docker --mount string: type=volume,source=x,target=/y (src, dst, destination
// also), or a mounts entry's object form.
func parseMount(s string) (mount, error) {
	m := mount{typ: "volume"}
	for part := range strings.SplitSeq(s, ",") {
		k, val, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok {
			if part == "readonly" || part == "ro" {
				continue
			}
			return m, fmt.Errorf("%q is not key=value (type=volume,source=name,target=/path)", part)
		}
		switch strings.ToLower(k) {
		case "type":
			m.typ = val
		case "source", "src":
			m.source = val
		case "target", "dst", "destination":
			m.target = path.Clean(val)
		case "consistency", "readonly", "ro", "volume-nocopy", "bind-propagation", "external":
		default:
			return m, fmt.Errorf("has option %q, which Hangar does not know", k)
		}
	}
	return m, nil
}

// env reads containerEnv, the container's environment, and remoteEnv, which the helper adds for
// what it runs (SSH sessions, lifecycle commands, the editor), expanding ${containerEnv:X} there.
func (t *translator) env(take func(string) (json.RawMessage, bool), d *doc) []map[string]any {
	var out []map[string]any
	defined := map[string]bool{}
	for _, k := range []string{"containerEnv", "remoteEnv"} {
		r, ok := take(k)
		if !ok {
			continue
		}
		var m map[string]*string
		if err := json.Unmarshal(r, &m); err != nil {
			t.v.Add("devcontainer."+k, "must be an object of names to strings")
			continue
		}
		var remote []map[string]any
		names := slices.Sorted(maps.Keys(m))
		if k == "containerEnv" {
			// Kubernetes expands $(X) from the variables before it: those that refer to none go first.
			for _, name := range names {
				defined[name] = true
			}
			slices.SortStableFunc(names, func(a, b string) int {
				return refers(m[a]) - refers(m[b])
			})
		}
		for _, name := range names {
			f := fieldPath("devcontainer."+k, name)
			if !envNameRe.MatchString(name) {
				t.v.Add(f, "must be letters, digits and '_' and not start with a digit")
				continue
			}
			if strings.HasPrefix(strings.ToUpper(name), "HANGAR") {
				t.v.Add(f, "%q starts with HANGAR, which is reserved for the variables Hangar sets", name)
				continue
			}
			if m[name] == nil { // remoteEnv: null unsets a variable
				t.warn("%s is null: Hangar cannot unset a variable of the image; ignored", strings.TrimPrefix(f, "devcontainer."))
				continue
			}
			if k == "remoteEnv" {
				remote = append(remote, map[string]any{"name": name, "value": t.expandCommand(*m[name], f)})
				continue
			}
			out = append(out, map[string]any{"name": name, "value": t.expandEnv(*m[name], f, defined)})
		}
		if len(remote) > 0 {
			d.mainAttrs[devfile.RemoteEnvAttribute] = remote
		}
	}
	return out
}

// refers is 1 when a value refers to another variable, else 0.
func refers(s *string) int {
	if s != nil && strings.Contains(*s, "${containerEnv:") {
		return 1
	}
	return 0
}

var (
	envNameRe   = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	variableRe  = regexp.MustCompile(`\$\{([A-Za-z]+)(?::([^}:]*))?(?::([^}]*))?\}`)
	labelSlugRe = regexp.MustCompile(`[^a-z0-9]+`)
)

// expand replaces the devcontainer.json variables in s, as they stand in field f.
func (t *translator) expand(s, f string) string {
	return t.expandWith(s, f, func(name string) string { return "${" + name + "}" })
}

// expandEnv expands s for a containerEnv value: ${containerEnv:X} becomes Kubernetes' $(X) when X
// is a variable set before it (Kubernetes expands it); the image's own variables Kubernetes does
// not know, so the reference is dropped, with a warning.
func (t *translator) expandEnv(s, f string, defined map[string]bool) string {
	return t.expandWith(s, f, func(name string) string {
		if defined[name] {
			return "$(" + name + ")"
		}
		t.warn("%s uses ${containerEnv:%s}, which a container's own environment cannot read: it is empty there (remoteEnv can use it)", strings.TrimPrefix(f, "devcontainer."), name)
		return ""
	})
}

func (t *translator) expandWith(s, f string, containerEnv func(string) string) string {
	if !strings.Contains(s, "${") {
		return s
	}
	return variableRe.ReplaceAllStringFunc(s, func(m string) string {
		g := variableRe.FindStringSubmatch(m)
		switch g[1] {
		case "localWorkspaceFolderBasename":
			return t.opts.Basename
		case "localWorkspaceFolder":
			return t.local
		case "containerWorkspaceFolder":
			return t.folder
		case "containerWorkspaceFolderBasename":
			return path.Base(t.folder)
		case "devcontainerId":
			return t.opts.ID
		case "localEnv", "env":
			t.warn("%s uses ${%s:%s}: there is no local machine, so it is %q", strings.TrimPrefix(f, "devcontainer."), g[1], g[2], g[3])
			return g[3]
		case "containerEnv":
			if g[2] == "" {
				return m
			}
			return containerEnv(g[2])
		}
		return m
	})
}

// runArgs honours the docker run flags that mean something safe in a pod and refuses the rest.
func (t *translator) runArgs(take func(string) (json.RawMessage, bool), env *[]map[string]any) {
	r, ok := take("runArgs")
	if !ok {
		return
	}
	var args []string
	if err := json.Unmarshal(r, &args); err != nil {
		t.v.Add("devcontainer.runArgs", "must be a list of strings")
		return
	}
	for i := 0; i < len(args); i++ {
		f := fmt.Sprintf("devcontainer.runArgs[%d]", i)
		flag, val, hasVal := strings.Cut(args[i], "=")
		next := func() (string, bool) {
			if hasVal {
				return val, true
			}
			if i+1 < len(args) {
				i++
				return args[i], true
			}
			t.v.Add(f, "%s needs a value", flag)
			return "", false
		}
		switch flag {
		case "-e", "--env":
			if kv, ok := next(); ok {
				name, value, _ := strings.Cut(kv, "=")
				if !envNameRe.MatchString(name) || strings.HasPrefix(strings.ToUpper(name), "HANGAR") {
					t.v.Add(f, "sets %q, which is not a variable name a workspace may set", name)
					continue
				}
				*env = slices.DeleteFunc(*env, func(e map[string]any) bool { return e["name"] == name })
				*env = append(*env, map[string]any{"name": name, "value": t.expand(value, f)})
			}
		case "--init":
			// The helper is the container's first process and reaps orphans.
		case "--label", "-l", "--hostname", "-h", "--shm-size", "--name", "--memory-swappiness", "--stop-timeout", "--stop-signal", "--pull", "--platform":
			if _, ok := next(); ok {
				t.warn("runArgs[%d] %s is accepted and ignored: Hangar names, labels and schedules the workspace's pod itself", i, flag)
			}
		case "--rm", "-it", "-i", "-t", "--interactive", "--tty", "-d", "--detach":
		case "--cap-add", "--privileged", "--security-opt", "--device", "--network", "--net", "--pid", "--ipc", "--uts", "--userns", "--cgroupns", "-v", "--volume", "--mount", "-p", "--publish", "-u", "--user", "--gpus", "--add-host", "--dns", "--sysctl", "--cap-drop", "--group-add", "--runtime", "--tmpfs", "--ulimit", "--device-cgroup-rule", "--cgroup-parent", "--volumes-from", "--link", "--entrypoint", "--workdir", "-w", "--cpus", "-m", "--memory":
			t.v.Add(f, "%s is refused: a workspace pod gets no host devices, namespaces, capabilities, mounts or users beyond what Hangar sets (use forwardPorts, mounts, remoteUser, hostRequirements)", flag)
			if !hasVal && i+1 < len(args) && !strings.HasPrefix(args[i+1], "-") && flag != "--privileged" {
				i++
			}
		default:
			t.v.Add(f, "%s is refused: Hangar honours -e/--env, --init, --label, --hostname and --shm-size, and no other docker run flag", flag)
		}
	}
}

// user maps remoteUser (else containerUser) to the pod's uid: never root.
func (t *translator) user(take func(string) (json.RawMessage, bool), d *doc) {
	var names [2]string
	for i, k := range []string{"remoteUser", "containerUser"} {
		r, ok := take(k)
		if !ok {
			continue
		}
		s, ok := t.str("devcontainer."+k, r)
		if !ok {
			continue
		}
		names[i] = t.expand(s, "devcontainer."+k)
		user, group, _ := strings.Cut(names[i], ":")
		f := "devcontainer." + k
		switch {
		case user == "root" || user == "0":
			t.v.Add(f, "is %q: workspaces never run as root; use the image's own user (vscode, node, a uid)", names[i])
			continue
		case user == "":
			t.v.Add(f, "is empty")
			continue
		}
		if d.podUser != nil {
			continue // remoteUser came first
		}
		if uid, err := strconv.ParseInt(user, 10, 32); err == nil && uid > 0 {
			d.podUser = &uid
		} else if uid, ok := knownUsers[user]; ok {
			d.podUser = &uid
		} else {
			t.warn("%s %q is not a user whose uid Hangar knows (it knows vscode, node and codespace, 1000, and numbers): the workspace runs as Hangar's uid 5001; give the uid", k, user)
		}
		if gid, err := strconv.ParseInt(group, 10, 32); err == nil && gid > 0 && d.podUser != nil {
			d.podGroup = &gid
		}
	}
	if d.podUser == nil && names[0] == "" && names[1] == "" && t.compose != nil && t.compose.uid != nil {
		// The primary service's user, as containerUser.
		d.podUser, d.podGroup = t.compose.uid, t.compose.gid
	}
	if d.podUser == nil && names[0] == "" && names[1] == "" && strings.HasPrefix(t.image, devcontainersImages) {
		// The Dev Containers images name vscode (uid 1000) as their remoteUser in their metadata,
		// which Hangar does not read from the registry.
		uid := knownUsers["vscode"]
		d.podUser = &uid
	}
	t.users = names
	if names[0] != "" && names[1] != "" && names[0] != names[1] {
		t.warn("remoteUser %q and containerUser %q differ: a workspace runs every process as one user, remoteUser", names[0], names[1])
	}
}

// features reads `features`, an object of OCI references to their options, in the order given
// (the executor installs them in that order, after dependsOn and installsAfter): the image build's
// Features. An entry's value is an object of options (strings and booleans; numbers are taken as
// their text), a string (the `version` option), or true.
func (t *translator) features(r json.RawMessage) {
	const f = "devcontainer.features"
	dec := json.NewDecoder(bytes.NewReader(r))
	dec.UseNumber()
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		t.v.Add(f, "must be an object of feature references to their options")
		return
	}
	var feats []imagebuild.Feature
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			t.v.Add(f, "must be an object of feature references to their options")
			return
		}
		ref := tok.(string) // an object's key
		var val json.RawMessage
		if err := dec.Decode(&val); err != nil {
			t.v.Add(f, "must be an object of feature references to their options")
			return
		}
		ff := fieldPath(f, ref)
		if seen[ref] {
			t.v.Add(ff, "is given twice")
			continue
		}
		seen[ref] = true
		if msg := imagebuild.CheckFeature(ref); msg != "" {
			t.v.Add(ff, "%s", msg)
			t.featuresRefused = true
			continue
		}
		opts, ok := featureOptions(val)
		if !ok {
			t.v.Add(ff, "must be an object of options (strings and true/false), a version string, or true")
			t.featuresRefused = true
			continue
		}
		feats = append(feats, imagebuild.Feature{Ref: ref, Options: opts})
	}
	if len(feats) > 0 {
		t.spec().Features = feats
	}
}

// featureOptions reads a feature's value into its options (nil: none).
func featureOptions(val json.RawMessage) (map[string]any, bool) {
	var version string
	if json.Unmarshal(val, &version) == nil {
		return map[string]any{"version": version}, true
	}
	var b bool
	if json.Unmarshal(val, &b) == nil {
		return nil, b // false is no value a feature takes
	}
	var raw map[string]json.RawMessage
	if json.Unmarshal(val, &raw) != nil {
		return nil, false
	}
	var opts map[string]any
	for k, v := range raw {
		var s string
		var n json.Number
		var b bool
		switch {
		case json.Unmarshal(v, &s) == nil:
			opts = setOption(opts, k, s)
		case json.Unmarshal(v, &b) == nil:
			opts = setOption(opts, k, b)
		case json.Unmarshal(v, &n) == nil:
			opts = setOption(opts, k, n.String())
		default:
			return nil, false
		}
	}
	return opts, true
}

func setOption(m map[string]any, k string, v any) map[string]any {
	if m == nil {
		m = map[string]any{}
	}
	m[k] = v
	return m
}

// featureOrder reads overrideFeatureInstallOrder: feature references (without their version, as
// the spec allows), each one of the features.
func (t *translator) featureOrder(take func(string) (json.RawMessage, bool)) {
	r, ok := take("overrideFeatureInstallOrder")
	if !ok {
		return
	}
	const f = "devcontainer.overrideFeatureInstallOrder"
	var order []string
	if err := json.Unmarshal(r, &order); err != nil {
		t.v.Add(f, "must be a list of feature references")
		return
	}
	if len(order) == 0 {
		return
	}
	if t.featuresRefused {
		return // the features' own problems say what to change
	}
	if t.build == nil || len(t.build.Features) == 0 {
		t.v.Add(f, "orders features, but the definition has none")
		return
	}
	for i, o := range order {
		if !slices.ContainsFunc(t.build.Features, func(ft imagebuild.Feature) bool { return imagebuild.SameFeature(ft.Ref, o) }) {
			t.v.Add(fmt.Sprintf("%s[%d]", f, i), "%q is not one of the features", o)
		}
	}
	t.build.FeatureOrder = order
}

// spec returns the image build, started on first use.
func (t *translator) spec() *imagebuild.Spec {
	if t.build == nil {
		t.build = &imagebuild.Spec{}
	}
	return t.build
}

// portAttrs is an entry of portsAttributes.
type portAttrs struct {
	Label            string `json:"label"`
	Protocol         string `json:"protocol"`
	OnAutoForward    string `json:"onAutoForward"`
	RequireLocalPort *bool  `json:"requireLocalPort"`
	ElevateIfNeeded  *bool  `json:"elevateIfNeeded"`
}

// ports turns forwardPorts (with portsAttributes) and appPort into endpoints.
func (t *translator) ports(take func(string) (json.RawMessage, bool), ctr map[string]any) {
	attrs := map[string]portAttrs{}
	if r, ok := take("portsAttributes"); ok {
		var m map[string]json.RawMessage
		if err := json.Unmarshal(r, &m); err != nil {
			t.v.Add("devcontainer.portsAttributes", "must be an object of ports to attributes")
		}
		for _, k := range slices.Sorted(maps.Keys(m)) {
			var a portAttrs
			if err := json.Unmarshal(m[k], &a); err != nil {
				t.v.Add(fieldPath("devcontainer.portsAttributes", k), "must be an object with label, protocol, onAutoForward")
				continue
			}
			attrs[k] = a
		}
	}
	var other *portAttrs
	if r, ok := take("otherPortsAttributes"); ok {
		var a portAttrs
		if err := json.Unmarshal(r, &a); err != nil {
			t.v.Add("devcontainer.otherPortsAttributes", "must be an object with label, protocol, onAutoForward")
		} else {
			other = &a
		}
	}
	type port struct {
		n     int
		field string
	}
	var ports []port
	for _, k := range []string{"forwardPorts", "appPort"} {
		r, ok := take(k)
		if !ok {
			continue
		}
		var list []json.RawMessage
		if err := json.Unmarshal(r, &list); err != nil {
			if k == "appPort" { // appPort may be a single port
				list = []json.RawMessage{r}
			} else {
				t.v.Add("devcontainer."+k, "must be a list of ports (3000 or \"3000\")")
				continue
			}
		}
		for i, e := range list {
			f := fmt.Sprintf("devcontainer.%s[%d]", k, i)
			var n int
			var s string
			switch {
			case json.Unmarshal(e, &n) == nil:
			case json.Unmarshal(e, &s) == nil:
				host, p, hasHost := strings.Cut(s, ":")
				if !hasHost {
					p, host = host, ""
				}
				if k == "appPort" && hasHost { // "8080:3000": the container's port is the second
					host = ""
				}
				var err error
				if n, err = strconv.Atoi(p); err != nil {
					t.v.Add(f, "must be a port number or \"host:port\", got %q", s)
					continue
				}
				if host != "" && host != "localhost" && host != "127.0.0.1" && !t.composeRuns(host) {
					t.warn("%s %q forwards a port of another host (a docker-compose service): a workspace is one pod, so it is ignored", strings.TrimPrefix(f, "devcontainer."), s)
					continue
				}
			default:
				t.v.Add(f, "must be a port number or \"host:port\"")
				continue
			}
			if n < 1 || n > 65535 {
				t.v.Add(f, "must be between 1 and 65535, got %d", n)
				continue
			}
			if n == devfile.HelperSSHPort || n == devfile.EditorPort {
				t.v.Add(f, "port %d is Hangar's own (its SSH helper's or web editor's); choose another", n)
				continue
			}
			if slices.ContainsFunc(ports, func(p port) bool { return p.n == n }) {
				if k == "forwardPorts" {
					t.warn("%s: port %d is listed twice; once is enough", strings.TrimPrefix(f, "devcontainer."), n)
				}
				continue
			}
			ports = append(ports, port{n, f})
		}
	}
	if len(attrs) > 0 {
		for _, k := range slices.Sorted(maps.Keys(attrs)) {
			if n, err := strconv.Atoi(k); err != nil || !slices.ContainsFunc(ports, func(p port) bool { return p.n == n }) {
				t.warn("portsAttributes[%q] names no port of forwardPorts: Hangar does not detect ports that open later, so it is ignored; list the port in forwardPorts", k)
			}
		}
	}
	var endpoints []any
	names := map[string]bool{}
	for _, p := range ports {
		a, ok := attrs[strconv.Itoa(p.n)]
		af := fieldPath("devcontainer.portsAttributes", strconv.Itoa(p.n))
		if !ok && other != nil {
			a, af = *other, "devcontainer.otherPortsAttributes"
		}
		name := strings.Trim(labelSlugRe.ReplaceAllString(strings.ToLower(a.Label), "-"), "-")
		if len(name) > 30 {
			name = strings.Trim(name[:30], "-")
		}
		if name == "" || names[name] || !workspace.IsDNSLabel(name, 63) || strings.HasPrefix(name, "hangar") || !labelSlugLetter(name) {
			name = "port-" + strconv.Itoa(p.n)
		}
		names[name] = true
		ep := map[string]any{"name": name, "targetPort": p.n, "exposure": "public"}
		switch a.Protocol {
		case "", "http":
			ep["protocol"] = "http"
		case "https":
			ep["protocol"] = "https"
		default:
			t.v.Add(af+".protocol", "must be http or https, got %q", a.Protocol)
		}
		switch a.OnAutoForward {
		case "", "notify", "openBrowser", "openBrowserOnce", "openPreview", "silent":
		case "ignore":
			// Not forwarded: declared for the pod's other containers, not served by the proxy.
			ep["exposure"] = "internal"
		default:
			t.v.Add(af+".onAutoForward", "must be notify, openBrowser, openBrowserOnce, openPreview, silent or ignore, got %q", a.OnAutoForward)
		}
		if a.RequireLocalPort != nil || a.ElevateIfNeeded != nil {
			t.warn("%s: requireLocalPort and elevateIfNeeded are ignored: the port is served by Hangar's proxy at its own address", strings.TrimPrefix(af, "devcontainer."))
		}
		endpoints = append(endpoints, ep)
	}
	if len(endpoints) > 0 {
		ctr["endpoints"] = endpoints
	}
}

func labelSlugLetter(s string) bool { return s[0] >= 'a' && s[0] <= 'z' }

// mounts honours volume mounts (each a volume of the workspace, kept across starts) and refuses
// bind mounts.
func (t *translator) mounts(take func(string) (json.RawMessage, bool), d *doc, ctr map[string]any) {
	r, ok := take("mounts")
	if !ok {
		return
	}
	var list []json.RawMessage
	if err := json.Unmarshal(r, &list); err != nil {
		t.v.Add("devcontainer.mounts", "must be a list of mounts")
		return
	}
	var vms []any
	seen := map[string]bool{}
	for i, e := range list {
		f := fmt.Sprintf("devcontainer.mounts[%d]", i)
		var m mount
		var s string
		var obj struct{ Type, Source, Target string }
		switch {
		case json.Unmarshal(e, &s) == nil:
			var err error
			if m, err = parseMount(t.expand(s, f)); err != nil {
				t.v.Add(f, "%v", err)
				continue
			}
		case json.Unmarshal(e, &obj) == nil:
			m = mount{typ: cmpOr(obj.Type, "volume"), source: t.expand(obj.Source, f), target: path.Clean(t.expand(obj.Target, f))}
		default:
			t.v.Add(f, "must be a mount string (type=volume,source=name,target=/path) or an object")
			continue
		}
		switch {
		case m.typ == "bind":
			t.v.Add(f, "binds %q of the host: bind mounts are refused (a workspace has no access to its node's files); use a volume", m.source)
			continue
		case m.typ == "tmpfs":
			t.warn("mounts[%d] is a tmpfs at %s: it is a volume kept with the workspace instead", i, m.target)
		case m.typ != "volume":
			t.v.Add(f, "has type %q; Hangar mounts volumes only", m.typ)
			continue
		}
		if m.target == "" || m.target == "." || !path.IsAbs(m.target) || m.target == "/" {
			t.v.Add(f, "needs an absolute target such as /home/vscode/.cache, got %q", m.target)
			continue
		}
		name := strings.Trim(labelSlugRe.ReplaceAllString(strings.ToLower(cmpOr(m.source, m.target)), "-"), "-")
		if len(name) > 40 {
			name = strings.Trim(name[:40], "-")
		}
		if name == "" || !labelSlugLetter(name) || strings.HasPrefix(name, "hangar") || name == "data" || name == "env" || name == "inventory" {
			name = "vol-" + name
		}
		for base, n := name, 2; seen[name]; n++ {
			name = fmt.Sprintf("%s-%d", base, n)
		}
		seen[name] = true
		d.volumes = append(d.volumes, name)
		vms = append(vms, map[string]any{"name": name, "path": m.target})
	}
	if len(vms) > 0 {
		ctr["volumeMounts"] = vms
	}
}

// hostRequirements become the main container's requests, refused when the agent's caps cannot
// meet them.
func (t *translator) hostRequirements(take func(string) (json.RawMessage, bool), ctr map[string]any) {
	r, ok := take("hostRequirements")
	if !ok {
		return
	}
	var hr struct {
		CPUs    *float64        `json:"cpus"`
		Memory  *string         `json:"memory"`
		Storage *string         `json:"storage"`
		GPU     json.RawMessage `json:"gpu"`
	}
	if err := json.Unmarshal(r, &hr); err != nil {
		t.v.Add("devcontainer.hostRequirements", "must be an object with cpus (a number), memory and storage (\"8gb\")")
		return
	}
	caps := t.opts.Caps
	check := func(f string, want resource.Quantity, what string, caps ...string) bool {
		for _, c := range caps {
			if c == "" {
				continue
			}
			q, err := resource.ParseQuantity(c)
			if err == nil && want.Cmp(q) > 0 {
				t.v.Add(f, "asks for %s %s, more than this agent allows a workspace (%s); ask an admin or use another agent", want.String(), what, q.String())
				return false
			}
		}
		return true
	}
	if hr.CPUs != nil {
		f := "devcontainer.hostRequirements.cpus"
		if *hr.CPUs <= 0 {
			t.v.Add(f, "must be a positive number of CPUs")
		} else if q := *resource.NewMilliQuantity(int64(*hr.CPUs*1000), resource.DecimalSI); check(f, q, "CPUs", caps.Requests.CPU, caps.Limits.CPU) {
			ctr["cpuRequest"] = q.String()
		}
	}
	if hr.Memory != nil {
		f := "devcontainer.hostRequirements.memory"
		if q, ok := t.size(f, *hr.Memory); ok && check(f, q, "of memory", caps.Requests.Memory, caps.Limits.Memory) {
			ctr["memoryRequest"] = q.String()
		}
	}
	if hr.Storage != nil {
		f := "devcontainer.hostRequirements.storage"
		if q, ok := t.size(f, *hr.Storage); ok {
			check(f, q, "of storage", dataSize)
		}
	}
	if len(hr.GPU) > 0 && string(hr.GPU) != "false" && string(hr.GPU) != "null" {
		if string(hr.GPU) == `"optional"` {
			t.warn("hostRequirements.gpu is optional: the workspace gets no GPU")
		} else {
			t.v.Add("devcontainer.hostRequirements.gpu", "asks for a GPU, which Hangar's workspaces do not get")
		}
	}
}

var sizeRe = regexp.MustCompile(`^([0-9]+(?:\.[0-9]+)?)\s*([kmgt]b)?$`)

// size reads "8gb", "512mb" (binary units, as the spec's examples mean them) into a quantity.
func (t *translator) size(f, s string) (resource.Quantity, bool) {
	g := sizeRe.FindStringSubmatch(strings.ToLower(strings.TrimSpace(s)))
	if g == nil {
		t.v.Add(f, "must be a size such as 8gb or 512mb, got %q", s)
		return resource.Quantity{}, false
	}
	n, _ := strconv.ParseFloat(g[1], 64)
	mult := map[string]float64{"": 1, "kb": 1 << 10, "mb": 1 << 20, "gb": 1 << 30, "tb": 1 << 40}[g[2]]
	if n <= 0 || n*mult > 1<<50 {
		t.v.Add(f, "must be a positive size up to 1024tb, got %q", s)
		return resource.Quantity{}, false
	}
	return *resource.NewQuantity(int64(n*mult), resource.BinarySI), true
}

// Lifecycle commands, in the spec's order: the first three once per workspace, the others at each
// start.
var lifecycleCommands = []struct {
	key, id string
	once    bool
}{
	{"onCreateCommand", "on-create", true},
	{"updateContentCommand", "update-content", true},
	{"postCreateCommand", "post-create", true},
	{"postStartCommand", "post-start", false},
	{"postAttachCommand", "post-attach", false},
}

func (t *translator) lifecycle(take func(string) (json.RawMessage, bool), d *doc) {
	for _, lc := range lifecycleCommands {
		r, ok := take(lc.key)
		if !ok {
			continue
		}
		f := "devcontainer." + lc.key
		line, ok := t.commandLine(f, r)
		if !ok || strings.TrimSpace(line) == "" {
			continue
		}
		if lc.key == "postAttachCommand" {
			// Often a server that keeps running (streamlit run ...): it must not hold the start up,
			// which waits for the postStart commands to end before serving SSH.
			logFile := path.Join(d.sourcePath, ".hangar", "post-attach.log")
			line = fmt.Sprintf("mkdir -p %s && nohup /bin/sh -c %s > %s 2>&1 < /dev/null &", shellQuote(path.Dir(logFile)), shellQuote(line), shellQuote(logFile))
			t.warn("postAttachCommand runs at each start of the workspace, in the background after postStartCommand (its output goes to %s), not at each attach: an SSH session or the editor attaching does not run it", logFile)
		}
		cmd := map[string]any{"id": lc.id, "exec": map[string]any{"component": componentName, "commandLine": line, "workingDir": t.folder}}
		if lc.once {
			cmd["attributes"] = map[string]any{devfile.OncePerWorkspaceAttribute: true}
		}
		d.commands = append(d.commands, cmd)
		d.postStart = append(d.postStart, lc.id)
	}
}

// commandLine reads a lifecycle command's string (a shell command line), array (a program and its
// arguments, run without a shell: quoted here) or object form (named commands the spec runs in
// parallel: here too, and the command fails when one of them does).
func (t *translator) commandLine(f string, r json.RawMessage) (string, bool) {
	var s string
	if json.Unmarshal(r, &s) == nil {
		return t.expandCommand(s, f), true
	}
	var argv []string
	if json.Unmarshal(r, &argv) == nil {
		return t.argv(f, argv), true
	}
	var obj map[string]json.RawMessage
	if json.Unmarshal(r, &obj) != nil {
		t.v.Add(f, "must be a string, a list of strings or an object of named commands")
		return "", false
	}
	var b strings.Builder
	keys := slices.Sorted(maps.Keys(obj))
	for i, k := range keys {
		kf := fieldPath(f, k)
		var line string
		if json.Unmarshal(obj[k], &s) == nil {
			line = t.expandCommand(s, kf)
		} else if json.Unmarshal(obj[k], &argv) == nil {
			line = t.argv(kf, argv)
		} else {
			t.v.Add(kf, "must be a string or a list of strings")
			return "", false
		}
		fmt.Fprintf(&b, "(\n%s\n) &\np%d=$!\n", line, i)
	}
	if len(keys) == 0 {
		return "", true
	}
	b.WriteString("s=0\n")
	for i, k := range keys {
		fmt.Fprintf(&b, "wait $p%d || { s=$?; echo %s failed with status $s >&2; }\n", i, shellQuote(k))
	}
	b.WriteString("(exit $s)")
	return b.String(), true
}

func (t *translator) argv(f string, argv []string) string {
	if len(argv) == 0 {
		return ""
	}
	q := make([]string, len(argv))
	for i, a := range argv {
		q[i] = shellQuote(t.expand(a, fmt.Sprintf("%s[%d]", f, i)))
	}
	return strings.Join(q, " ")
}

// expandCommand expands a command line: ${containerEnv:X} becomes ${X}, for the shell that runs it.
func (t *translator) expandCommand(s, f string) string {
	return t.expandWith(s, f, func(name string) string { return "${" + name + "}" })
}

func shellQuote(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_./=:,@+%", r))
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// customizations: the web editor is injected, with VS Code's settings as its user settings; the
// extensions are not installed.
func (t *translator) customizations(take func(string) (json.RawMessage, bool), d *doc) {
	r, ok := take("customizations")
	if !ok {
		return
	}
	var c map[string]json.RawMessage
	if err := json.Unmarshal(r, &c); err != nil {
		t.v.Add("devcontainer.customizations", "must be an object of tools to their settings")
		return
	}
	for _, tool := range slices.Sorted(maps.Keys(c)) {
		if tool != "vscode" {
			t.warn("customizations.%s is ignored: it is for another tool", tool)
			continue
		}
		var vs struct {
			Extensions []string        `json:"extensions"`
			Settings   json.RawMessage `json:"settings"`
		}
		if err := json.Unmarshal(c[tool], &vs); err != nil {
			t.v.Add("devcontainer.customizations.vscode", "must be an object with extensions (a list of ids) and settings (an object)")
			continue
		}
		if len(vs.Extensions) > 0 {
			t.warn("customizations.vscode.extensions (%s) are not installed: the web editor starts with its own bundled extensions; install these from its Extensions view", strings.Join(vs.Extensions, ", "))
		}
		if len(vs.Settings) > 0 && !isEmptyObject(vs.Settings) {
			var settings map[string]json.RawMessage
			if json.Unmarshal(vs.Settings, &settings) != nil {
				t.v.Add("devcontainer.customizations.vscode.settings", "must be an object of settings")
				continue
			}
			// The web editor's user settings, written at the first start unless the user has some
			// already: defaults, as the spec means them, that the user may change afterwards.
			b, _ := json.MarshalIndent(settings, "", "  ") // decoded JSON: cannot fail
			file := devfile.EditorSettingsFile(d.sourcePath)
			line := fmt.Sprintf("f=%s; [ -e \"$f\" ] || { mkdir -p %s && printf '%%s\\n' %s > \"$f\"; }", shellQuote(file), shellQuote(path.Dir(file)), shellQuote(string(b)))
			cmd := map[string]any{"id": "vscode-settings", "attributes": map[string]any{devfile.OncePerWorkspaceAttribute: true},
				"exec": map[string]any{"component": componentName, "commandLine": line, "workingDir": t.folder}}
			d.commands = append([]map[string]any{cmd}, d.commands...)
			d.postStart = append([]string{"vscode-settings"}, d.postStart...)
		}
	}
}

func (t *translator) str(f string, r json.RawMessage) (string, bool) {
	var s string
	if err := json.Unmarshal(r, &s); err != nil {
		t.v.Add(f, "must be a string")
		return "", false
	}
	return s, true
}

func isEmptyObject(r json.RawMessage) bool {
	var m map[string]json.RawMessage
	return json.Unmarshal(r, &m) == nil && len(m) == 0
}

func isEmptyArray(r json.RawMessage) bool {
	var a []json.RawMessage
	return json.Unmarshal(r, &a) == nil && len(a) == 0
}

// fieldPath is parent.key, or parent["key"] when key is not a plain name.
func fieldPath(parent, key string) string {
	if envNameRe.MatchString(key) {
		return parent + "." + key
	}
	return fmt.Sprintf("%s[%q]", parent, key)
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}
