package devcontainer

// A docker-compose devcontainer on one pod: each service that runs becomes a container of the
// workspace's pod, the primary service (devcontainer.json's `service`) its main container. The
// services share the pod's network, as they share a compose network, so each service's name is
// mapped to 127.0.0.1 in the pod's /etc/hosts. docs/decisions.md ("devcontainer.json:
// docker-compose on one pod") says what each compose field becomes and why the others are refused.

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"

	yaml3 "go.yaml.in/yaml/v3"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/hangar-dev/hangar/internal/devfile"
	"github.com/hangar-dev/hangar/internal/imagebuild"
	"github.com/hangar-dev/hangar/internal/workspace"
)

// Bounds of what a compose devcontainer reads from the repository.
const (
	maxComposeFiles = 8
	// MaxComposeBytes caps each compose file, as MaxBytes caps a devcontainer.json.
	MaxComposeBytes = 256 << 10
	maxEnvFileBytes = 64 << 10
	// maxComposeValues caps the values a compose file expands to, aliases and merge keys
	// followed: a "billion laughs" file is refused after this many, not after it fills memory.
	maxComposeValues = 100_000
	maxComposeDepth  = 64
	maxServices      = 32
)

const composeField = "devcontainer.dockerComposeFile"

// composeSetup is a read compose definition: what the devcontainer.json's other fields need
// (the primary service's image, environment, user and repository mount), and the services for
// composeFinish.
type composeSetup struct {
	primary    string
	services   map[string]map[string]any // merged, interpolated
	running    []string                  // the primary first, then the others sorted
	volumes    map[string]bool           // the top-level volumes
	projectDir string                    // the first compose file's folder, in the repository
	// repoDir is where the primary service mounts the repository ("": it does not), and
	// repoField the volume entry that says so.
	repoDir, repoField string
	image              string
	env                []map[string]any
	uid, gid           *int64
}

// composeRead reads dockerComposeFile, service and runServices. It returns nil when they cannot be
// honoured (the problems are recorded).
func (t *translator) composeRead(raw map[string]json.RawMessage) *composeSetup {
	if t.opts.Repo == nil {
		t.v.Add(composeField, "names docker-compose files of the repository: Hangar reads them only when the workspace is created from its repository (hangar create --repo); a devcontainer.json given on its own cannot bring them")
		return nil
	}
	var files []string
	var one string
	if json.Unmarshal(raw["dockerComposeFile"], &one) == nil {
		files = []string{one}
	} else if json.Unmarshal(raw["dockerComposeFile"], &files) != nil || len(files) == 0 {
		t.v.Add(composeField, "must be a file name or a non-empty list of file names")
		return nil
	}
	if len(files) > maxComposeFiles {
		t.v.Add(composeField, "lists %d files; at most %d", len(files), maxComposeFiles)
		return nil
	}
	var primary string
	if r, ok := raw["service"]; !ok || json.Unmarshal(r, &primary) != nil || primary == "" {
		t.v.Add("devcontainer.service", "is required with dockerComposeFile: name the service that is the workspace's container")
		return nil
	}
	var runServices []string
	if r, ok := raw["runServices"]; ok && string(r) != "null" {
		if err := json.Unmarshal(r, &runServices); err != nil {
			t.v.Add("devcontainer.runServices", "must be a list of service names")
			return nil
		}
	}

	cs := &composeSetup{primary: primary, volumes: map[string]bool{}}
	var merged map[string]any
	for i, name := range files {
		f := composeField
		if len(files) > 1 {
			f = fmt.Sprintf("%s[%d]", composeField, i)
		}
		p, ok := t.repoPath(f, cmpOr(t.opts.Dir, "."), name)
		if !ok {
			return nil
		}
		if i == 0 {
			cs.projectDir = path.Dir(p)
		}
		data, err := readBounded(t.opts.Repo, p, MaxComposeBytes)
		if err != nil {
			t.v.Add(f, "%s: %v", p, err)
			return nil
		}
		doc, unset, err := decodeCompose(data, t.composeVars(cs.projectDir))
		if err != nil {
			t.v.Add(f, "%s: %v", p, err)
			return nil
		}
		for _, name := range unset {
			t.warn("dockerComposeFile %s uses ${%s}, which the project's .env does not set: it is empty (there is no local shell whose environment compose would read)", p, name)
		}
		if merged == nil {
			merged = doc
		} else {
			merged, _ = mergeCompose("", merged, doc).(map[string]any)
		}
	}
	merged, _ = dropResets(merged).(map[string]any)
	return t.composeServices(cs, merged, runServices)
}

// composeVars returns the variables of the project's .env file, for interpolation (a missing
// file is none).
func (t *translator) composeVars(projectDir string) map[string]string {
	data, err := readBounded(t.opts.Repo, path.Join(projectDir, ".env"), maxEnvFileBytes)
	if err != nil {
		return map[string]string{}
	}
	vars, _ := parseEnvFile(data)
	return vars
}

