package buildtest

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"
	"unicode/utf8"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// The media types and annotations of a published Feature, as the devcontainer Features
// distribution spec (devcontainers/spec docs/specs/devcontainer-features-distribution.md) and
// `devcontainer features publish` (devcontainers/cli) have them.
const (
	FeatureConfigMediaType types.MediaType = "application/vnd.devcontainers"
	FeatureLayerMediaType  types.MediaType = "application/vnd.devcontainers.layer.v1+tar"
	// FeatureMetadataAnnotation on the manifest holds devcontainer-feature.json, compacted.
	FeatureMetadataAnnotation = "dev.containers.metadata"
	// TitleAnnotation on the layer names the archive: devcontainer-feature-<id>.tgz.
	TitleAnnotation = "org.opencontainers.image.title"
	// FeatureConfig is the config blob the CLI pushes: an empty JSON object.
	FeatureConfig = "{}"
	// MaxFeatureSize bounds the tar of a Feature's folder (the CLI's are a few KiB).
	MaxFeatureSize = 16 << 20
)

var semverRE = regexp.MustCompile(`^(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)$`)

// Packaged is a Feature's folder packaged for a registry.
type Packaged struct {
	ID, Version string
	Metadata    []byte // devcontainer-feature.json, compacted (the metadata annotation)
	Layer       []byte // the folder's tar
	Manifest    []byte // the OCI image manifest
}

// Tags are the tags the Feature is published as.
func (f *Packaged) Tags() []string {
	p := strings.Split(f.Version, ".")
	return []string{p[0], p[0] + "." + p[1], f.Version, "latest"}
}

// PackageFeature packages the Feature in dir: its devcontainer-feature.json must name an id equal
// to dir's name and a MAJOR.MINOR.PATCH version; the folder must hold install.sh and only regular
// files and folders.
func PackageFeature(dir string) (*Packaged, error) {
	meta, err := os.ReadFile(filepath.Join(dir, "devcontainer-feature.json"))
	if err != nil {
		return nil, fmt.Errorf("feature %s: %w", dir, err)
	}
	var m struct {
		ID      string `json:"id"`
		Version string `json:"version"`
	}
	if err := json.Unmarshal(meta, &m); err != nil {
		return nil, fmt.Errorf("feature %s: devcontainer-feature.json: %w", dir, err)
	}
	if m.ID == "" || m.ID != filepath.Base(dir) {
		return nil, fmt.Errorf("feature %s: devcontainer-feature.json: id %q must be the folder's name %q", dir, m.ID, filepath.Base(dir))
	}
	if !semverRE.MatchString(m.Version) {
		return nil, fmt.Errorf("feature %s: devcontainer-feature.json: version %q is not MAJOR.MINOR.PATCH", dir, m.Version)
	}
	if _, err := os.Stat(filepath.Join(dir, "install.sh")); err != nil {
		return nil, fmt.Errorf("feature %s: %w", dir, err)
	}
	// The metadata goes into a manifest annotation, a JSON string: bytes that are not UTF-8
	// would be changed on the way (to U+FFFD), so the annotation would not be the file.
	if !utf8.Valid(meta) {
		return nil, fmt.Errorf("feature %s: devcontainer-feature.json is not UTF-8", dir)
	}
	var compact bytes.Buffer
	if err := json.Compact(&compact, meta); err != nil {
		return nil, fmt.Errorf("feature %s: devcontainer-feature.json: %w", dir, err)
	}
	layer, err := tarFeature(dir)
	if err != nil {
		return nil, fmt.Errorf("feature %s: %w", dir, err)
	}
	f := &Packaged{ID: m.ID, Version: m.Version, Metadata: compact.Bytes(), Layer: layer}
	config := []byte(FeatureConfig)
	mf := v1.Manifest{
		SchemaVersion: 2,
		MediaType:     types.OCIManifestSchema1,
		Config:        v1.Descriptor{MediaType: FeatureConfigMediaType, Digest: sha256Of(config), Size: int64(len(config))},
		Layers: []v1.Descriptor{{
			MediaType:   FeatureLayerMediaType,
			Digest:      sha256Of(layer),
			Size:        int64(len(layer)),
			Annotations: map[string]string{TitleAnnotation: "devcontainer-feature-" + m.ID + ".tgz"},
		}},
		Annotations: map[string]string{FeatureMetadataAnnotation: compact.String()},
	}
	if f.Manifest, err = json.Marshal(mf); err != nil {
		return nil, err
	}
	return f, nil
}

// tarFeature is the folder as the CLI packs it (`tar.create({cwd: folder}, ['.'])`): "./" and
// then every entry under "./", here in lexical order, with fixed times and owners and the modes
// 0755 (folders and executable files) or 0644, so that a folder gives the same digest wherever it
// is checked out.
func tarFeature(dir string) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		name := "./"
		if rel != "." {
			name = "./" + filepath.ToSlash(rel)
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		h := &tar.Header{Name: name, ModTime: time.Unix(0, 0), Format: tar.FormatPAX}
		switch {
		case d.IsDir():
			h.Typeflag, h.Mode = tar.TypeDir, 0o755
			if rel != "." {
				h.Name += "/"
			}
		case info.Mode().IsRegular():
			h.Typeflag, h.Mode, h.Size = tar.TypeReg, 0o644, info.Size()
			if info.Mode()&0o111 != 0 {
				h.Mode = 0o755
			}
		default:
			return fmt.Errorf("%s: only files and folders may be in a Feature", name)
		}
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if h.Typeflag == tar.TypeReg {
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			if _, err := tw.Write(b); err != nil {
				return err
			}
		}
		if buf.Len() > MaxFeatureSize {
			return fmt.Errorf("the folder's tar is over %d bytes", MaxFeatureSize)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func sha256Of(b []byte) v1.Hash {
	h, _, _ := v1.SHA256(bytes.NewReader(b))
	return h
}

// RawManifest is an OCI image manifest to push as it is (remote.Put).
type RawManifest []byte

func (m RawManifest) RawManifest() ([]byte, error)        { return m, nil }
func (m RawManifest) MediaType() (types.MediaType, error) { return types.OCIManifestSchema1, nil }
