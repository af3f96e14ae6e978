package imagebuild

import (
	"archive/tar"
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"regexp"
	"sort"
	"strings"
)

// Media types of a feature published to an OCI registry (the Dev Containers distribution spec).
const (
	FeatureConfigMediaType = "application/vnd.devcontainers"
	FeatureLayerMediaType  = "application/vnd.devcontainers.layer.v1+tar"
)

// Bounds on what a feature may be: a hostile archive must not fill the disk or the memory.
// maxFeatureArchive is the bytes of a feature's (compressed) layer and of its extracted files. A
// variable only so that the fuzz test can lower it: a 200-byte sparse entry may stand for 64 MiB
// of zeros, and writing those at each run would make fuzzing crawl.
var maxFeatureArchive int64 = 64 << 20

const (
	maxFeatureEntries  = 10000
	maxFeatureMetadata = 1 << 20 // devcontainer-feature.json
	maxFeatures        = 32      // features in one build, dependencies included
	maxFeatureDepth    = 8       // dependsOn levels
)

// featureMetadata is the part of devcontainer-feature.json the build reads.
type featureMetadata struct {
	ID            string                    `json:"id"`
	Version       string                    `json:"version"`
	Name          string                    `json:"name"`
	Options       map[string]featureOption  `json:"options"`
	ContainerEnv  map[string]string         `json:"containerEnv"`
	DependsOn     map[string]map[string]any `json:"dependsOn"`
	InstallsAfter []string                  `json:"installsAfter"`
	// What a build and a workspace without privileges cannot give: refused.
	Privileged  bool     `json:"privileged"`
	CapAdd      []string `json:"capAdd"`
	SecurityOpt []string `json:"securityOpt"`
	// What the workspace's pod does not run: carried in the image's label, said in the log.
	Init           bool            `json:"init"`
	Mounts         json.RawMessage `json:"mounts"`
	Entrypoint     string          `json:"entrypoint"`
	Customizations json.RawMessage `json:"customizations"`
	// Lifecycle hooks (features-contribute-lifecycle-scripts).
	OnCreateCommand      json.RawMessage `json:"onCreateCommand"`
	UpdateContentCommand json.RawMessage `json:"updateContentCommand"`
	PostCreateCommand    json.RawMessage `json:"postCreateCommand"`
	PostStartCommand     json.RawMessage `json:"postStartCommand"`
	PostAttachCommand    json.RawMessage `json:"postAttachCommand"`
}

// featureOption is one declared option.
type featureOption struct {
	Type    string `json:"type"`
	Default any    `json:"default"`
	Enum    []any  `json:"enum"`
}

var featureIDPattern = regexp.MustCompile(`^[a-zA-Z0-9_.-]+$`)

// parseFeatureMetadata reads devcontainer-feature.json; an error names the field.
func parseFeatureMetadata(b []byte) (*featureMetadata, error) {
	if len(b) > maxFeatureMetadata {
		return nil, fmt.Errorf("devcontainer-feature.json: %d bytes, more than %d", len(b), maxFeatureMetadata)
	}
	var m featureMetadata
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("devcontainer-feature.json: %w", err)
	}
	if !featureIDPattern.MatchString(m.ID) {
		return nil, fmt.Errorf("devcontainer-feature.json: id %q: want letters, digits, '.', '_' or '-'", m.ID)
	}
	for _, k := range sortedKeys(m.Options) {
		o := m.Options[k]
		if k == "" || optionEnvName(k) == "_" {
			return nil, fmt.Errorf("devcontainer-feature.json: options: the option id %q is not a name", k)
		}
		switch o.Type {
		case "string", "":
			if o.Default != nil {
				if _, ok := o.Default.(string); !ok {
					return nil, fmt.Errorf("devcontainer-feature.json: options.%s.default: want a string", k)
				}
			}
		case "boolean":
			if o.Default != nil {
				if _, ok := o.Default.(bool); !ok {
					return nil, fmt.Errorf("devcontainer-feature.json: options.%s.default: want a boolean", k)
				}
			}
		default:
			return nil, fmt.Errorf("devcontainer-feature.json: options.%s.type: %q, want \"string\" or \"boolean\"", k, o.Type)
		}
	}
	for k := range m.ContainerEnv {
		if k == "" || strings.ContainsAny(k, "=\x00") {
			return nil, fmt.Errorf("devcontainer-feature.json: containerEnv: %q is not a variable name", k)
		}
	}
	if len(m.DependsOn) > maxFeatures {
		return nil, fmt.Errorf("devcontainer-feature.json: dependsOn: %d features, more than %d", len(m.DependsOn), maxFeatures)
	}
	return &m, nil
}

// refusal says why a feature cannot be built into a Hangar workspace's image ("" if it can).
func (m *featureMetadata) refusal() string {
	var why []string
	if m.Privileged {
		why = append(why, "privileged: true")
	}
	if len(m.CapAdd) > 0 {
		why = append(why, "capAdd: "+strings.Join(m.CapAdd, ", "))
	}
	if len(m.SecurityOpt) > 0 {
		why = append(why, "securityOpt: "+strings.Join(m.SecurityOpt, ", "))
	}
	if len(why) == 0 {
		return ""
	}
	msg := "needs privileges (" + strings.Join(why, "; ") + "), which Hangar's image build and workspaces never have"
	if m.Privileged {
		msg += ": Docker cannot run in a Hangar workspace"
	}
	return msg
}

// optionEnvName is an option id as the environment variable install.sh reads (the spec's
// Option Resolution: non-word characters to "_", leading digits and underscores to one "_",
// upper case).
func optionEnvName(id string) string {
	b := []byte(id)
	for i, c := range b {
		if !(c == '_' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z') {
			b[i] = '_'
		}
	}
	s := string(b)
	if t := strings.TrimLeft(s, "0123456789_"); len(t) != len(s) {
		s = "_" + t
	}
	return strings.ToUpper(s)
}

