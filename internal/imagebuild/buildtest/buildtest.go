// Package buildtest gives image build tests real parts: go-containerregistry's registry on
// loopback, a base image's filesystem made of this machine's static busybox, that filesystem
// pushed as an image, and Dev Container features published from their public sources (features/,
// see features/SOURCE.md) the way the devcontainer CLI publishes them. It writes its tars itself,
// independently of the executor it tests.
package buildtest

import (
	"archive/tar"
	"bytes"
	"embed"
	"encoding/json"
	"io"
	"io/fs"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"golang.org/x/sys/unix"
)

// Features holds the features' folders: hello, color (devcontainers/feature-starter) and
// docker-in-docker (its real devcontainer-feature.json, an install.sh that fails).
//
//go:embed features
var Features embed.FS

// Registry is go-containerregistry's registry on loopback. Writes counts the requests that
// write (anything but GET and HEAD).
type Registry struct {
	Host   string // 127.0.0.1:PORT
	Writes atomic.Int64
}

// NewRegistry starts a registry, stopped when the test ends.
func NewRegistry(t testing.TB) *Registry { return NewPrivateRegistry(t, "", "") }

// NewPrivateRegistry starts a registry that answers only requests with HTTP basic
// authentication as user and password (none if user is empty). This package's pushes take their
// credentials from $DOCKER_CONFIG, as `hangar image-build` does.
func NewPrivateRegistry(t testing.TB, user, password string) *Registry {
	t.Helper()
	r := &Registry{}
	h := registry.New(registry.Logger(log.New(io.Discard, "", 0)))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if u, p, ok := req.BasicAuth(); user != "" && (!ok || u != user || p != password) {
			w.Header().Set("WWW-Authenticate", `Basic realm="buildtest"`)
			http.Error(w, `{"errors":[{"code":"UNAUTHORIZED","message":"authentication required"}]}`, http.StatusUnauthorized)
			return
		}
		if req.Method != http.MethodGet && req.Method != http.MethodHead {
			r.Writes.Add(1)
		}
		h.ServeHTTP(w, req)
	}))
	t.Cleanup(srv.Close)
	r.Host = strings.TrimPrefix(srv.URL, "http://")
	return r
}

// NeedRoot fails (never skips) a test that chroots: chroot needs CAP_SYS_CHROOT, and a build runs
// its steps as other users, which needs CAP_SETUID.
func NeedRoot(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Fatal("this test runs builds chrooted into a busybox tree and as other users: run it as root (the CI and the helpers' machine do)")
	}
}

// BusyboxRoot is a base image's filesystem in a new directory: this machine's static busybox and
// its applets in /bin, a root and a "dev" user (1000, home /home/dev) also in the group "staff" (50),
// /tmp, /usr/local/bin, /dev/null, and /etc/motd.
func BusyboxRoot(t testing.TB) string {
	t.Helper()
	NeedRoot(t)
	root := t.TempDir()
	for _, d := range []string{"bin", "etc", "tmp", "usr/local/bin", "root", "home/dev"} {
		must(t, os.MkdirAll(filepath.Join(root, d), 0o755))
	}
	must(t, os.Chmod(filepath.Join(root, "tmp"), 0o777|fs.ModeSticky))
	must(t, os.Chown(filepath.Join(root, "home/dev"), 1000, 1000))
	bb, err := os.ReadFile("/bin/busybox")
	if err != nil {
		t.Fatalf("this test needs a static /bin/busybox (Debian: busybox-static): %v", err)
	}
	must(t, os.WriteFile(filepath.Join(root, "bin/busybox"), bb, 0o755))
	out, err := exec.Command("/bin/busybox", "--list").Output()
	if err != nil {
		t.Fatalf("busybox --list: %v", err)
	}
	for _, a := range strings.Fields(string(out)) {
		if a != "busybox" && !strings.Contains(a, "/") {
			must(t, os.Symlink("busybox", filepath.Join(root, "bin", a)))
		}
	}
	// /dev/null, as a container runtime gives one (the shell's background jobs read it).
	must(t, os.Mkdir(filepath.Join(root, "dev"), 0o755))
	must(t, syscall.Mknod(filepath.Join(root, "dev/null"), syscall.S_IFCHR|0o666, int(unix.Mkdev(1, 3))))
	must(t, os.Chmod(filepath.Join(root, "dev/null"), 0o666))
	for p, c := range map[string]string{
		"etc/passwd": "root:x:0:0:root:/root:/bin/sh\ndev:x:1000:1000:dev:/home/dev:/bin/sh\n",
		"etc/group":  "root:x:0:\nstaff:x:50:dev\ndev:x:1000:\n",
		"etc/motd":   "the base image's motd\n",
	} {
		must(t, os.WriteFile(filepath.Join(root, p), []byte(c), 0o644))
	}
	return root
}

