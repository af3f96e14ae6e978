//go:build linux

package imagebuild

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// resolveFeatures fetches the Spec's features and what they dependsOn (at most maxFeatures, at
// most maxFeatureDepth levels), extracts each into a folder of work (its Dir is the folder's
// name), refuses those that need privileges, checks their options, and orders them.
func (x *Executor) resolveFeatures(ctx context.Context, spec Spec, work string) ([]*featureNode, error) {
	type pending struct {
		ref     string
		options map[string]any
		depth   int
		from    string // the dependent's key
	}
	var queue []pending
	for _, f := range spec.Features {
		queue = append(queue, pending{ref: f.Ref, options: f.Options})
	}
	nodes := map[string]*featureNode{}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		ref, err := x.parseRef(p.ref)
		if err != nil {
			return nil, fmt.Errorf("feature %s: %s", p.ref, oneLine(err))
		}
		key := featureKey(ref.Name(), p.options)
		if p.from != "" {
			nodes[p.from].deps = append(nodes[p.from].deps, key)
		}
		if _, ok := nodes[key]; ok {
			continue
		}
		if p.depth > maxFeatureDepth {
			return nil, fmt.Errorf("feature %s: dependsOn goes deeper than %d levels", p.ref, maxFeatureDepth)
		}
		if len(nodes) == maxFeatures {
			return nil, fmt.Errorf("feature %s: more than %d features with their dependencies", p.ref, maxFeatures)
		}
		dir := filepath.Join(work, fmt.Sprintf("feature-%d", len(nodes)))
		meta, err := x.fetchFeature(ctx, ref, dir)
		if err != nil {
			return nil, fmt.Errorf("feature %s: %s", p.ref, registryMessage(err))
		}
		if why := meta.refusal(); why != "" {
			return nil, fmt.Errorf("feature %s (%s) %s", p.ref, meta.ID, why)
		}
		if _, err := meta.optionEnv(p.options); err != nil {
			return nil, fmt.Errorf("feature %s: %s", p.ref, oneLine(err))
		}
		nodes[key] = &featureNode{Ref: p.ref, Repo: ref.Context().Name(), Options: p.options, Meta: meta, Dir: filepath.Base(dir), index: len(nodes), key: key}
		for _, d := range sortedKeys(meta.DependsOn) {
			queue = append(queue, pending{ref: d, options: meta.DependsOn[d], depth: p.depth + 1, from: key})
		}
	}
	return installOrder(nodes, spec.FeatureOrder, normalizeFeatureID)
}

// normalizeFeatureID is a feature's reference without its tag or digest, as installsAfter and
// overrideFeatureInstallOrder name features.
func normalizeFeatureID(s string) string {
	if r, err := name.ParseReference(s); err == nil {
		return r.Context().Name()
	}
	return strings.ToLower(s)
}

// fetchFeature reads a feature's OCI artifact and extracts its layer into dir.
func (x *Executor) fetchFeature(ctx context.Context, ref name.Reference, dir string) (*featureMetadata, error) {
	img, err := remote.Image(ref, x.remote(ctx)...)
	if err != nil {
		return nil, err
	}
	m, err := img.Manifest()
	if err != nil {
		return nil, err
	}
	idx := -1
	for i, l := range m.Layers {
		if string(l.MediaType) == FeatureLayerMediaType || len(m.Layers) == 1 {
			idx = i
			break
		}
	}
	if idx < 0 {
		return nil, fmt.Errorf("the artifact has no layer of media type %s", FeatureLayerMediaType)
	}
	if size := m.Layers[idx].Size; size > maxFeatureArchive {
		return nil, fmt.Errorf("the feature's archive is %d bytes, more than %d", size, maxFeatureArchive)
	}
	l, err := img.LayerByDigest(m.Layers[idx].Digest)
	if err != nil {
		return nil, err
	}
	rc, err := l.Compressed()
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, err
	}
	defer root.Close()
	if err := extractFeature(rc, root); err != nil {
		return nil, err
	}
	meta, err := readFeatureMetadata(root)
	if err != nil {
		return nil, err
	}
	if fi, err := root.Stat("install.sh"); err != nil || !fi.Mode().IsRegular() {
		return nil, errors.New("the feature has no install.sh")
	}
	return meta, nil
}