// optionEnv is the environment a feature's install.sh gets from its options: each declared
// option with the user's value or its default, and the user's undeclared ones as given.
func (m *featureMetadata) optionEnv(user map[string]any) ([]string, error) {
	values := map[string]string{}
	for _, k := range sortedKeys(m.Options) {
		if d := m.Options[k].Default; d != nil {
			values[k] = fmt.Sprint(d)
		}
	}
	for _, k := range sortedKeys(user) {
		v := user[k]
		var s string
		switch v := v.(type) {
		case string:
			s = v
		case bool:
			s = fmt.Sprint(v)
		case float64, int:
			s = fmt.Sprint(v)
		default:
			return nil, fmt.Errorf("option %s: want a string or a boolean", k)
		}
		if o, ok := m.Options[k]; ok {
			if o.Type == "boolean" && s != "true" && s != "false" {
				return nil, fmt.Errorf("option %s: %q is not a boolean", k, s)
			}
			if len(o.Enum) > 0 {
				allowed := false
				var names []string
				for _, e := range o.Enum {
					names = append(names, fmt.Sprint(e))
					allowed = allowed || fmt.Sprint(e) == s
				}
				if !allowed {
					return nil, fmt.Errorf("option %s: %q is not one of %s", k, s, strings.Join(names, ", "))
				}
			}
		}
		values[k] = s
	}
	var env []string
	for _, k := range sortedKeys(values) {
		env = append(env, optionEnvName(k)+"="+values[k])
	}
	return env, nil
}

// extractFeature unpacks a feature's layer (a tar, gzipped or not) into dir. The archive is
// untrusted: only directories and regular files, relative paths that stay inside dir (os.Root
// refuses the rest too), at most maxFeatureEntries entries and maxFeatureArchive bytes.
func extractFeature(r io.Reader, dir *os.Root) error {
	lr := &io.LimitedReader{R: r, N: maxFeatureArchive + 1}
	br := bufio.NewReader(lr)
	tooBig := fmt.Errorf("feature archive: more than %d bytes", maxFeatureArchive)
	var tr *tar.Reader
	if magic, _ := br.Peek(2); bytes.Equal(magic, []byte{0x1f, 0x8b}) {
		zr, err := gzip.NewReader(br)
		if err != nil {
			return fmt.Errorf("feature archive: %w", err)
		}
		defer zr.Close()
		tr = tar.NewReader(zr)
	} else {
		tr = tar.NewReader(br)
	}
	var total int64
	for n := 0; ; n++ {
		h, err := tr.Next()
		if lr.N <= 0 {
			return tooBig // the archive itself is over the bound
		} else if err == io.EOF {
			return nil
		} else if err != nil {
			return fmt.Errorf("feature archive: %w", err)
		}
		if n >= maxFeatureEntries {
			return fmt.Errorf("feature archive: more than %d entries", maxFeatureEntries)
		}
		name, err := featureEntryName(h.Name)
		if err != nil {
			return err
		}
		switch h.Typeflag {
		case tar.TypeDir:
			if name == "." {
				continue
			}
			if err := dir.MkdirAll(name, 0o755); err != nil {
				return fmt.Errorf("feature archive: %s: %w", h.Name, err)
			}
		case tar.TypeReg:
			if name == "." {
				return fmt.Errorf("feature archive: %q is not a file name", h.Name)
			}
			if total += h.Size; h.Size < 0 || total > maxFeatureArchive {
				return tooBig
			}
			if d := path.Dir(name); d != "." {
				if err := dir.MkdirAll(d, 0o755); err != nil {
					return fmt.Errorf("feature archive: %s: %w", h.Name, err)
				}
			}
			f, err := dir.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, fs.FileMode(h.Mode)&0o755|0o600)
			if err != nil {
				return fmt.Errorf("feature archive: %s: %w", h.Name, err)
			}
			_, err = io.CopyN(f, tr, h.Size)
			if cerr := f.Close(); err == nil {
				err = cerr
			}
			if lr.N <= 0 {
				return tooBig
			} else if err != nil {
				return fmt.Errorf("feature archive: %s: %w", h.Name, err)
			}
		case tar.TypeXGlobalHeader:
		default:
			return fmt.Errorf("feature archive: %s: only files and directories are allowed (type %q)", h.Name, string(h.Typeflag))
		}
	}
}

// featureEntryName cleans an archive entry's name ("./install.sh" is "install.sh"; "./" is ".")
// and refuses absolute names and names that leave the folder.
func featureEntryName(n string) (string, error) {
	if n == "" || strings.HasPrefix(n, "/") || strings.ContainsRune(n, 0) || strings.Contains(n, `\`) {
		return "", fmt.Errorf("feature archive: entry %q: not a relative path", n)
	}
	c := path.Clean(n)
	if c == ".." || strings.HasPrefix(c, "../") {
		return "", fmt.Errorf("feature archive: entry %q leaves the feature's folder", n)
	}
	return c, nil
}

// readFeatureMetadata reads devcontainer-feature.json from an extracted feature, bounded.
func readFeatureMetadata(dir *os.Root) (*featureMetadata, error) {
	f, err := dir.Open("devcontainer-feature.json")
	if errors.Is(err, fs.ErrNotExist) {
		return nil, errors.New("the feature has no devcontainer-feature.json")
	} else if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxFeatureMetadata+1))
	if err != nil {
		return nil, fmt.Errorf("devcontainer-feature.json: %w", err)
	}
	return parseFeatureMetadata(b)
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
