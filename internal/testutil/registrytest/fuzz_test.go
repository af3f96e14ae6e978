package registrytest_test

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/hangar-dev/hangar/internal/imagebuild/buildtest"
	"github.com/hangar-dev/hangar/internal/testutil/registrytest"
)

// PackageFeature never panics on any devcontainer-feature.json, and what it accepts is a
// consistent artifact: the manifest parses, its layer descriptor matches the layer, the metadata
// annotation is the file compacted, the layer holds the files, and there are four tags.
func FuzzPackageFeature(f *testing.F) {
	for _, id := range []string{"hello", "color"} {
		b, err := os.ReadFile(filepath.Join(registrytest.FeaturesDir(), id, "devcontainer-feature.json"))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b, []byte("#!/bin/sh\necho hi\n"))
	}
	f.Add([]byte(`{"id":"feat","version":"01.2.3"}`), []byte{})
	f.Add([]byte(`{"id":"feat","version":"1.2.3","id":"other"}`), []byte("x"))
	// Found by CI's fuzz run: a name that is not UTF-8 cannot be the annotation unchanged.
	f.Add([]byte("{\"id\":\"feat\",\"version\":\"0.0.0\",\"\x80\":\"\"}"), []byte{})
	f.Fuzz(func(t *testing.T, meta, install []byte) {
		dir := filepath.Join(t.TempDir(), "feat")
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "devcontainer-feature.json"), meta, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "install.sh"), install, 0o644); err != nil {
			t.Fatal(err)
		}
		feat, err := buildtest.PackageFeature(dir)
		if err != nil {
			return
		}
		var mf v1.Manifest
		if err := json.Unmarshal(feat.Manifest, &mf); err != nil {
			t.Fatalf("manifest %s: %v", feat.Manifest, err)
		}
		if len(mf.Layers) != 1 || mf.Layers[0].Size != int64(len(feat.Layer)) {
			t.Fatalf("layers %+v for a layer of %d bytes", mf.Layers, len(feat.Layer))
		}
		h, _, _ := v1.SHA256(bytes.NewReader(feat.Layer))
		if mf.Layers[0].Digest != h {
			t.Fatalf("layer digest %s, want %s", mf.Layers[0].Digest, h)
		}
		var compact bytes.Buffer
		if err := json.Compact(&compact, meta); err != nil || mf.Annotations["dev.containers.metadata"] != compact.String() {
			t.Fatalf("metadata annotation %q, want %q (%v)", mf.Annotations["dev.containers.metadata"], compact.String(), err)
		}
		if tags := feat.Tags(); len(tags) != 4 || tags[2] != feat.Version {
			t.Fatalf("tags %v for version %q", tags, feat.Version)
		}
		files := map[string][]byte{}
		tr := tar.NewReader(bytes.NewReader(feat.Layer))
		for {
			h, err := tr.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(tr)
			files[h.Name] = b
		}
		if !bytes.Equal(files["./devcontainer-feature.json"], meta) || !bytes.Equal(files["./install.sh"], install) {
			t.Fatalf("the layer's files differ from the folder's: %q", files)
		}
	})
}
