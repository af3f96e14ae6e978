package registrytest_test

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/hangar-dev/hangar/internal/imagebuild/buildtest"
	"github.com/hangar-dev/hangar/internal/testutil/kubetest"
	"github.com/hangar-dev/hangar/internal/testutil/registrytest"
)

func TestMain(m *testing.M) { kubetest.Main(m) }

// get fetches url from the registry as a client of the distribution API would (the devcontainer
// CLI fetches Features with plain HTTP requests like these), failing the test unless it is 200.
func get(t *testing.T, url, accept string) []byte {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s: %s", url, resp.Status, b)
	}
	return b
}

// A Feature published from its public source is what the devcontainer CLI would fetch: tags 1,
// 1.0, 1.0.2 and latest on one OCI manifest, the config "{}" as application/vnd.devcontainers, one
// layer application/vnd.devcontainers.layer.v1+tar titled devcontainer-feature-<id>.tgz holding
// the folder's files byte for byte under ./, and devcontainer-feature.json in the manifest's
// dev.containers.metadata annotation.
func TestPublishFeatureAsTheCLIDoes(t *testing.T) {
	reg := registrytest.Start(t)
	for _, tc := range []struct {
		id, version string
	}{{"hello", "1.0.2"}, {"color", "1.0.3"}} {
		dir := filepath.Join(registrytest.FeaturesDir(), tc.id)
		repository := "devcontainers/features/" + tc.id
		ref := registrytest.PublishFeature(t, reg, dir, repository, "1")
		if want := reg.Addr + "/" + repository + ":1"; ref != want {
			t.Errorf("PublishFeature returned %q, want %q", ref, want)
		}
		base := "http://" + reg.Addr + "/v2/" + repository

		var tags struct {
			Name string   `json:"name"`
			Tags []string `json:"tags"`
		}
		if err := json.Unmarshal(get(t, base+"/tags/list", ""), &tags); err != nil {
			t.Fatal(err)
		}
		slices.Sort(tags.Tags)
		if want := []string{"1", "1.0", tc.version, "latest"}; !reflect.DeepEqual(tags.Tags, want) {
			t.Errorf("%s: tags %v, want %v", tc.id, tags.Tags, want)
		}

		raw := get(t, base+"/manifests/1", "application/vnd.oci.image.manifest.v1+json")
		for _, tag := range tags.Tags[1:] {
			if other := get(t, base+"/manifests/"+tag, "application/vnd.oci.image.manifest.v1+json"); !bytes.Equal(other, raw) {
				t.Errorf("%s: tag %s has another manifest than tag 1:\n%s\n%s", tc.id, tag, other, raw)
			}
		}
		var mf v1.Manifest
		if err := json.Unmarshal(raw, &mf); err != nil {
			t.Fatal(err)
		}
		if mf.SchemaVersion != 2 || mf.MediaType != "application/vnd.oci.image.manifest.v1+json" {
			t.Errorf("%s: manifest schema %d media type %q", tc.id, mf.SchemaVersion, mf.MediaType)
		}
		if mf.Config.MediaType != "application/vnd.devcontainers" || mf.Config.Size != 2 {
			t.Errorf("%s: config %+v", tc.id, mf.Config)
		}
		if cfg := get(t, base+"/blobs/"+mf.Config.Digest.String(), ""); string(cfg) != "{}" {
			t.Errorf("%s: config blob %q, want {}", tc.id, cfg)
		}
		if len(mf.Layers) != 1 {
			t.Fatalf("%s: %d layers, want 1", tc.id, len(mf.Layers))
		}
		l := mf.Layers[0]
		if l.MediaType != "application/vnd.devcontainers.layer.v1+tar" ||
			l.Annotations["org.opencontainers.image.title"] != "devcontainer-feature-"+tc.id+".tgz" {
			t.Errorf("%s: layer %+v", tc.id, l)
		}
		source, err := os.ReadFile(filepath.Join(dir, "devcontainer-feature.json"))
		if err != nil {
			t.Fatal(err)
		}
		var gotMeta, wantMeta map[string]any
		if err := json.Unmarshal([]byte(mf.Annotations["dev.containers.metadata"]), &gotMeta); err != nil {
			t.Fatalf("%s: dev.containers.metadata %q: %v", tc.id, mf.Annotations["dev.containers.metadata"], err)
		}
		if err := json.Unmarshal(source, &wantMeta); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(gotMeta, wantMeta) || gotMeta["version"] != tc.version {
			t.Errorf("%s: dev.containers.metadata %v, want devcontainer-feature.json %v", tc.id, gotMeta, wantMeta)
		}

		blob := get(t, base+"/blobs/"+l.Digest.String(), "")
		if int64(len(blob)) != l.Size {
			t.Errorf("%s: layer of %d bytes, manifest says %d", tc.id, len(blob), l.Size)
		}
		tr := tar.NewReader(bytes.NewReader(blob))
		var names []string
		for {
			h, err := tr.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatalf("%s: layer: %v", tc.id, err)
			}
			names = append(names, h.Name)
			if h.Typeflag != tar.TypeReg {
				continue
			}
			got, err := io.ReadAll(tr)
			if err != nil {
				t.Fatal(err)
			}
			want, err := os.ReadFile(filepath.Join(dir, strings.TrimPrefix(h.Name, "./")))
			if err != nil || !bytes.Equal(got, want) {
				t.Errorf("%s: %s in the layer differs from the folder's (%v)", tc.id, h.Name, err)
			}
		}
		if want := []string{"./", "./README.md", "./devcontainer-feature.json", "./install.sh"}; !reflect.DeepEqual(names, want) {
			t.Errorf("%s: layer entries %q, want %q", tc.id, names, want)
		}
	}
}

