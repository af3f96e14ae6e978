// Package ociimage builds the hangar container image without Docker or a registry: one layer per
// platform holding the static hangar binary, a passwd and group entry for the non-root user 65532,
// CA certificates, /tmp and the data and home directories, as an OCI image index (one manifest per
// platform) written to an OCI image layout and a tarball of it, with
// github.com/google/go-containerregistry. scripts/build-image drives it; scripts/kube-load-image
// loads the tarball into the test cluster's node (docs/architecture.md, "Deploy on Kubernetes").
package ociimage

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// The image's user: distroless's "nonroot", so that runAsNonRoot and PodSecurity "restricted" hold.
const (
	UID      = 65532
	UserName = "nonroot"
	Home     = "/home/nonroot"
	// DataDir is where the server chart mounts its volume (the SQLite store and the admin token).
	DataDir = "/data"
	// BinaryPath is the entrypoint.
	BinaryPath = "/usr/local/bin/hangar"
	// CACertsPath is where Go's crypto/x509 looks first on Linux.
	CACertsPath = "/etc/ssl/certs/ca-certificates.crt"
)

// Epoch is the time of every file and of the image: the same inputs give the same digests.
var Epoch = time.Unix(0, 0).UTC()

// Platform is one image of the index: its OS/architecture and the hangar binary built for it.
type Platform struct {
	OS, Arch string
	Binary   string // path of a static hangar binary for OS/Arch
}

// Spec describes the index.
type Spec struct {
	Platforms []Platform
	CACerts   string            // a PEM bundle copied to CACertsPath ("" for none)
	Labels    map[string]string // OCI labels of each image's config (org.opencontainers.image.*)
}

// file is one entry of the layer.
type file struct {
	name     string // without the leading slash
	typeflag byte
	mode     int64
	uid      int
	body     []byte
}

// Layer returns the uncompressed tar of the image's only layer for one hangar binary.
func Layer(binary []byte, caCerts []byte) ([]byte, error) {
	passwd := "root:x:0:0:root:/root:/sbin/nologin\n" +
		fmt.Sprintf("%s:x:%d:%d:%s:%s:/sbin/nologin\n", UserName, UID, UID, UserName, Home)
	group := "root:x:0:\n" + fmt.Sprintf("%s:x:%d:\n", UserName, UID)
	files := []file{
		{name: strings.TrimPrefix(BinaryPath, "/"), typeflag: tar.TypeReg, mode: 0o755, body: binary},
		{name: "etc/passwd", typeflag: tar.TypeReg, mode: 0o644, body: []byte(passwd)},
		{name: "etc/group", typeflag: tar.TypeReg, mode: 0o644, body: []byte(group)},
		{name: "tmp", typeflag: tar.TypeDir, mode: 0o1777},
		{name: strings.TrimPrefix(Home, "/"), typeflag: tar.TypeDir, mode: 0o755, uid: UID},
		{name: strings.TrimPrefix(DataDir, "/"), typeflag: tar.TypeDir, mode: 0o755, uid: UID},
	}
	if caCerts != nil {
		files = append(files, file{name: strings.TrimPrefix(CACertsPath, "/"), typeflag: tar.TypeReg, mode: 0o644, body: caCerts})
	}
	// Parent directories, root's and 0755, unless listed.
	have := map[string]bool{}
	for _, f := range files {
		have[f.name] = true
	}
	for _, f := range files {
		for d := path.Dir(f.name); d != "."; d = path.Dir(d) {
			if !have[d] {
				have[d] = true
				files = append(files, file{name: d, typeflag: tar.TypeDir, mode: 0o755})
			}
		}
	}
	sort.Slice(files, func(i, j int) bool { return files[i].name < files[j].name })
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, f := range files {
		hdr := &tar.Header{Typeflag: f.typeflag, Name: f.name, Mode: f.mode, Uid: f.uid, Gid: f.uid,
			Size: int64(len(f.body)), ModTime: Epoch, Format: tar.FormatPAX}
		if f.typeflag == tar.TypeDir {
			hdr.Name += "/"
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return nil, err
		}
		if _, err := tw.Write(f.body); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// Image builds the image of one platform.
func Image(p Platform, caCerts []byte, labels map[string]string) (v1.Image, error) {
	bin, err := os.ReadFile(p.Binary)
	if err != nil {
		return nil, fmt.Errorf("hangar binary for %s/%s: %w", p.OS, p.Arch, err)
	}
	tarBytes, err := Layer(bin, caCerts)
	if err != nil {
		return nil, err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(tarBytes)), nil
	}, tarball.WithMediaType(types.OCILayer), tarball.WithCompressedCaching)
	if err != nil {
		return nil, err
	}
	img := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
	img, err = mutate.ConfigFile(img, &v1.ConfigFile{
		OS: p.OS, Architecture: p.Arch, Created: v1.Time{Time: Epoch},
		Config: v1.Config{
			User:       fmt.Sprintf("%d:%d", UID, UID),
			Entrypoint: []string{BinaryPath},
			Env:        []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" + Home, "HANGAR_DATA_DIR=" + DataDir},
			WorkingDir: Home,
			Labels:     labels,
		},
	})
	if err != nil {
		return nil, err
	}
	return mutate.Append(img, mutate.Addendum{Layer: layer, History: v1.History{
		Created: v1.Time{Time: Epoch}, CreatedBy: "internal/ociimage: hangar, passwd, CA certificates, /tmp, " + DataDir,
	}})
}

// Index builds the image of every platform and the index over them.
func Index(s Spec) (v1.ImageIndex, error) {
	if len(s.Platforms) == 0 {
		return nil, fmt.Errorf("no platforms")
	}
	var ca []byte
	if s.CACerts != "" {
		b, err := os.ReadFile(s.CACerts)
		if err != nil {
			return nil, fmt.Errorf("CA certificates: %w", err)
		}
		ca = b
	}
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	for _, p := range s.Platforms {
		img, err := Image(p, ca, s.Labels)
		if err != nil {
			return nil, err
		}
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{Add: img,
			Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: p.OS, Architecture: p.Arch}}})
	}
	return idx, nil
}

// WriteLayout writes idx as an OCI image layout in dir (emptied first), naming it ref: the
// annotations containerd (`ctr images import`) and other tools read the name from.
func WriteLayout(dir string, idx v1.ImageIndex, ref string) error {
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return err
	}
	return p.AppendIndex(idx, layout.WithAnnotations(map[string]string{
		"io.containerd.image.name":          ref,
		"org.opencontainers.image.ref.name": ref,
	}))
}

// TarDir writes the files under dir to w as a tar archive (names relative to dir, fixed times): the
// single-file form of a layout that `ctr images import` and `skopeo copy oci-archive:` read.
func TarDir(dir string, w io.Writer) error {
	tw := tar.NewWriter(w)
	var names []string
	if err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p != dir {
			names = append(names, p)
		}
		return nil
	}); err != nil {
		return err
	}
	sort.Strings(names)
	for _, p := range names {
		st, err := os.Lstat(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		rel = filepath.ToSlash(rel)
		if st.IsDir() {
			if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: rel + "/", Mode: 0o755, ModTime: Epoch}); err != nil {
				return err
			}
			continue
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: rel, Mode: 0o644, Size: int64(len(b)), ModTime: Epoch}); err != nil {
			return err
		}
		if _, err := tw.Write(b); err != nil {
			return err
		}
	}
	return tw.Close()
}