// parseEnvFile reads KEY=VALUE lines (# comments, `export `, single or double quotes).
func parseEnvFile(data []byte) (map[string]string, error) {
	out := map[string]string{}
	for i, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSpace(strings.TrimSuffix(line, "\r"))
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		line = strings.TrimPrefix(line, "export ")
		k, val, ok := strings.Cut(line, "=")
		k = strings.TrimSpace(k)
		if !ok || !envNameRe.MatchString(k) {
			return out, fmt.Errorf("line %d is not NAME=value", i+1)
		}
		val = strings.TrimSpace(val)
		switch {
		case len(val) >= 2 && val[0] == '\'' && val[len(val)-1] == '\'':
			val = val[1 : len(val)-1]
		case len(val) >= 2 && val[0] == '"' && val[len(val)-1] == '"':
			val = strings.NewReplacer(`\n`, "\n", `\"`, `"`, `\\`, `\`).Replace(val[1 : len(val)-1])
		default:
			if j := strings.Index(val, " #"); j >= 0 {
				val = strings.TrimSpace(val[:j])
			}
		}
		out[k] = val
	}
	return out, nil
}

// compose's !reset and !override tags, for override files.
type (
	resetTag    struct{}
	overrideTag struct{ v any }
)

// yamlReader converts a YAML node tree to plain values (maps, lists, strings, nil), following
// aliases and merge keys within a budget, and interpolating ${VAR} in scalars as compose does.
type yamlReader struct {
	values   int
	vars     map[string]string
	unset    map[string]bool
	problems []string
}

var errTooBig = fmt.Errorf("expands to more than %d values (YAML aliases and merge keys followed): refused", maxComposeValues)

// decodeCompose reads one compose file, interpolated from vars; unset lists the variables it uses
// that vars does not set and gives no default for (they are empty), sorted.
func decodeCompose(data []byte, vars map[string]string) (doc map[string]any, unset []string, err error) {
	dec := yaml3.NewDecoder(bytes.NewReader(data))
	var root yaml3.Node
	if err := dec.Decode(&root); err != nil {
		if errors.Is(err, io.EOF) {
			return map[string]any{}, nil, nil
		}
		return nil, nil, fmt.Errorf("is not valid YAML: %s", strings.TrimPrefix(err.Error(), "yaml: "))
	}
	var next yaml3.Node
	if err := dec.Decode(&next); !errors.Is(err, io.EOF) {
		return nil, nil, errors.New("holds more than one YAML document")
	}
	r := &yamlReader{vars: vars, unset: map[string]bool{}}
	v, err := r.value(&root, 0)
	if err != nil {
		return nil, nil, err
	}
	if len(r.problems) > 0 {
		return nil, nil, errors.New(r.problems[0])
	}
	m, ok := v.(map[string]any)
	if !ok && v != nil {
		return nil, nil, errors.New("must be a mapping with services")
	}
	if m == nil {
		m = map[string]any{}
	}
	return m, slices.Sorted(maps.Keys(r.unset)), nil
}

func (r *yamlReader) value(n *yaml3.Node, depth int) (any, error) {
	if r.values++; r.values > maxComposeValues {
		return nil, errTooBig
	}
	if depth > maxComposeDepth {
		return nil, fmt.Errorf("nests deeper than %d levels", maxComposeDepth)
	}
	switch n.Kind {
	case yaml3.DocumentNode:
		if len(n.Content) == 0 {
			return nil, nil
		}
		return r.value(n.Content[0], depth+1)
	case yaml3.AliasNode:
		if n.Alias == nil {
			return nil, fmt.Errorf("line %d: an alias to nothing", n.Line)
		}
		return r.value(n.Alias, depth+1)
	case yaml3.ScalarNode:
		switch n.Tag {
		case "!reset":
			return resetTag{}, nil
		case "!!null":
			return nil, nil
		case "!!bool":
			return strings.ToLower(n.Value), nil
		case "!!str", "!!int", "!!float", "!!timestamp", "!!binary", "!override":
			return r.interpolate(n.Value, n.Line), nil
		}
		return nil, fmt.Errorf("line %d: the tag %s is not supported", n.Line, n.Tag)
	case yaml3.SequenceNode:
		out := make([]any, 0, len(n.Content))
		for _, c := range n.Content {
			v, err := r.value(c, depth+1)
			if err != nil {
				return nil, err
			}
			out = append(out, v)
		}
		return r.tagged(n, out)
	case yaml3.MappingNode:
		out := map[string]any{}
		explicit := map[string]bool{}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, vn := n.Content[i], n.Content[i+1]
			if k.Kind != yaml3.ScalarNode {
				return nil, fmt.Errorf("line %d: a key must be a string", k.Line)
			}
			if k.Value == "<<" && k.Tag == "!!merge" {
				if err := r.mergeKey(out, explicit, vn, depth); err != nil {
					return nil, err
				}
				continue
			}
			if explicit[k.Value] {
				return nil, fmt.Errorf("line %d: the key %q is set twice", k.Line, k.Value)
			}
			v, err := r.value(vn, depth+1)
			if err != nil {
				return nil, err
			}
			explicit[k.Value] = true
			out[k.Value] = v
		}
		return r.tagged(n, out)
	}
	return nil, fmt.Errorf("line %d: a YAML node Hangar cannot read", n.Line)
}

func (r *yamlReader) tagged(n *yaml3.Node, v any) (any, error) {
	switch n.Tag {
	case "!reset":
		return resetTag{}, nil
	case "!override":
		return overrideTag{v}, nil
	case "", "!!seq", "!!map":
		return v, nil
	}
	return nil, fmt.Errorf("line %d: the tag %s is not supported", n.Line, n.Tag)
}

// mergeKey applies `<<: *anchor` (or a list of them): their keys, where the mapping has none.
func (r *yamlReader) mergeKey(out map[string]any, explicit map[string]bool, vn *yaml3.Node, depth int) error {
	srcs := []*yaml3.Node{vn}
	if vn.Kind == yaml3.SequenceNode {
		srcs = vn.Content
	}
	for _, s := range srcs {
		v, err := r.value(s, depth+1)
		if err != nil {
			return err
		}
		m, ok := v.(map[string]any)
		if !ok {
			return fmt.Errorf("line %d: a merge key (<<) must name a mapping", vn.Line)
		}
		for k, x := range m {
			if _, set := out[k]; !set && !explicit[k] {
				out[k] = x
			}
		}
	}
	return nil
}

var interpolationRe = regexp.MustCompile(`\$(\$|\{[^}]*\}|[A-Za-z_][A-Za-z0-9_]*)`)

// interpolate replaces $VAR and ${VAR}, ${VAR:-default}, ${VAR-default}, ${VAR:+alt},
// ${VAR+alt}, ${VAR:?err}, ${VAR?err}, and $$, from the project's .env file: there is no local
// shell whose environment compose would read.
func (r *yamlReader) interpolate(s string, line int) string {
	if !strings.Contains(s, "$") {
		return s
	}
	return interpolationRe.ReplaceAllStringFunc(s, func(m string) string {
		if m == "$$" {
			return "$"
		}
		expr := strings.TrimPrefix(m, "$")
		if strings.HasPrefix(expr, "{") {
			expr = expr[1 : len(expr)-1]
		}
		name, op, arg := expr, "", ""
		if i := strings.IndexAny(expr, ":-+?"); i >= 0 {
			name, op = expr[:i], expr[i:]
			if strings.HasPrefix(op, ":") && len(op) > 1 {
				op, arg = op[:2], op[2:]
			} else {
				op, arg = op[:1], op[1:]
			}
		}
		val, set := r.vars[name]
		switch op {
		case ":-":
			if val == "" {
				return arg
			}
		case "-":
			if !set {
				return arg
			}
		case ":+":
			if val != "" {
				return arg
			}
			return ""
		case "+":
			if set {
				return arg
			}
			return ""
		case ":?", "?":
			if !set || (op == ":?" && val == "") {
				r.problems = append(r.problems, fmt.Sprintf("line %d: ${%s} is required (%s) and not set in the project's .env file", line, name, arg))
			}
		case "":
		default:
			r.problems = append(r.problems, fmt.Sprintf("line %d: %s is not a variable reference compose reads", line, m))
			return ""
		}
		if !set {
			r.unset[name] = true // with no default: empty
		}
		return val
	})
}

// mergeCompose merges an override file's value into the earlier files', as docker compose does:
// mappings key by key, environment and labels by name, volumes by target, command and
// entrypoint replaced, other lists appended.
func mergeCompose(key string, base, over any) any {
	switch o := over.(type) {
	case resetTag:
		return o
	case overrideTag:
		return o.v
	}
	if base == nil {
		return over
	}
	switch key {
	case "command", "entrypoint", "healthcheck", "image", "build", "user", "working_dir":
		return over
	case "environment", "labels":
		if bm, ok := keyValues(base); ok {
			if om, ok := keyValues(over); ok {
				maps.Copy(bm, om)
				return bm
			}
		}
		return over
	case "volumes":
		bl, ok1 := base.([]any)
		ol, ok2 := over.([]any)
		if ok1 && ok2 {
			out := slices.Clone(bl)
			at := map[string]int{}
			for i, b := range bl {
				at[volumeTarget(b)] = i
			}
			for _, o := range ol {
				if i, ok := at[volumeTarget(o)]; ok && volumeTarget(o) != "" {
					out[i] = o
				} else {
					at[volumeTarget(o)] = len(out)
					out = append(out, o)
				}
			}
			return out
		}
	}
	if bm, ok := base.(map[string]any); ok {
		if om, ok := over.(map[string]any); ok {
			out := maps.Clone(bm)
			for k, v := range om {
				out[k] = mergeCompose(k, bm[k], v)
			}
			return out
		}
	}
	if bl, ok := base.([]any); ok {
		if ol, ok := over.([]any); ok {
			out := slices.Clone(bl)
			seen := map[string]bool{}
			for _, b := range bl {
				seen[fmt.Sprint(b)] = true
			}
			for _, o := range ol {
				if k := fmt.Sprint(o); !seen[k] {
					seen[k] = true
					out = append(out, o)
				}
			}
			return out
		}
	}
	return over
}

// dropResets removes what !reset cleared and unwraps what !override set, once the files are merged.
func dropResets(v any) any {
	switch x := v.(type) {
	case resetTag:
		return nil
	case overrideTag:
		return dropResets(x.v)
	case map[string]any:
		for k, e := range x {
			if _, reset := e.(resetTag); reset {
				delete(x, k)
				continue
			}
			x[k] = dropResets(e)
		}
	case []any:
		out := x[:0]
		for _, e := range x {
			if _, reset := e.(resetTag); !reset {
				out = append(out, dropResets(e))
			}
		}
		return out
	}
	return v
}

// keyValues reads an environment or labels value: a mapping, or a list of KEY=VALUE (a KEY alone
// is nil: compose takes it from the shell).
func keyValues(v any) (map[string]any, bool) {
	switch x := v.(type) {
	case map[string]any:
		return maps.Clone(x), true
	case []any:
		out := map[string]any{}
		for _, e := range x {
			s, ok := e.(string)
			if !ok {
				return nil, false
			}
			if k, val, has := strings.Cut(s, "="); has {
				out[k] = val
			} else {
				out[k] = nil
			}
		}
		return out, true
	}
	return nil, false
}

func volumeTarget(v any) string {
	switch x := v.(type) {
	case string:
		parts := strings.Split(x, ":")
		if len(parts) == 1 {
			return path.Clean(parts[0])
		}
		return path.Clean(parts[1])
	case map[string]any:
		s, _ := x["target"].(string)
		return path.Clean(s)
	}
	return ""
}

// Service fields: ignored with a warning (why), refused (why).
var (
	composeIgnored = map[string]string{
		"depends_on":        "a workspace's pod starts its containers together",
		"healthcheck":       "a workspace's pod starts its containers together and does not wait for their health",
		"restart":           "the pod restarts a container that ends",
		"networks":          "the services share the pod's network, where each service's name is 127.0.0.1",
		"container_name":    "Hangar names the pod's containers",
		"labels":            "Hangar sets the pod's labels",
		"hostname":          "the pod has one host name",
		"domainname":        "the pod has one host name",
		"links":             "each service's name is 127.0.0.1 in the pod",
		"external_links":    "each service's name is 127.0.0.1 in the pod",
		"extra_hosts":       "the pod's /etc/hosts maps the services' names only",
		"stdin_open":        "containers run without a terminal",
		"tty":               "containers run without a terminal",
		"init":              "",
		"stop_signal":       "Kubernetes stops a container with SIGTERM",
		"stop_grace_period": "the pod's grace period applies",
		"logging":           "container logs go to the node's log",
		"platform":          "the node's platform is used",
		"pull_policy":       "images are pulled if not present",
		"shm_size":          "the pod's /dev/shm is the runtime's default",
		"ulimits":           "the node's limits apply",
		"read_only":         "the container's file system stays writable",
		"working_dir":       "a devfile container starts in its image's working directory",
		"dns":               "the pod uses the cluster's DNS",
		"dns_search":        "the pod uses the cluster's DNS",
		"dns_opt":           "the pod uses the cluster's DNS",
		"mac_address":       "the pod's network is the cluster's",
		"oom_score_adj":     "the kubelet sets it",
		"scale":             "each service runs once",
		"attach":            "",
		"annotations":       "Hangar sets the pod's annotations",
	}
	composeRefused = map[string]string{
		"privileged":          "workspaces run unprivileged, under the restricted Pod Security Standard",
		"cap_add":             "workspaces run with every Linux capability dropped",
		"security_opt":        "workspaces run with the runtime's default seccomp profile and no other security options",
		"network_mode":        "the services share the pod's network and no other",
		"pid":                 "a workspace's pod has its own process namespace",
		"ipc":                 "a workspace's pod has its own IPC namespace",
		"uts":                 "a workspace's pod has its own host name",
		"userns_mode":         "a workspace's pod uses no host namespace",
		"devices":             "a workspace gets no host devices",
		"device_cgroup_rules": "a workspace gets no host devices",
		"gpus":                "a workspace gets no GPU",
		"sysctls":             "a workspace's pod sets no sysctls",
		"cgroup":              "a workspace's pod has its own cgroup",
		"cgroup_parent":       "a workspace's pod has its own cgroup",
		"runtime":             "the node's runtime is used",
		"isolation":           "the node's runtime is used",
		"volumes_from":        "each container mounts volumes of its own compose entry; name a volume both mount",
		"group_add":           "a workspace's processes get no supplementary groups beyond Hangar's",
		"storage_opt":         "a workspace's storage is its volumes",
		"credential_spec":     "it is for Windows containers",
		"secrets":             "compose secrets are files of the host: a workspace has no access to its node's files",
		"configs":             "compose configs are files of the host: a workspace has no access to its node's files",
		"develop":             "compose watch syncs files of the host: the workspace's files are its volume",
	}
)

// composeServices checks the merged definition, picks the services that run and reads the primary.
func (t *translator) composeServices(cs *composeSetup, doc map[string]any, runServices []string) *composeSetup {
	for _, k := range slices.Sorted(maps.Keys(doc)) {
		f := fieldPath(composeField, k)
		switch {
		case k == "services", k == "version", k == "name", strings.HasPrefix(k, "x-"):
		case k == "volumes":
			vols, ok := doc[k].(map[string]any)
			if !ok && doc[k] != nil {
				t.v.Add(f, "must be a mapping of volume names")
				continue
			}
			for _, name := range slices.Sorted(maps.Keys(vols)) {
				cs.volumes[name] = true
				if cfg, ok := vols[name].(map[string]any); ok {
					for _, ck := range slices.Sorted(maps.Keys(cfg)) {
						if ck != "name" && ck != "labels" {
							t.warn("dockerComposeFile volumes.%s.%s is ignored: the volume is a volume of the workspace, kept with it", name, ck)
						}
					}
				}
			}
		case k == "networks":
			t.warn("dockerComposeFile networks are ignored: the services share the pod's network, where each service's name is 127.0.0.1")
		case k == "secrets" || k == "configs" || k == "include":
			t.v.Add(f, "is refused: it names files of the host or other projects, which a workspace cannot read")
		default:
			t.warn("dockerComposeFile %s is not supported by Hangar and is ignored", k)
		}
	}
	services, ok := doc["services"].(map[string]any)
	if !ok || len(services) == 0 {
		t.v.Add(composeField+".services", "must be a mapping of at least one service")
		return nil
	}
	if _, ok := services[cs.primary]; !ok {
		t.v.Add("devcontainer.service", "%q is not a service of the compose files (they have %s)", cs.primary, strings.Join(slices.Sorted(maps.Keys(services)), ", "))
		return nil
	}
	cs.services = map[string]map[string]any{}
	for name, s := range services {
		m, ok := s.(map[string]any)
		if !ok && s != nil {
			t.v.Add(fieldPath(composeField+".services", name), "must be a mapping")
			continue
		}
		cs.services[name] = m
	}
	for _, name := range slices.Sorted(maps.Keys(cs.services)) {
		cs.services[name] = t.extend(cs.services, name, map[string]bool{})
	}
	run := map[string]bool{cs.primary: true}
	if runServices != nil {
		for i, s := range runServices {
			if _, ok := services[s]; !ok {
				t.v.Add(fmt.Sprintf("devcontainer.runServices[%d]", i), "%q is not a service of the compose files", s)
				continue
			}
			run[s] = true
		}
	} else {
		for name, s := range cs.services {
			if _, profiled := s["profiles"]; !profiled {
				run[name] = true
			}
		}
	}
	others := slices.Sorted(maps.Keys(run))
	others = slices.DeleteFunc(others, func(s string) bool { return s == cs.primary })
	cs.running = append([]string{cs.primary}, others...)
	if len(cs.running) > maxServices {
		t.v.Add(composeField+".services", "runs %d services; a workspace's pod runs at most %d", len(cs.running), maxServices)
		return nil
	}

	// The primary: what the devcontainer.json's own fields build on.
	s := cs.services[cs.primary]
	f := fieldPath(composeField+".services", cs.primary)
	if b, ok := s["build"]; ok {
		// The primary's image is built as a devcontainer's `build` is: its Dockerfile and context
		// from the repository become the image build's Base and Steps.
		cs.image = t.composeBuild(cs, f+".build", b)
		if _, ok := s["image"]; ok {
			t.warn("%s.image is ignored with %s.build: Hangar names the built image by its definition's hash", strings.TrimPrefix(f, "devcontainer."), strings.TrimPrefix(f, "devcontainer."))
		}
	} else if img, ok := s["image"].(string); !ok || img == "" || strings.ContainsFunc(img, func(r rune) bool { return r <= ' ' || r == 0x7f }) {
		t.v.Add(f+".image", "must be a container image reference such as mcr.microsoft.com/devcontainers/base:ubuntu")
	} else {
		cs.image = img
	}
	cs.env = t.composeEnv(cs, f, s)
	if u, ok := s["user"]; ok {
		cs.uid, cs.gid = t.composeUser(f+".user", u)
	}
	// Where the repository is: composeFinish reports the problems of the volumes.
	v := t.v
	t.v = &workspace.ValidationError{}
	for i, vol := range asList(s["volumes"]) {
		if m, ok := t.composeVolume(cs, fmt.Sprintf("%s.volumes[%d]", f, i), vol); ok && m.typ == "repo" && cs.repoDir == "" {
			cs.repoDir, cs.repoField = m.target, fmt.Sprintf("%s.volumes[%d]", f, i)
		}
	}
	t.v = v
	return cs
}

func isEmpty(v any) bool {
	switch x := v.(type) {
	case []any:
		return len(x) == 0
	case map[string]any:
		return len(x) == 0
	}
	return false
}

func asList(v any) []any {
	switch x := v.(type) {
	case []any:
		return x
	case nil:
		return nil
	}
	return []any{v}
}

// extend resolves a service's `extends` of another service of the same files: the other's
// definition, the service's own merged over it as compose merges them. extends from another file
// is refused (it would read more files, relative to their own folder).
func (t *translator) extend(services map[string]map[string]any, name string, seen map[string]bool) map[string]any {
	s := services[name]
	e, ok := s["extends"]
	if !ok {
		return s
	}
	f := fieldPath(composeField+".services", name) + ".extends"
	var base string
	switch x := e.(type) {
	case string:
		base = x
	case map[string]any:
		if file, _ := x["file"].(string); file != "" {
			t.v.Add(f+".file", "is refused: Hangar merges a service extending another of the same compose files, not of %q; write the service out", file)
			return s
		}
		base, _ = x["service"].(string)
	}
	if _, ok := services[base]; !ok || base == "" {
		t.v.Add(f, "must name a service of the compose files, got %v", e)
		return s
	}
	if seen[name] {
		t.v.Add(f, "extends %q, which extends it back", base)
		return s
	}
	seen[name] = true
	own := maps.Clone(s)
	delete(own, "extends")
	merged, _ := mergeCompose("", maps.Clone(t.extend(services, base, seen)), own).(map[string]any)
	return merged
}

// composeMount is a service's volume entry, read.
type composeMount struct {
	typ    string // repo (the repository, bound), volume (named or anonymous), tmpfs
	source string // the volume's name ("" anonymous)
	target string // for repo: where the repository itself is
}

// composeVolume reads a volumes entry (short "SRC:DST[:MODE]" or long form).
func (t *translator) composeVolume(cs *composeSetup, f string, v any) (composeMount, bool) {
	var typ, src, dst string
	switch x := v.(type) {
	case string:
		parts := strings.Split(x, ":")
		switch len(parts) {
		case 1:
			dst = parts[0]
		case 2, 3:
			src, dst = parts[0], parts[1]
		default:
			t.v.Add(f, "must be SOURCE:TARGET[:MODE], got %q", x)
			return composeMount{}, false
		}
		switch {
		case src == "":
			typ = "volume"
		case strings.HasPrefix(src, ".") || strings.HasPrefix(src, "/") || strings.HasPrefix(src, "~"):
			typ = "bind"
		default:
			typ = "volume"
		}
	case map[string]any:
		typ, _ = x["type"].(string)
		src, _ = x["source"].(string)
		dst, _ = x["target"].(string)
	default:
		t.v.Add(f, "must be a string SOURCE:TARGET or a mapping with type, source and target")
		return composeMount{}, false
	}
	if !path.IsAbs(dst) || path.Clean(dst) == "/" {
		t.v.Add(f, "needs an absolute target other than /, got %q", dst)
		return composeMount{}, false
	}
	dst = path.Clean(dst)
	switch typ {
	case "volume":
		if src != "" && !cs.volumes[src] {
			t.v.Add(f, "names the volume %q, which the compose files do not declare under volumes", src)
			return composeMount{}, false
		}
		return composeMount{typ: "volume", source: src, target: dst}, true
	case "tmpfs":
		return composeMount{typ: "tmpfs", target: dst}, true
	case "bind":
	default:
		t.v.Add(f, "has type %q; Hangar mounts volumes, tmpfs and the repository", typ)
		return composeMount{}, false
	}
	rel := path.Clean(path.Join(cs.projectDir, src))
	switch {
	case path.IsAbs(src) || strings.HasPrefix(src, "~"):
		t.v.Add(f, "binds %q of the host: bind mounts are refused (a workspace has no access to its node's files); use a named volume", src)
	case rel == ".":
		return composeMount{typ: "repo", target: dst}, true
	case rel == "..":
		return composeMount{typ: "repo", target: path.Join(dst, t.opts.Basename)}, true
	case strings.HasPrefix(rel, "../"):
		t.v.Add(f, "binds %q, outside the repository: only the repository (or the folder it is cloned into) can be mounted", src)
	default:
		t.v.Add(f, "binds %q, a part of the repository: Hangar mounts the whole repository (bind its root, as ..:/workspaces does from .devcontainer), not a file or folder of it", src)
	}
	return composeMount{}, false
}

// composeEnv reads a service's env_file and environment (which wins), as a container's env.
func (t *translator) composeEnv(cs *composeSetup, f string, s map[string]any) []map[string]any {
	vals := map[string]string{}
	for i, e := range asList(s["env_file"]) {
		ef := fmt.Sprintf("%s.env_file[%d]", f, i)
		name, required := "", true
		switch x := e.(type) {
		case string:
			name = x
		case map[string]any:
			name, _ = x["path"].(string)
			if r, _ := x["required"].(string); r == "false" {
				required = false
			}
		}
		p := path.Clean(path.Join(cs.projectDir, name))
		if name == "" || path.IsAbs(name) || !fs.ValidPath(p) {
			t.v.Add(ef, "must be a file of the repository, relative to the first compose file, got %q", name)
			continue
		}
		data, err := readBounded(t.opts.Repo, p, maxEnvFileBytes)
		if err != nil {
			if required {
				t.v.Add(ef, "%s: %v", p, err)
			}
			continue
		}
		m, err := parseEnvFile(data)
		if err != nil {
			t.v.Add(ef, "%s: %v", p, err)
			continue
		}
		maps.Copy(vals, m)
	}
	if e, ok := s["environment"]; ok && e != nil {
		m, ok := keyValues(e)
		if !ok {
			t.v.Add(f+".environment", "must be a mapping or a list of NAME=value")
		}
		for _, k := range slices.Sorted(maps.Keys(m)) {
			if m[k] == nil {
				t.warn("%s.environment.%s has no value: compose takes it from the shell, and there is none; it is not set", strings.TrimPrefix(f, "devcontainer."), k)
				continue
			}
			str, ok := m[k].(string)
			if !ok {
				t.v.Add(fieldPath(f+".environment", k), "must be a string")
				continue
			}
			vals[k] = str
		}
	}
	var out []map[string]any
	for _, k := range slices.Sorted(maps.Keys(vals)) {
		if !envNameRe.MatchString(k) || strings.HasPrefix(strings.ToUpper(k), "HANGAR") {
			t.v.Add(fieldPath(f+".environment", k), "is not a variable name a workspace may set (letters, digits and '_', not starting with HANGAR)")
			continue
		}
		out = append(out, map[string]any{"name": k, "value": kubeLiteral(vals[k])})
	}
	return out
}

// kubeLiteral escapes s for a container's env, command or args, where Kubernetes expands $(NAME)
// and reduces $$ to $: compose has already interpolated it.
func kubeLiteral(s string) string { return strings.ReplaceAll(s, "$", "$$") }

// composeUser reads a service's user: a uid[:gid] or a name Hangar knows, never root.
func (t *translator) composeUser(f string, v any) (uid, gid *int64) {
	s, ok := v.(string)
	if !ok || s == "" {
		t.v.Add(f, "must be a user name or uid[:gid]")
		return nil, nil
	}
	user, group, _ := strings.Cut(s, ":")
	if user == "root" || user == "0" {
		t.v.Add(f, "is %q: workspaces never run as root; give the image's own user as a uid (the container then runs as it)", s)
		return nil, nil
	}
	if n, err := strconv.ParseInt(user, 10, 32); err == nil && n > 0 {
		uid = &n
	} else if n, ok := knownUsers[user]; ok {
		uid = &n
	} else {
		t.warn("%s %q is not a user whose uid Hangar knows (it knows vscode, node and codespace, 1000, and numbers): the container runs as the pod's uid; give the uid", strings.TrimPrefix(f, "devcontainer."), user)
		return nil, nil
	}
	if g, err := strconv.ParseInt(group, 10, 32); err == nil && g > 0 {
		gid = &g
	}
	return uid, gid
}

// composeFinish adds the pod's other containers (the running services besides the primary), the
// primary's ports and volumes, the services' volumes and the host names.
func (t *translator) composeFinish(cs *composeSetup, d *doc, ctr map[string]any) {
	taken := map[string]bool{componentName: true}
	for _, v := range d.volumes {
		taken[v] = true
	}
	unique := func(name, prefix string) string {
		name = strings.Trim(labelSlugRe.ReplaceAllString(strings.ToLower(name), "-"), "-")
		if len(name) > 40 {
			name = strings.Trim(name[:40], "-")
		}
		if name == "" || !labelSlugLetter(name) || strings.HasPrefix(name, "hangar") || devfileReserved[name] {
			name = prefix + name
		}
		for base, n := name, 2; taken[name]; n++ {
			name = fmt.Sprintf("%s-%d", base, n)
		}
		taken[name] = true
		return name
	}
	// Ports: those forwardPorts gave the main container are served already; a port two services
	// declare is refused, naming both.
	portOwner := map[int]string{}
	if eps, ok := ctr["endpoints"].([]any); ok {
		for _, e := range eps {
			portOwner[e.(map[string]any)["targetPort"].(int)] = "forwardPorts"
		}
	}
	volumeNames := map[string]string{} // compose volume -> devfile volume
	var comps []any
	var aliases []string
	for _, name := range cs.running {
		s := cs.services[name]
		f := fieldPath(composeField+".services", name)
		primary := name == cs.primary
		c := ctr
		if !primary {
			c = map[string]any{"mountSources": false}
		}
		for _, k := range slices.Sorted(maps.Keys(s)) {
			if why, ok := composeRefused[k]; ok {
				if k == "privileged" && s[k] != "true" || s[k] == nil || isEmpty(s[k]) {
					continue
				}
				t.v.Add(f+"."+k, "is refused: %s", why)
			} else if why, ok := composeIgnored[k]; ok && why != "" {
				t.warn("%s.%s is ignored: %s", strings.TrimPrefix(f, "devcontainer."), k, why)
			} else if !ok && !composeRead[k] && !strings.HasPrefix(k, "x-") {
				t.warn("%s.%s is not supported by Hangar and is ignored", strings.TrimPrefix(f, "devcontainer."), k)
			}
		}
		if primary {
			if cmd := s["command"]; cmd != nil && !isKeepAlive(cmd) {
				t.warn("%s.command is not run: the main container runs Hangar's helper (SSH, the lifecycle commands), which keeps it running; start the service's process in postStartCommand", strings.TrimPrefix(f, "devcontainer."))
			}
			if s["entrypoint"] != nil {
				t.warn("%s.entrypoint is not run: the main container runs Hangar's helper (SSH, the lifecycle commands)", strings.TrimPrefix(f, "devcontainer."))
			}
		} else {
			if _, ok := s["build"]; ok {
				t.v.Add(f+".build", "is refused: an image build is only for the main container (the primary service); give this service an image")
			} else if img, ok := s["image"].(string); !ok || img == "" || strings.ContainsFunc(img, func(r rune) bool { return r <= ' ' || r == 0x7f }) {
				t.v.Add(f+".image", "must be a container image reference such as postgres:16")
			} else {
				c["image"] = img
			}
			for _, k := range []string{"entrypoint", "command"} {
				if argv, ok := t.composeArgv(f+"."+k, s[k]); ok && argv != nil {
					c[map[string]string{"entrypoint": "command", "command": "args"}[k]] = argv
				}
			}
			if env := t.composeEnv(cs, f, s); len(env) > 0 {
				c["env"] = env
			}
			if u, ok := s["user"]; ok {
				if uid, gid := t.composeUser(f+".user", u); uid != nil {
					sc := map[string]any{"runAsUser": *uid}
					if gid != nil {
						sc["runAsGroup"] = *gid
					}
					c["__overrides"] = map[string]any{"securityContext": sc}
				}
			}
		}
		t.composeResources(f, s, c, primary)

		// Ports: published ones are the workspace's public endpoints, exposed ones stay in the pod.
		var eps []any
		if primary {
			eps, _ = ctr["endpoints"].([]any)
		}
		for _, k := range []string{"ports", "expose"} {
			for i, p := range asList(s[k]) {
				pf := fmt.Sprintf("%s.%s[%d]", f, k, i)
				n, proto, ok := t.composePort(pf, p)
				if !ok {
					continue
				}
				if owner, dup := portOwner[n]; dup {
					if owner == "forwardPorts" || owner == name {
						continue
					}
					t.v.Add(pf, "port %d is declared by the services %s and %s: the services share the pod's network, so only one of them can listen on it", n, owner, name)
					continue
				}
				portOwner[n] = name
				ep := map[string]any{"name": unique(fmt.Sprintf("%s-%d", name, n), "port-"), "targetPort": n, "exposure": "public", "protocol": proto}
				if k == "expose" {
					ep["exposure"] = "none"
				}
				eps = append(eps, ep)
			}
		}
		if len(eps) > 0 {
			c["endpoints"] = eps
		}

		// Volumes: named ones are volumes of the workspace shared by the containers that mount
		// them; the repository is the workspace's data volume; tmpfs is an emptyDir.
		var vms []any
		if primary {
			vms, _ = c["volumeMounts"].([]any)
		}
		tmpfs := asList(s["tmpfs"])
		for i, v := range append(asList(s["volumes"]), tmpfs...) {
			vf := fmt.Sprintf("%s.volumes[%d]", f, i)
			if i >= len(asList(s["volumes"])) {
				vf = fmt.Sprintf("%s.tmpfs[%d]", f, i-len(asList(s["volumes"])))
				str, _ := v.(string)
				target, _, _ := strings.Cut(str, ":")
				v = map[string]any{"type": "tmpfs", "target": target}
			}
			m, ok := t.composeVolume(cs, vf, v)
			if !ok {
				continue
			}
			switch m.typ {
			case "repo":
				if primary {
					if vf != cs.repoField {
						t.v.Add(vf, "mounts the repository a second time (%s already does)", cs.repoField)
					}
					continue // the workspace folder's mount (translate)
				}
				if path.Base(m.target) != t.opts.Basename {
					t.v.Add(vf, "puts the repository at %q: Hangar clones it into a folder named after it (%s), so the target must end in /%s", m.target, t.opts.Basename, t.opts.Basename)
					continue
				}
				c["mountSources"], c["sourceMapping"] = true, path.Dir(m.target)
				continue
			case "volume":
				key := m.source
				if key == "" {
					key = name + ":" + m.target // anonymous: the container's own
				}
				vol, ok := volumeNames[key]
				if !ok {
					vol = unique(cmpOr(m.source, name+"-"+m.target), "vol-")
					volumeNames[key] = vol
					comps = append(comps, map[string]any{"name": vol, "volume": map[string]any{}})
				}
				vms = append(vms, map[string]any{"name": vol, "path": m.target})
			case "tmpfs":
				vol := unique(name+"-tmp-"+m.target, "vol-")
				comps = append(comps, map[string]any{"name": vol, "volume": map[string]any{"ephemeral": true}})
				vms = append(vms, map[string]any{"name": vol, "path": m.target})
			}
		}
		if len(vms) > 0 {
			c["volumeMounts"] = vms
		}

		if hostnameOK(name) {
			aliases = append(aliases, name)
		} else {
			t.warn("%s: the service's name is not a DNS name, so the other containers cannot reach it by name; use 127.0.0.1", strings.TrimPrefix(f, "devcontainer."))
		}
		if !primary {
			comp := map[string]any{"name": unique(name, "svc-"), "container": c}
			if o, ok := c["__overrides"]; ok {
				delete(c, "__overrides")
				comp["attributes"] = map[string]any{"container-overrides": o}
			}
			comps = append([]any{comp}, comps...)
		}
	}
	// Sidecars first, then their volumes, in the order of the services.
	slices.SortStableFunc(comps, func(a, b any) int {
		_, av := a.(map[string]any)["volume"]
		_, bv := b.(map[string]any)["volume"]
		switch {
		case av == bv:
			return 0
		case bv:
			return -1
		}
		return 1
	})
	d.extra = comps
	d.hostAliases = aliases
	if len(aliases) > 0 {
		t.warn("dockerComposeFile: the services run as containers of one pod and share its network: each service's name (%s) is 127.0.0.1 in the pod, so two services cannot listen on one port", strings.Join(aliases, ", "))
	}
}

// Service fields composeFinish and composeServices read.
var composeRead = map[string]bool{
	"image": true, "build": true, "command": true, "entrypoint": true, "environment": true, "env_file": true,
	"user": true, "ports": true, "expose": true, "volumes": true, "tmpfs": true, "mem_limit": true,
	"mem_reservation": true, "cpus": true, "deploy": true, "profiles": true, "cap_drop": true, "extends": true,
}

// devfileReserved are names of the devfile's own volumes.
var devfileReserved = map[string]bool{"data": true, "env": true, "inventory": true}

var hostnameRe = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)

// hostnameOK: a service name that can be a host name in /etc/hosts.
func hostnameOK(s string) bool { return len(s) <= 63 && hostnameRe.MatchString(s) }

var keepAliveRe = regexp.MustCompile(`^(/bin/)?(sleep (infinity|[0-9]+)|tail -f /dev/null)$|while sleep`)

// isKeepAlive reports whether a primary service's command only keeps its container running, which
// the helper does.
func isKeepAlive(v any) bool {
	switch x := v.(type) {
	case string:
		return keepAliveRe.MatchString(strings.TrimSpace(x))
	case []any:
		parts := make([]string, len(x))
		for i, e := range x {
			parts[i], _ = e.(string)
		}
		return keepAliveRe.MatchString(strings.Join(parts, " "))
	}
	return false
}

// composeArgv reads a command or entrypoint: a list, or a string split as a shell splits words
// (without a shell running it), as compose does.
func (t *translator) composeArgv(f string, v any) ([]any, bool) {
	var argv []string
	switch x := v.(type) {
	case nil:
		return nil, true
	case string:
		var err error
		if argv, err = splitWords(x); err != nil {
			t.v.Add(f, "%v", err)
			return nil, false
		}
	case []any:
		for i, e := range x {
			s, ok := e.(string)
			if !ok {
				t.v.Add(fmt.Sprintf("%s[%d]", f, i), "must be a string")
				return nil, false
			}
			argv = append(argv, s)
		}
	default:
		t.v.Add(f, "must be a string or a list of strings")
		return nil, false
	}
	out := make([]any, len(argv))
	for i, a := range argv {
		out[i] = kubeLiteral(a)
	}
	return out, true
}

// splitWords splits s into words as a POSIX shell does, quotes and backslashes included.
func splitWords(s string) ([]string, error) {
	var out []string
	var cur strings.Builder
	inWord := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n':
			if inWord {
				out, inWord = append(out, cur.String()), false
				cur.Reset()
			}
		case c == '\'':
			j := strings.IndexByte(s[i+1:], '\'')
			if j < 0 {
				return nil, errors.New("has an unterminated ' quote")
			}
			cur.WriteString(s[i+1 : i+1+j])
			i, inWord = i+1+j, true
		case c == '"':
			inWord = true
			for i++; ; i++ {
				if i >= len(s) {
					return nil, errors.New(`has an unterminated " quote`)
				}
				if s[i] == '"' {
					break
				}
				if s[i] == '\\' && i+1 < len(s) && strings.IndexByte("\"\\$`\n", s[i+1]) >= 0 {
					i++
				}
				cur.WriteByte(s[i])
			}
		case c == '\\' && i+1 < len(s):
			i++
			cur.WriteByte(s[i])
			inWord = true
		default:
			cur.WriteByte(c)
			inWord = true
		}
	}
	if inWord {
		out = append(out, cur.String())
	}
	return out, nil
}

