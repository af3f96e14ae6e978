package registrytest

import (
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/static"

	"github.com/hangar-dev/hangar/internal/imagebuild/buildtest"
)

// FeaturesDir is the folder of the Features copied from their public source (buildtest's, with
// their SOURCE.md and LICENSE), as an absolute path: hello, color, docker-in-docker. It is found
// from the test's working directory (its package's folder), up to the module's go.mod: source
// paths compiled in are not file paths under -trimpath, which CI sets.
func FeaturesDir() string {
	dir, err := os.Getwd()
	for err == nil {
		if _, serr := os.Stat(filepath.Join(dir, "go.mod")); serr == nil {
			return filepath.Join(dir, "internal", "imagebuild", "buildtest", "features")
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			break
		}
		dir = parent
	}
	return filepath.Join("internal", "imagebuild", "buildtest", "features")
}

// PublishFeature publishes the Feature in dir (a folder holding devcontainer-feature.json and
// install.sh, such as FeaturesDir()/hello) to reg as repository ("devcontainers/features/hello":
// its last element must be the Feature's id, as must dir's name), the way `devcontainer features
// publish` does (buildtest.PackageFeature): the folder's tar as the one layer (FeatureLayerMediaType, titled
// devcontainer-feature-<id>.tgz), the config "{}" (FeatureConfigMediaType), the metadata
// annotation, and the tags MAJOR, MAJOR.MINOR, MAJOR.MINOR.PATCH of its version, and latest. It
// returns the reference of the tag named (one of those) for pods (Registry.Ref), as a
// devcontainer.json's features would name it.
func PublishFeature(t testing.TB, reg *Registry, dir, repository, tag string) string {
	t.Helper()
	f, err := buildtest.PackageFeature(dir)
	if err != nil {
		t.Fatalf("registrytest: %v", err)
	}
	if last := path.Base(repository); last != f.ID {
		t.Fatalf("registrytest: repository %q: its last element must be the Feature's id %q", repository, f.ID)
	}
	tags := f.Tags()
	if !slices.Contains(tags, tag) {
		t.Fatalf("registrytest: tag %q: %s %s is published as %s only", tag, f.ID, f.Version, strings.Join(tags, ", "))
	}
	repo, err := name.NewRepository(reg.Addr+"/"+repository, name.Insecure, name.StrictValidation)
	if err != nil {
		t.Fatalf("registrytest: repository %q: %v", repository, err)
	}
	ctx, cancel := ctx()
	defer cancel()
	for _, l := range []v1.Layer{static.NewLayer(f.Layer, buildtest.FeatureLayerMediaType), static.NewLayer([]byte(buildtest.FeatureConfig), buildtest.FeatureConfigMediaType)} {
		if err := remote.WriteLayer(repo, l, remote.WithContext(ctx)); err != nil {
			t.Fatalf("registrytest: push %s's blobs: %v", repo, err)
		}
	}
	for _, tg := range tags {
		if err := remote.Put(repo.Tag(tg), buildtest.RawManifest(f.Manifest), remote.WithContext(ctx)); err != nil {
			t.Fatalf("registrytest: push %s:%s: %v", repo, tg, err)
		}
	}
	return reg.Ref(repository + ":" + tag)
}