// A folder that is no Feature the CLI would publish is refused, naming what is wrong.
func TestPackageFeatureRefusals(t *testing.T) {
	write := func(t *testing.T, id string, files map[string]string) string {
		dir := filepath.Join(t.TempDir(), id)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		for n, body := range files {
			if err := os.WriteFile(filepath.Join(dir, n), []byte(body), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		return dir
	}
	for _, tc := range []struct {
		name, id string
		files    map[string]string
		want     string
	}{
		{"no metadata", "a", map[string]string{"install.sh": "true"}, "devcontainer-feature.json: no such file"},
		{"bad json", "a", map[string]string{"devcontainer-feature.json": "{", "install.sh": "true"}, "devcontainer-feature.json: unexpected end"},
		{"other id", "a", map[string]string{"devcontainer-feature.json": `{"id":"b","version":"1.0.0"}`, "install.sh": "true"}, `id "b" must be the folder's name "a"`},
		{"no version", "a", map[string]string{"devcontainer-feature.json": `{"id":"a"}`, "install.sh": "true"}, `version "" is not MAJOR.MINOR.PATCH`},
		{"short version", "a", map[string]string{"devcontainer-feature.json": `{"id":"a","version":"1.0"}`, "install.sh": "true"}, `version "1.0" is not MAJOR.MINOR.PATCH`},
		{"no install.sh", "a", map[string]string{"devcontainer-feature.json": `{"id":"a","version":"1.0.0"}`}, "install.sh: no such file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := buildtest.PackageFeature(write(t, tc.id, tc.files))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("PackageFeature: %v, want an error containing %q", err, tc.want)
			}
		})
	}
	t.Run("symlink", func(t *testing.T) {
		dir := write(t, "a", map[string]string{"devcontainer-feature.json": `{"id":"a","version":"1.0.0"}`, "install.sh": "true"})
		if err := os.Symlink("/etc/passwd", filepath.Join(dir, "link")); err != nil {
			t.Fatal(err)
		}
		_, err := buildtest.PackageFeature(dir)
		if err == nil || !strings.Contains(err.Error(), "./link: only files and folders") {
			t.Errorf("PackageFeature: %v, want the symlink named", err)
		}
	})
}