var composePortRe = regexp.MustCompile(`^(?:(?:\[[0-9a-fA-F:]*\]|[0-9.]*):)?(?:[0-9]*(?:-[0-9]+)?:)?([0-9]+(?:-[0-9]+)?)(?:/(tcp|udp))?$`)

// composePort reads a ports or expose entry (3000, "8080:80", "127.0.0.1:8080:80/tcp", or the
// long form) and returns the container's port.
func (t *translator) composePort(f string, v any) (int, string, bool) {
	var target, proto string
	switch x := v.(type) {
	case string:
		g := composePortRe.FindStringSubmatch(x)
		if g == nil {
			t.v.Add(f, "must be a port such as 3000, \"8080:80\" or \"127.0.0.1:8080:80/tcp\", got %q", x)
			return 0, "", false
		}
		target, proto = g[1], g[2]
	case map[string]any:
		target, _ = x["target"].(string)
		proto, _ = x["protocol"].(string)
	default:
		t.v.Add(f, "must be a port such as 3000 or a mapping with target")
		return 0, "", false
	}
	if strings.Contains(target, "-") {
		t.v.Add(f, "is a range of ports (%s): list each port the workspace serves", target)
		return 0, "", false
	}
	n, err := strconv.Atoi(target)
	if err != nil || n < 1 || n > 65535 {
		t.v.Add(f, "must name a container port between 1 and 65535, got %q", target)
		return 0, "", false
	}
	if n == devfile.HelperSSHPort || n == devfile.EditorPort {
		t.v.Add(f, "port %d is Hangar's own (its SSH helper's or web editor's); choose another", n)
		return 0, "", false
	}
	switch proto {
	case "", "tcp":
		return n, "http", true
	case "udp":
		return n, "udp", true
	}
	t.v.Add(f, "has protocol %q; tcp or udp", proto)
	return 0, "", false
}