// PushDir pushes dir's files as a one-layer image (OCI media types) whose config has env and
// labels.
func PushDir(t testing.TB, ref, dir string, env []string, labels map[string]string) {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == dir {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		st := fi.Sys().(*syscall.Stat_t)
		h := &tar.Header{Name: filepath.ToSlash(rel), Mode: int64(fi.Mode().Perm()), Uid: int(st.Uid), Gid: int(st.Gid), ModTime: fi.ModTime(), Format: tar.FormatPAX}
		if fi.Mode()&fs.ModeSticky != 0 {
			h.Mode |= 0o1000
		}
		var data []byte
		switch {
		case fi.IsDir():
			h.Typeflag = tar.TypeDir
		case fi.Mode()&fs.ModeSymlink != 0:
			h.Typeflag = tar.TypeSymlink
			if h.Linkname, err = os.Readlink(p); err != nil {
				return err
			}
		case fi.Mode().IsRegular():
			h.Typeflag = tar.TypeReg
			if data, err = os.ReadFile(p); err != nil {
				return err
			}
			h.Size = int64(len(data))
		default:
			return nil
		}
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		_, err = tw.Write(data)
		return err
	})
	must(t, err)
	must(t, tw.Close())
	img, err := mutate.Append(mutate.MediaType(empty.Image, types.OCIManifestSchema1), mutate.Addendum{Layer: static.NewLayer(buf.Bytes(), types.OCIUncompressedLayer)})
	must(t, err)
	cfg, err := img.ConfigFile()
	must(t, err)
	cfg = cfg.DeepCopy()
	cfg.OS, cfg.Architecture = "linux", "amd64"
	cfg.Config.Env, cfg.Config.Labels = env, labels
	img, err = mutate.ConfigFile(img, cfg)
	must(t, err)
	write(t, ref, img)
}

// PublishFeature publishes a feature given as its files by name (Feature, SmallFeature) to ref, as
// the devcontainer CLI does (PackageFeature: the folder's tar as the one layer, the metadata
// annotation).
func PublishFeature(t testing.TB, ref string, files map[string]string) {
	t.Helper()
	var meta struct {
		ID string `json:"id"`
	}
	must(t, json.Unmarshal([]byte(files["devcontainer-feature.json"]), &meta))
	dir := filepath.Join(t.TempDir(), meta.ID)
	must(t, os.Mkdir(dir, 0o755))
	for n, data := range files {
		must(t, os.WriteFile(filepath.Join(dir, n), []byte(data), 0o644))
	}
	f, err := PackageFeature(dir)
	must(t, err)
	r, err := name.ParseReference(ref)
	must(t, err)
	for _, l := range []v1.Layer{static.NewLayer(f.Layer, FeatureLayerMediaType), static.NewLayer([]byte(FeatureConfig), FeatureConfigMediaType)} {
		must(t, remote.WriteLayer(r.Context(), l, remote.WithAuthFromKeychain(authn.DefaultKeychain)))
	}
	must(t, remote.Put(r, RawManifest(f.Manifest), remote.WithAuthFromKeychain(authn.DefaultKeychain)))
}

// Feature is one of Features' folders as files by name.
func Feature(t testing.TB, folder string) map[string]string {
	t.Helper()
	files := map[string]string{}
	entries, err := Features.ReadDir(path.Join("features", folder))
	must(t, err)
	for _, e := range entries {
		b, err := Features.ReadFile(path.Join("features", folder, e.Name()))
		must(t, err)
		files[e.Name()] = string(b)
	}
	return files
}

// SmallFeature is a feature whose install.sh echoes "installed ID", with more metadata fields.
func SmallFeature(t testing.TB, id string, metadata map[string]any) map[string]string {
	t.Helper()
	m := map[string]any{"id": id, "version": "1.0.0"}
	for k, v := range metadata {
		m[k] = v
	}
	b, err := json.Marshal(m)
	must(t, err)
	return map[string]string{"devcontainer-feature.json": string(b), "install.sh": "#!/bin/sh\necho installed " + id + "\n"}
}

func write(t testing.TB, ref string, img v1.Image) {
	t.Helper()
	r, err := name.ParseReference(ref)
	must(t, err)
	must(t, remote.Write(r, img, remote.WithAuthFromKeychain(authn.DefaultKeychain)))
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
