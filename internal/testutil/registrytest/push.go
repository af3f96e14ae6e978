package registrytest

import (
	"archive/tar"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/hangar-dev/hangar/internal/testutil/kubetest"
)

// WorkspaceGitRepo is where PushWorkspaceGitImage puts kubetest.WorkspaceGitImage's image.
const WorkspaceGitRepo = "hangar/workspace-git:dev"

// PushWorkspaceGitImage pushes the image scripts/build-workspace-git-image builds (the one
// kubetest.Cluster.LoadWorkspaceGitImage loads into the node as kubetest.WorkspaceGitImage) to reg
// as WorkspaceGitRepo, and returns its reference for pods (Registry.Ref).
func PushWorkspaceGitImage(t testing.TB, reg *Registry) string {
	t.Helper()
	return PushArchive(t, reg, kubetest.BuildImageArchive(t, "build-workspace-git-image"), WorkspaceGitRepo)
}

// PushArchive pushes the image in archive to reg as repoTag ("team/app:1") and returns its
// reference for pods (Registry.Ref). The archive is either a docker-archive tarball (`docker save`,
// scripts/build-workspace-git-image; it must hold one image) or an OCI image layout in a tarball
// (scripts/build-image; its index.json must name one image or image index, pushed as it is).
func PushArchive(t testing.TB, reg *Registry, archive, repoTag string) string {
	t.Helper()
	oci, err := isOCILayout(archive)
	if err != nil {
		t.Fatalf("registrytest: %s: %v", archive, err)
	}
	if !oci {
		img, err := tarball.ImageFromPath(archive, nil)
		if err != nil {
			t.Fatalf("registrytest: %s as a docker archive: %v", archive, err)
		}
		PushImage(t, reg, img, repoTag)
		return reg.Ref(repoTag)
	}
	dir := t.TempDir()
	if err := untar(archive, dir); err != nil {
		t.Fatalf("registrytest: unpack %s: %v", archive, err)
	}
	idx, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		t.Fatalf("registrytest: %s as an OCI image layout: %v", archive, err)
	}
	im, err := idx.IndexManifest()
	if err != nil {
		t.Fatalf("registrytest: %s: index.json: %v", archive, err)
	}
	if len(im.Manifests) != 1 {
		t.Fatalf("registrytest: %s: index.json names %d manifests, want 1", archive, len(im.Manifests))
	}
	ref := parse(t, reg.LocalRef(repoTag))
	ctx, cancel := ctx()
	defer cancel()
	d := im.Manifests[0]
	if d.MediaType.IsIndex() {
		child, err := idx.ImageIndex(d.Digest)
		if err == nil {
			err = remote.WriteIndex(ref, child, remote.WithContext(ctx))
		}
		if err != nil {
			t.Fatalf("registrytest: push %s from %s: %v", ref, archive, err)
		}
		return reg.Ref(repoTag)
	}
	img, err := idx.Image(d.Digest)
	if err != nil {
		t.Fatalf("registrytest: %s: %v", archive, err)
	}
	PushImage(t, reg, img, repoTag)
	return reg.Ref(repoTag)
}

// PushImage pushes img to reg as repoTag through the loopback address and returns its digest.
func PushImage(t testing.TB, reg *Registry, img v1.Image, repoTag string) v1.Hash {
	t.Helper()
	ref := parse(t, reg.LocalRef(repoTag))
	ctx, cancel := ctx()
	defer cancel()
	if err := remote.Write(ref, img, remote.WithContext(ctx)); err != nil {
		t.Fatalf("registrytest: push %s: %v", ref, err)
	}
	d, err := img.Digest()
	if err != nil {
		t.Fatalf("registrytest: digest of %s: %v", ref, err)
	}
	return d
}

func parse(t testing.TB, s string) name.Reference {
	t.Helper()
	ref, err := name.ParseReference(s, name.Insecure, name.StrictValidation)
	if err != nil {
		t.Fatalf("registrytest: reference %q: %v", s, err)
	}
	return ref
}

// isOCILayout says whether the tarball at path holds an OCI image layout (its oci-layout file).
func isOCILayout(p string) (bool, error) {
	f, err := os.Open(p)
	if err != nil {
		return false, err
	}
	defer f.Close()
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return false, nil
		}
		if err != nil {
			return false, fmt.Errorf("not a tar archive: %w", err)
		}
		if path.Clean(strings.TrimPrefix(h.Name, "./")) == "oci-layout" {
			return true, nil
		}
	}
}

// untar unpacks the regular files and directories of the tarball at p into dir; a name that
// would leave dir is refused.
func untar(p, dir string) error {
	f, err := os.Open(p)
	if err != nil {
		return err
	}
	defer f.Close()
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		rel := path.Clean(strings.TrimPrefix(h.Name, "./"))
		if rel == "." {
			continue
		}
		if !filepath.IsLocal(rel) {
			return fmt.Errorf("entry %q leaves the archive's directory", h.Name)
		}
		target := filepath.Join(dir, filepath.FromSlash(rel))
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(target, 0o755); err != nil {
				return err
			}
		case tar.TypeReg:
			if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
				return err
			}
			out, err := os.Create(target)
			if err != nil {
				return err
			}
			_, err = io.Copy(out, tr)
			if cerr := out.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return err
			}
		default:
			return fmt.Errorf("entry %q: type %q is not a file or directory", h.Name, h.Typeflag)
		}
	}
}

// File is one entry of a layer AppendFiles writes: a regular file with Data, or a directory when
// Name ends in "/".
type File struct {
	Name string // relative, as in a layer: "usr/local/bin/"
	Mode int64
	Data []byte
}

// AppendFiles returns base with one more layer holding files, in their order (times at the epoch,
// owned by root), and that layer.
func AppendFiles(t testing.TB, base v1.Image, files ...File) (v1.Image, v1.Layer) {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, f := range files {
		h := &tar.Header{Name: f.Name, Mode: f.Mode, Size: int64(len(f.Data)), Typeflag: tar.TypeReg, ModTime: time.Unix(0, 0)}
		if strings.HasSuffix(f.Name, "/") {
			h.Typeflag, h.Size = tar.TypeDir, 0
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatalf("registrytest: %v", err)
		}
		if _, err := tw.Write(f.Data); h.Typeflag == tar.TypeReg && err != nil {
			t.Fatalf("registrytest: %v", err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatalf("registrytest: %v", err)
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(buf.Bytes())), nil })
	if err != nil {
		t.Fatalf("registrytest: %v", err)
	}
	img, err := mutate.AppendLayers(base, layer)
	if err != nil {
		t.Fatalf("registrytest: %v", err)
	}
	return img, layer
}