// composeResources reads mem_limit, mem_reservation, cpus and deploy.resources into the container's
// requests and limits, refused beyond the agent's caps.
func (t *translator) composeResources(f string, s map[string]any, c map[string]any, primary bool) {
	type res struct{ field, key, kind string }
	var want []struct {
		res
		v any
	}
	add := func(r res, v any) {
		if v != nil {
			want = append(want, struct {
				res
				v any
			}{r, v})
		}
	}
	add(res{f + ".mem_limit", "memoryLimit", "memory"}, s["mem_limit"])
	add(res{f + ".mem_reservation", "memoryRequest", "memory"}, s["mem_reservation"])
	add(res{f + ".cpus", "cpuLimit", "cpu"}, s["cpus"])
	if dep, ok := s["deploy"].(map[string]any); ok {
		for _, k := range slices.Sorted(maps.Keys(dep)) {
			if k != "resources" {
				t.warn("%s.deploy.%s is ignored: each service runs once, in the workspace's pod", strings.TrimPrefix(f, "devcontainer."), k)
			}
		}
		r, _ := dep["resources"].(map[string]any)
		for _, which := range []string{"limits", "reservations"} {
			m, _ := r[which].(map[string]any)
			suffix := map[string]string{"limits": "Limit", "reservations": "Request"}[which]
			for _, k := range slices.Sorted(maps.Keys(m)) {
				kf := fmt.Sprintf("%s.deploy.resources.%s.%s", f, which, k)
				switch k {
				case "memory":
					add(res{kf, "memory" + suffix, "memory"}, m[k])
				case "cpus":
					add(res{kf, "cpu" + suffix, "cpu"}, m[k])
				default:
					t.warn("%s is ignored: Hangar sets a container's cpu and memory", strings.TrimPrefix(kf, "devcontainer."))
				}
			}
		}
	} else if s["deploy"] != nil {
		t.v.Add(f+".deploy", "must be a mapping")
	}
	caps := t.opts.Caps
	for _, w := range want {
		str, _ := w.v.(string)
		var q resource.Quantity
		if w.kind == "cpu" {
			n, err := strconv.ParseFloat(str, 64)
			if err != nil || n <= 0 || n > 1024 {
				t.v.Add(w.field, "must be a positive number of CPUs, got %q", str)
				continue
			}
			q = *resource.NewMilliQuantity(int64(n*1000), resource.DecimalSI)
		} else {
			var ok bool
			if q, ok = composeSize(str); !ok {
				t.v.Add(w.field, "must be a size such as 512m or 2g, got %q", str)
				continue
			}
		}
		capStr := map[string]string{"cpu": caps.Limits.CPU, "memory": caps.Limits.Memory}[w.kind]
		if capq, err := resource.ParseQuantity(capStr); capStr != "" && err == nil && q.Cmp(capq) > 0 {
			t.v.Add(w.field, "asks for %s %s, more than this agent allows a workspace (%s); ask an admin or use another agent", q.String(), w.kind, capq.String())
			continue
		}
		if primary && c[w.key] != nil {
			continue // hostRequirements, the devcontainer.json's own, win
		}
		c[w.key] = q.String()
	}
}

