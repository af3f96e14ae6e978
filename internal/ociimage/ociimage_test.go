package ociimage

import (
	"archive/tar"
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// TestIndex builds an index over two platforms from stand-in binaries and reads it back from the
// layout written to disk: one manifest per platform, each with the non-root user, the entrypoint,
// and a layer holding the binary, the passwd entry, the CA bundle and a world-writable /tmp.
func TestIndex(t *testing.T) {
	dir := t.TempDir()
	bins := map[string]string{"amd64": "hangar built for amd64", "arm64": "hangar built for arm64"}
	var plats []Platform
	for _, arch := range []string{"amd64", "arm64"} {
		p := filepath.Join(dir, arch)
		if err := os.WriteFile(p, []byte(bins[arch]), 0o755); err != nil {
			t.Fatal(err)
		}
		plats = append(plats, Platform{OS: "linux", Arch: arch, Binary: p})
	}
	ca := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(ca, []byte("-----BEGIN CERTIFICATE-----\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	idx, err := Index(Spec{Platforms: plats, CACerts: ca})
	if err != nil {
		t.Fatal(err)
	}
	lay := filepath.Join(dir, "layout")
	if err := WriteLayout(lay, idx, "example.test/hangar:v1"); err != nil {
		t.Fatal(err)
	}
	p, err := layout.FromPath(lay)
	if err != nil {
		t.Fatal(err)
	}
	top, err := p.ImageIndex()
	if err != nil {
		t.Fatal(err)
	}
	topManifest, err := top.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(topManifest.Manifests) != 1 || topManifest.Manifests[0].Annotations["io.containerd.image.name"] != "example.test/hangar:v1" {
		t.Fatalf("index.json: want one index named example.test/hangar:v1, got %+v", topManifest.Manifests)
	}
	inner, err := top.ImageIndex(topManifest.Manifests[0].Digest)
	if err != nil {
		t.Fatal(err)
	}
	im, err := inner.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if im.MediaType != types.OCIImageIndex || len(im.Manifests) != 2 {
		t.Fatalf("want an OCI index of 2 manifests, got %s with %d", im.MediaType, len(im.Manifests))
	}
	for i, arch := range []string{"amd64", "arm64"} {
		d := im.Manifests[i]
		if d.Platform == nil || d.Platform.OS != "linux" || d.Platform.Architecture != arch {
			t.Fatalf("manifest %d: platform %+v, want linux/%s", i, d.Platform, arch)
		}
		img, err := inner.Image(d.Digest)
		if err != nil {
			t.Fatal(err)
		}
		cfg, err := img.ConfigFile()
		if err != nil {
			t.Fatal(err)
		}
		if cfg.Architecture != arch || cfg.Config.User != "65532:65532" || strings.Join(cfg.Config.Entrypoint, " ") != BinaryPath {
			t.Fatalf("%s config: arch %s user %q entrypoint %v", arch, cfg.Architecture, cfg.Config.User, cfg.Config.Entrypoint)
		}
		layers, err := img.Layers()
		if err != nil || len(layers) != 1 {
			t.Fatalf("%s: layers %d, %v", arch, len(layers), err)
		}
		rc, err := layers[0].Uncompressed()
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]*tar.Header{}
		bodies := map[string]string{}
		tr := tar.NewReader(rc)
		for {
			h, err := tr.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(tr)
			got[h.Name], bodies[h.Name] = h, string(b)
		}
		rc.Close()
		if bodies["usr/local/bin/hangar"] != bins[arch] || got["usr/local/bin/hangar"].Mode != 0o755 {
			t.Errorf("%s: /usr/local/bin/hangar holds %q mode %o", arch, bodies["usr/local/bin/hangar"], got["usr/local/bin/hangar"].Mode)
		}
		if !strings.Contains(bodies["etc/passwd"], "nonroot:x:65532:65532:") || !strings.Contains(bodies["etc/group"], "nonroot:x:65532:") {
			t.Errorf("%s: passwd %q group %q", arch, bodies["etc/passwd"], bodies["etc/group"])
		}
		if h := got["tmp/"]; h == nil || h.Mode != 0o1777 {
			t.Errorf("%s: /tmp: %+v", arch, h)
		}
		if h := got["data/"]; h == nil || h.Uid != UID {
			t.Errorf("%s: /data not owned by %d: %+v", arch, UID, h)
		}
		if bodies["etc/ssl/certs/ca-certificates.crt"] != "-----BEGIN CERTIFICATE-----\n" {
			t.Errorf("%s: CA bundle %q", arch, bodies["etc/ssl/certs/ca-certificates.crt"])
		}
	}

	// The same inputs give the same index.
	again, err := Index(Spec{Platforms: plats, CACerts: ca})
	if err != nil {
		t.Fatal(err)
	}
	d1, _ := idx.Digest()
	d2, _ := again.Digest()
	if d1 != d2 {
		t.Errorf("two builds of the same inputs: %s and %s", d1, d2)
	}

	var buf bytes.Buffer
	if err := TarDir(lay, &buf); err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(&buf)
	names := map[string]bool{}
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		names[h.Name] = true
	}
	for _, n := range []string{"oci-layout", "index.json", "blobs/sha256/"} {
		if !names[n] {
			t.Errorf("the layout's tarball has no %s (has %v)", n, names)
		}
	}
}

func TestIndexErrors(t *testing.T) {
	if _, err := Index(Spec{}); err == nil {
		t.Error("no platforms: no error")
	}
	_, err := Index(Spec{Platforms: []Platform{{OS: "linux", Arch: "amd64", Binary: filepath.Join(t.TempDir(), "missing")}}})
	if err == nil || !strings.Contains(err.Error(), "linux/amd64") {
		t.Errorf("missing binary: %v", err)
	}
}