// installFeatures runs each feature's install.sh as root, in its folder, with its options and
// the users as environment variables; its containerEnv then goes into the image's Env, and what
// it contributes to the container into the devcontainer.metadata label.
func (x *Executor) installFeatures(ctx context.Context, spec Spec, st *buildState, features []*featureNode) error {
	if len(features) == 0 {
		return nil
	}
	containerUser := firstOf(spec.ContainerUser, userName(st.user), "root")
	remoteUser := firstOf(spec.RemoteUser, containerUser)
	builtin := []string{
		"_CONTAINER_USER=" + containerUser, "_CONTAINER_USER_HOME=" + x.homeOf(containerUser),
		"_REMOTE_USER=" + remoteUser, "_REMOTE_USER_HOME=" + x.homeOf(remoteUser),
	}
	var metadata []json.RawMessage
	if old, ok := st.labels[MetadataLabel]; ok {
		if err := json.Unmarshal([]byte(old), &metadata); err != nil {
			metadata = []json.RawMessage{json.RawMessage(old)} // one object, as some images have
			if !json.Valid([]byte(old)) {
				metadata = nil
			}
		}
	}
	for i, f := range features {
		fmt.Fprintf(x.Out, "feature %d/%d: %s\n", i+1, len(features), f.Ref)
		m := f.Meta
		if hooks := m.hooks(); len(hooks) > 0 {
			fmt.Fprintf(x.Out, "    %s of feature %s: kept in the image's %s label, not run by the build\n", strings.Join(hooks, ", "), m.ID, MetadataLabel)
		}
		if notes := m.notHonoured(); len(notes) > 0 {
			fmt.Fprintf(x.Out, "    %s of feature %s: not honoured in a Hangar workspace (kept in the %s label)\n", strings.Join(notes, ", "), m.ID, MetadataLabel)
		}
		opts, err := m.optionEnv(f.Options)
		if err != nil {
			return fmt.Errorf("feature %s: %s", f.Ref, oneLine(err))
		}
		env := append(append(withDefaults(st.env), opts...), builtin...)
		if err := x.run(ctx, []string{"/bin/sh", "-c", "chmod +x ./install.sh && ./install.sh"}, "0", f.Dir, env); err != nil {
			return fmt.Errorf("feature %s: install.sh: %s", f.Ref, oneLine(err))
		}
		for _, k := range sortedEnvKeys(m.ContainerEnv) {
			st.env = setEnv(st.env, k, expandEnv(m.ContainerEnv[k], st.env))
		}
		entry, err := m.label(f.Ref)
		if err != nil {
			return fmt.Errorf("feature %s: %s label: %w", f.Ref, MetadataLabel, err)
		}
		metadata = append(metadata, entry)
	}
	b, err := json.Marshal(metadata)
	if err != nil {
		return fmt.Errorf("%s label: %w", MetadataLabel, err)
	}
	st.labels[MetadataLabel] = string(b)
	return nil
}

// homeOf is a user's home directory in the image (/root for root, /home/NAME for a user the
// image does not have yet, as a feature such as common-utils creates it).
func (x *Executor) homeOf(user string) string {
	if id, err := resolveUser(x.Root, user); err == nil && id.Home != "" && id.Name != "" {
		return id.Home
	}
	if user == "root" || user == "0" {
		return "/root"
	}
	return "/home/" + user
}

// userName is a USER value's user part ("vscode:staff" is "vscode").
func userName(u string) string {
	n, _, _ := strings.Cut(u, ":")
	return n
}

func firstOf(s ...string) string {
	for _, v := range s {
		if v != "" {
			return v
		}
	}
	return ""
}

// hooks lists the lifecycle commands the feature contributes.
func (m *featureMetadata) hooks() []string {
	var out []string
	for _, h := range []struct {
		name string
		v    json.RawMessage
	}{{"onCreateCommand", m.OnCreateCommand}, {"updateContentCommand", m.UpdateContentCommand}, {"postCreateCommand", m.PostCreateCommand}, {"postStartCommand", m.PostStartCommand}, {"postAttachCommand", m.PostAttachCommand}} {
		if isSet(h.v) {
			out = append(out, h.name)
		}
	}
	return out
}

// notHonoured lists what the feature asks of the container that a workspace's pod does not do.
func (m *featureMetadata) notHonoured() []string {
	var out []string
	if m.Init {
		out = append(out, "init")
	}
	if m.Entrypoint != "" {
		out = append(out, "entrypoint")
	}
	if isSet(m.Mounts) {
		out = append(out, "mounts")
	}
	return out
}

func isSet(v json.RawMessage) bool {
	v = bytes.TrimSpace(v)
	return len(v) > 0 && !bytes.Equal(v, []byte("null"))
}

// label is the feature's entry of the devcontainer.metadata label.
func (m *featureMetadata) label(ref string) (json.RawMessage, error) {
	e := map[string]any{"id": ref}
	if len(m.ContainerEnv) > 0 {
		e["containerEnv"] = m.ContainerEnv
	}
	if m.Init {
		e["init"] = true
	}
	if m.Entrypoint != "" {
		e["entrypoint"] = m.Entrypoint
	}
	for k, v := range map[string]json.RawMessage{
		"mounts": m.Mounts, "customizations": m.Customizations,
		"onCreateCommand": m.OnCreateCommand, "updateContentCommand": m.UpdateContentCommand,
		"postCreateCommand": m.PostCreateCommand, "postStartCommand": m.PostStartCommand, "postAttachCommand": m.PostAttachCommand,
	} {
		if isSet(v) {
			e[k] = v
		}
	}
	b, err := json.Marshal(e)
	return b, err
}

// indentWriter writes each line of a command's output with a prefix. Safe for the command's
// stdout and stderr at once.
type indentWriter struct {
	mu      sync.Mutex
	w       io.Writer
	prefix  []byte
	midLine bool
}

func newIndentWriter(w io.Writer, prefix string) *indentWriter {
	return &indentWriter{w: w, prefix: []byte(prefix)}
}

func (iw *indentWriter) Write(p []byte) (int, error) {
	iw.mu.Lock()
	defer iw.mu.Unlock()
	var buf []byte
	for _, c := range p {
		if !iw.midLine {
			buf = append(buf, iw.prefix...)
			iw.midLine = true
		}
		buf = append(buf, c)
		if c == '\n' {
			iw.midLine = false
		}
	}
	if _, err := iw.w.Write(buf); err != nil {
		return 0, err
	}
	return len(p), nil
}

// Flush ends a last line that had no newline.
func (iw *indentWriter) Flush() {
	iw.mu.Lock()
	defer iw.mu.Unlock()
	if iw.midLine {
		iw.w.Write([]byte("\n"))
		iw.midLine = false
	}
}