var composeSizeRe = regexp.MustCompile(`^([0-9]+(?:\.[0-9]+)?)\s*([bkmgt]?)b?$`)

// composeSize reads a compose byte size: 512m, 2g, 1.5gb, 1048576 (binary units, as docker reads them).
func composeSize(s string) (resource.Quantity, bool) {
	g := composeSizeRe.FindStringSubmatch(strings.ToLower(strings.TrimSpace(s)))
	if g == nil {
		return resource.Quantity{}, false
	}
	n, _ := strconv.ParseFloat(g[1], 64)
	mult := map[string]float64{"": 1, "b": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}[g[2]]
	if n*mult < 1<<20 || n*mult > 1<<50 {
		return resource.Quantity{}, false
	}
	return *resource.NewQuantity(int64(n*mult), resource.BinarySI), true
}

// composeRuns reports whether name is a service that runs in the workspace's pod (forwardPorts
// may name its port as "db:5432": in the pod, it is a port of localhost).
func (t *translator) composeRuns(name string) bool {
	return t.compose != nil && slices.Contains(t.compose.running, name)
}

// composeBuild reads a primary service's `build` (a context path, or {context, dockerfile, args,
// target}: the context relative to the compose file's folder, the Dockerfile to the context, as
// compose has them) and builds its image from them (dockerfileBuild). It returns the image the
// workspace starts from, "" when refused.
func (t *translator) composeBuild(cs *composeSetup, f string, b any) string {
	ctx, dockerfile := ".", "Dockerfile"
	opts := imagebuild.DockerfileOptions{Args: map[string]string{}}
	switch b := b.(type) {
	case string:
		ctx = b
	case map[string]any:
		for _, k := range slices.Sorted(maps.Keys(b)) {
			v := b[k]
			switch k {
			case "context", "dockerfile", "target":
				s, ok := v.(string)
				if !ok || s == "" {
					t.v.Add(f+"."+k, "must be a non-empty string")
					return ""
				}
				switch k {
				case "context":
					ctx = s
				case "dockerfile":
					dockerfile = s
				default:
					opts.Target = s
				}
			case "args":
				switch a := v.(type) {
				case map[string]any:
					for _, name := range slices.Sorted(maps.Keys(a)) {
						s, ok := a[name].(string)
						if !ok {
							t.v.Add(fieldPath(f+".args", name), "must be a string (a build argument without a value would come from the user's shell, which a workspace has not)")
							continue
						}
						opts.Args[name] = s
					}
				case []any:
					for i, e := range a {
						s, ok := e.(string)
						name, val, hasVal := strings.Cut(s, "=")
						if !ok || !hasVal || name == "" {
							t.v.Add(fmt.Sprintf("%s.args[%d]", f, i), "must be NAME=value")
							continue
						}
						opts.Args[name] = val
					}
				default:
					t.v.Add(f+".args", "must be a map or a list of NAME=value")
				}
			case "cache_from", "cache_to", "labels", "pull", "no_cache", "platforms", "tags":
				t.warn("%s.%s is ignored: Hangar builds in the cluster and keeps the image under the definition's hash", strings.TrimPrefix(f, "devcontainer."), k)
			default:
				t.v.Add(f+"."+k, "is not supported in a Hangar image build (it honours context, dockerfile, args and target)")
			}
		}
	default:
		t.v.Add(f, "must be the build context's path or an object with context, dockerfile, args and target")
		return ""
	}
	ctxDir, ok := t.repoPath(f+".context", cs.projectDir, ctx)
	if !ok {
		return ""
	}
	file, ok := t.repoPath(f+".dockerfile", ctxDir, dockerfile)
	if !ok {
		return ""
	}
	return t.dockerfileBuild(f+".dockerfile", f+".context", f+".target", file, ctxDir, opts)
}