// The same folder packs to the same bytes (and digest) wherever it is checked out: modes and
// times do not leak into the layer.
func TestPackageFeatureIsReproducible(t *testing.T) {
	a, err := buildtest.PackageFeature(registrytest.FeaturesDir() + "/hello")
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "hello")
	if err := os.CopyFS(dir, os.DirFS(registrytest.FeaturesDir()+"/hello")); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(filepath.Join(dir, "README.md"), mustTime(t), mustTime(t)); err != nil {
		t.Fatal(err)
	}
	b, err := buildtest.PackageFeature(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a.Layer, b.Layer) || !bytes.Equal(a.Manifest, b.Manifest) {
		t.Error("the same Feature packed twice gave different layers or manifests")
	}
}

// Images pushed from archives come back from the registry as they were: the workspace-git
// image's docker archive (scripts/build-workspace-git-image), and an OCI image layout tarball.
func TestPushArchives(t *testing.T) {
	reg := registrytest.Start(t)

	ref := registrytest.PushWorkspaceGitImage(t, reg)
	if want := reg.Addr + "/hangar/workspace-git:dev"; ref != want {
		t.Errorf("PushWorkspaceGitImage returned %q, want %q", ref, want)
	}
	local, err := tarball.ImageFromPath(kubetest.BuildImageArchive(t, "build-workspace-git-image"), nil)
	if err != nil {
		t.Fatal(err)
	}
	sameImage(t, ref, local)

	// An OCI layout in a tarball, as scripts/build-image makes (here a random image's).
	img, err := random.Image(1024, 2)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	lp, err := layout.Write(dir, empty.Index)
	if err != nil {
		t.Fatal(err)
	}
	if err := lp.AppendImage(img); err != nil {
		t.Fatal(err)
	}
	archive := filepath.Join(t.TempDir(), "oci.tar")
	tarDir(t, dir, archive)
	ref = registrytest.PushArchive(t, reg, archive, "team/random:1")
	sameImage(t, ref, img)

	// The catalog lists both repositories.
	var cat struct {
		Repositories []string `json:"repositories"`
	}
	if err := json.Unmarshal(get(t, "http://"+reg.Addr+"/v2/_catalog", ""), &cat); err != nil {
		t.Fatal(err)
	}
	slices.Sort(cat.Repositories)
	if want := []string{"hangar/workspace-git", "team/random"}; !reflect.DeepEqual(cat.Repositories, want) {
		t.Errorf("catalog %v, want %v", cat.Repositories, want)
	}
}

// The registry stops with the test that started it.
func TestStopsWithTheTest(t *testing.T) {
	var addr string
	t.Run("registry", func(t *testing.T) {
		reg := registrytest.Start(t)
		addr = reg.Addr
		get(t, "http://"+addr+"/v2/", "")
		if r := reg.Requests(); len(r) != 1 || r[0].String() != "loopback GET /v2/ 200" {
			t.Errorf("requests %v, want the one GET /v2/", r)
		}
	})
	if c, err := net.Dial("tcp", addr); err == nil {
		c.Close()
		t.Errorf("the registry at %s still answers after its test ended", addr)
	}
}

func sameImage(t *testing.T, ref string, want v1.Image) {
	t.Helper()
	r, err := name.ParseReference(ref, name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	got, err := remote.Image(r)
	if err != nil {
		t.Fatalf("pull %s: %v", ref, err)
	}
	gd, err := got.Digest()
	if err != nil {
		t.Fatal(err)
	}
	wd, err := want.Digest()
	if err != nil {
		t.Fatal(err)
	}
	gc, _ := got.ConfigName()
	wc, _ := want.ConfigName()
	if gd != wd || gc != wc {
		t.Errorf("%s: digest %s config %s, want %s and %s", ref, gd, gc, wd, wc)
	}
}

func tarDir(t *testing.T, dir, archive string) {
	t.Helper()
	f, err := os.Create(archive)
	if err != nil {
		t.Fatal(err)
	}
	tw := tar.NewWriter(f)
	if err := tw.AddFS(os.DirFS(dir)); err != nil {
		t.Fatal(err)
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

func mustTime(t *testing.T) time.Time {
	t.Helper()
	tm, err := time.Parse(time.RFC3339, "2031-01-02T03:04:05Z")
	if err != nil {
		t.Fatal(err)
	}
	return tm
}
