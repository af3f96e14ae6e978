//go:build linux

package imagebuild

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"syscall"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// A build is three phases in three containers that share one work directory (docs/decisions.md,
// "Image builds in the cluster: the executor"): Prepare and Push hold the registry credential and
// run no code of the user's; Run executes the user's steps and features with no credential and
// no registry access. What Run leaves in the work directory is hostile to Push.
//
// The files of the work directory:
const (
	workCached   = "cached"        // Prepare: REF is in the registry; Run and Push do nothing
	workBase     = "base.json"     // Prepare → Run: the base image's config (imageConfig)
	workFeatures = "features"      // Prepare → Run: each feature extracted, in a folder feature-N
	workPlan     = "features.json" // Prepare → Run: the features in install order ([]plannedFeature)
	workLayer    = "layer.tar.gz"  // Run → Push: the layer, a gzipped tar
	workConfig   = "config.json"   // Run → Push: the image's config fields the build sets (imageConfig)
)

// Bounds on what Push reads from the work directory, which the user's code could have written.
const (
	maxWorkConfig = 4 << 20 // config.json (and base.json, features.json)
)

// imageConfig is the part of an image's config a build sets: what Run reads of the base and what
// Push takes from Run. Nothing else of a config crosses from Run to Push.
type imageConfig struct {
	Env        []string          `json:"env,omitempty"`
	User       string            `json:"user,omitempty"`
	WorkingDir string            `json:"working_dir,omitempty"`
	Labels     map[string]string `json:"labels,omitempty"`
}

// check refuses an Env entry that is not NAME=value.
func (c imageConfig) check() error {
	for i, kv := range c.Env {
		if k, _, ok := strings.Cut(kv, "="); !ok || k == "" || strings.ContainsRune(kv, 0) {
			return fmt.Errorf("env[%d]: %q is not NAME=value", i, shorten(kv, 60))
		}
	}
	return nil
}

// plannedFeature is one feature as Prepare ordered it: Run installs them in this order.
type plannedFeature struct {
	Ref     string         `json:"ref"`
	Options map[string]any `json:"options,omitempty"`
	Dir     string         `json:"dir"` // feature-N, under workFeatures
}

var featureDirPattern = regexp.MustCompile(`^feature-[0-9]+$`)

// Build runs the three phases in a row in a temporary work directory: `hangar image-build` without
// a phase, for local use and the tests. An error says what failed and why, on one line
// ("Dockerfile:7: RUN apt-get install foo: exit status 100").
func (x *Executor) Build(ctx context.Context, spec Spec, image string) error {
	dir, err := os.MkdirTemp("", "hangar-image-build-")
	if err != nil {
		return fmt.Errorf("create the build's work directory: %w", err)
	}
	defer os.RemoveAll(dir)
	if err := x.Prepare(ctx, spec, image, dir); err != nil {
		return err
	}
	if err := x.Run(ctx, spec, dir); err != nil {
		return err
	}
	return x.Push(ctx, spec, image, dir)
}

// Prepare looks image up (found: it writes workCached and says so), else writes into dir the base
// image's config and the features, fetched, checked, ordered and extracted, so that Run needs no
// registry. A refused or unreachable feature fails the build before anything of the user's runs.
func (x *Executor) Prepare(ctx context.Context, spec Spec, image, dir string) error {
	if err := spec.validate(); err != nil {
		return err
	}
	dst, err := x.parseRef(image)
	if err != nil {
		return fmt.Errorf("--image %s: %w", image, err)
	}
	if _, err := remote.Head(dst, x.remote(ctx)...); err == nil {
		f, err := createWorkFile(dir, workCached)
		if err == nil {
			err = f.Close()
		}
		if err != nil {
			return fmt.Errorf("write the work directory: %w", err)
		}
		fmt.Fprintf(x.Out, "image %s is built already (cached)\n", image)
		return nil
	} else if !isNotFound(err) {
		return fmt.Errorf("look up %s in its registry: %s", image, registryMessage(err))
	}
	base, err := x.baseImage(ctx, spec)
	if err != nil {
		return err
	}
	cfg, err := base.ConfigFile()
	if err != nil {
		return fmt.Errorf("read the base image %s's config: %s", spec.Base, oneLine(err))
	}
	fmt.Fprintf(x.Out, "building %s from %s: %d steps, %d features\n", image, spec.Base, len(spec.Steps), len(spec.Features))
	bc := imageConfig{Env: cfg.Config.Env, User: cfg.Config.User, WorkingDir: cfg.Config.WorkingDir, Labels: cfg.Config.Labels}
	if err := writeWorkJSON(dir, workBase, bc); err != nil {
		return err
	}
	features := filepath.Join(dir, workFeatures)
	if err := os.Mkdir(features, 0o755); err != nil {
		return fmt.Errorf("write the work directory: %w", err)
	}
	nodes, err := x.resolveFeatures(ctx, spec, features)
	if err != nil {
		return err
	}
	plan := make([]plannedFeature, len(nodes))
	for i, n := range nodes {
		plan[i] = plannedFeature{Ref: n.Ref, Options: n.Options, Dir: n.Dir}
	}
	return writeWorkJSON(dir, workPlan, plan)
}

// Run builds the layer from what Prepare left in dir: snapshot the root, run the steps, install the
// features, snapshot again, and write the difference (workLayer) and the config the steps set
// (workConfig). It makes no registry request and needs no credential: it runs the user's code.
func (x *Executor) Run(ctx context.Context, spec Spec, dir string) error {
	if err := spec.validate(); err != nil {
		return err
	}
	if cached, err := isWorkFile(dir, workCached); err != nil || cached {
		return err
	}
	var bc imageConfig
	if err := readWorkJSON(dir, workBase, &bc); err != nil {
		return err
	}
	var plan []plannedFeature
	if err := readWorkJSON(dir, workPlan, &plan); err != nil {
		return err
	}

	// The features go into the image's /tmp, where a chrooted install.sh sees them; that work
	// directory is neither snapshotted nor left behind.
	tmp := filepath.Join(x.Root, "tmp")
	if fi, err := os.Lstat(tmp); os.IsNotExist(err) {
		if err := os.Mkdir(tmp, 0o700); err != nil {
			return fmt.Errorf("create the image's /tmp: %w", err)
		}
		if err := os.Chmod(tmp, 0o777|fs.ModeSticky); err != nil {
			return fmt.Errorf("create the image's /tmp: %w", err)
		}
	} else if err != nil {
		return fmt.Errorf("the image's /tmp: %w", err)
	} else if !fi.IsDir() {
		return errors.New("the image's /tmp is not a directory (the build puts the features there)")
	}
	work, err := os.MkdirTemp(tmp, "hangar-image-build-")
	if err != nil {
		return fmt.Errorf("create the build's work directory: %w", err)
	}
	defer os.RemoveAll(work)
	workInImage, _ := underRoot(x.Root, work)
	features := make([]*featureNode, len(plan))
	for i, p := range plan {
		if !featureDirPattern.MatchString(p.Dir) {
			return fmt.Errorf("%s: [%d].dir: %q is not a feature's folder", workPlan, i, p.Dir)
		}
		to := filepath.Join(work, p.Dir)
		if err := os.CopyFS(to, os.DirFS(filepath.Join(dir, workFeatures, p.Dir))); err != nil {
			return fmt.Errorf("feature %s: copy it into the image: %w", p.Ref, err)
		}
		meta, err := func() (*featureMetadata, error) {
			r, err := os.OpenRoot(to)
			if err != nil {
				return nil, err
			}
			defer r.Close()
			return readFeatureMetadata(r)
		}()
		if err != nil {
			return fmt.Errorf("feature %s: %s", p.Ref, oneLine(err))
		}
		inImage, _ := underRoot(x.Root, to)
		features[i] = &featureNode{Ref: p.Ref, Options: p.Options, Meta: meta, Dir: inImage}
	}

	mi, err := os.Open(x.Mountinfo)
	if err != nil {
		return fmt.Errorf("read the mount table: %w", err)
	}
	skip := []string{workInImage}
	if p, ok := underRoot(x.Root, dir); ok {
		skip = append(skip, p) // the work directory, when it is no mount of its own (the one-shot build)
	}
	snap, err := newSnapshotter(x.Root, mi, skip...)
	mi.Close()
	if err != nil {
		return err
	}
	before, err := snap.take()
	if err != nil {
		return err
	}

	st := &buildState{env: bc.Env, workdir: bc.WorkingDir, user: bc.User, labels: map[string]string{}}
	for k, v := range bc.Labels {
		st.labels[k] = v
	}
	for i, s := range spec.Steps {
		desc := s.describe()
		fmt.Fprintf(x.Out, "step %d/%d: %s%s\n", i+1, len(spec.Steps), desc, s.where(" (", ")"))
		if err := x.step(ctx, st, s); err != nil {
			if s.Line > 0 {
				return fmt.Errorf("Dockerfile:%d: %s: %s", s.Line, desc, oneLine(err))
			}
			return fmt.Errorf("step %d: %s: %s", i+1, desc, oneLine(err))
		}
	}
	if err := x.installFeatures(ctx, spec, st, features); err != nil {
		return err
	}
	if err := os.RemoveAll(work); err != nil {
		return fmt.Errorf("remove the build's work directory: %w", err)
	}

	after, err := snap.take()
	if err != nil {
		return err
	}
	layerFile, err := os.OpenFile(filepath.Join(dir, workLayer), os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return fmt.Errorf("write the layer: %w", err)
	}
	zw := gzip.NewWriter(layerFile)
	stats, err := snap.writeDiff(zw, before, after)
	if err == nil {
		err = zw.Close()
	}
	if err == nil {
		err = layerFile.Chmod(0o644) // push runs as another user, whatever the umask
	}
	if cerr := layerFile.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("write the layer: %s", oneLine(err))
	}
	fmt.Fprintf(x.Out, "layer: %d added, %d changed, %d deleted\n", stats.Added, stats.Changed, stats.Deleted)
	return writeWorkJSON(dir, workConfig, imageConfig{Env: st.env, User: st.user, WorkingDir: st.workdir, Labels: st.labels})
}

// Push reads the base image from its registry, appends the layer Run wrote and sets the config
// fields Run wrote, and pushes the result to image: its tag comes from the command line, never
// from dir. Everything in dir may be the user's: config.json is bounded and only imageConfig's
// fields are taken (any other is refused); the layer must be a regular file and gzip, and is
// streamed as a blob with its digests computed, never extracted.
func (x *Executor) Push(ctx context.Context, spec Spec, image, dir string) error {
	if err := spec.validate(); err != nil {
		return err
	}
	if cached, err := isWorkFile(dir, workCached); err != nil || cached {
		return err
	}
	dst, err := x.parseRef(image)
	if err != nil {
		return fmt.Errorf("--image %s: %w", image, err)
	}
	var rc imageConfig
	if err := readWorkJSON(dir, workConfig, &rc); err != nil {
		return err
	}
	if err := rc.check(); err != nil {
		return fmt.Errorf("the build's %s: %w", workConfig, err)
	}
	open := func() (io.ReadCloser, error) { return openWorkFile(dir, workLayer) }
	if err := checkGzip(open); err != nil {
		return err
	}
	base, err := x.baseImage(ctx, spec)
	if err != nil {
		return err
	}
	layerType := types.DockerLayer
	if mt, err := base.MediaType(); err == nil && mt == types.OCIManifestSchema1 {
		layerType = types.OCILayer
	}
	layer, err := tarball.LayerFromOpener(open, tarball.WithMediaType(layerType))
	if err != nil {
		return fmt.Errorf("read the build's layer: %s", oneLine(err))
	}
	img, err := mutate.Append(base, mutate.Addendum{Layer: layer, History: v1.History{
		Created: v1.Time{Time: x.now()}, CreatedBy: "hangar image-build", Comment: fmt.Sprintf("%d steps, %d features", len(spec.Steps), len(spec.Features)),
	}})
	if err != nil {
		return fmt.Errorf("add the layer: %s", oneLine(err))
	}
	newCfg, err := img.ConfigFile()
	if err != nil {
		return fmt.Errorf("add the layer: %s", oneLine(err))
	}
	newCfg = newCfg.DeepCopy()
	newCfg.Config.Env, newCfg.Config.WorkingDir, newCfg.Config.User = rc.Env, rc.WorkingDir, rc.User
	newCfg.Config.Labels = rc.Labels
	newCfg.Created = v1.Time{Time: x.now()}
	if img, err = mutate.ConfigFile(img, newCfg); err != nil {
		return fmt.Errorf("set the image's config: %s", oneLine(err))
	}
	fmt.Fprintf(x.Out, "pushing %s\n", image)
	if err := remote.Write(dst, img, x.remote(ctx)...); err != nil {
		return fmt.Errorf("push %s: %s", image, registryMessage(err))
	}
	digest, _ := img.Digest()
	fmt.Fprintf(x.Out, "pushed %s (%s)\n", image, digest)
	return nil
}

// baseImage reads the Spec's Base from its registry, for this machine's architecture.
func (x *Executor) baseImage(ctx context.Context, spec Spec) (v1.Image, error) {
	ref, err := x.parseRef(spec.Base)
	if err != nil {
		return nil, fmt.Errorf("base image %s: %w", spec.Base, err)
	}
	img, err := remote.Image(ref, append(x.remote(ctx), remote.WithPlatform(v1.Platform{OS: "linux", Architecture: runtime.GOARCH}))...)
	if err != nil {
		return nil, fmt.Errorf("read the base image %s: %s", spec.Base, registryMessage(err))
	}
	return img, nil
}

// checkGzip refuses a layer that does not start as gzip does: an uncompressed tar would be
// compressed by the push, which is not what Run writes.
func checkGzip(open func() (io.ReadCloser, error)) error {
	f, err := open()
	if err != nil {
		return err
	}
	defer f.Close()
	magic := make([]byte, 2)
	if _, err := io.ReadFull(f, magic); err != nil || !bytes.Equal(magic, []byte{0x1f, 0x8b}) {
		return fmt.Errorf("the build's %s is not gzip: refused", workLayer)
	}
	return nil
}

// openWorkFile opens a regular file of the work directory for reading: never through a symbolic
// link or out of the directory (os.Root, O_NOFOLLOW), never a fifo or a device, which could block
// or be endless.
func openWorkFile(dir, name string) (*os.File, error) {
	r, err := os.OpenRoot(dir)
	if err != nil {
		return nil, fmt.Errorf("the work directory: %w", err)
	}
	defer r.Close()
	if fi, err := r.Lstat(name); err != nil {
		return nil, fmt.Errorf("the build's %s: %w", name, err)
	} else if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("the build's %s: not a regular file (%v): refused", name, fi.Mode().Type())
	}
	f, err := r.OpenFile(name, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, fmt.Errorf("the build's %s: %w", name, err)
	}
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		f.Close()
		return nil, fmt.Errorf("the build's %s: not a regular file: refused", name)
	}
	return f, nil
}

// isWorkFile says whether the work directory has name.
func isWorkFile(dir, name string) (bool, error) {
	switch _, err := os.Lstat(filepath.Join(dir, name)); {
	case err == nil:
		return true, nil
	case errors.Is(err, fs.ErrNotExist):
		return false, nil
	default:
		return false, fmt.Errorf("the work directory: %w", err)
	}
}

// readWorkJSON decodes a JSON file of the work directory, at most maxWorkConfig bytes, refusing
// fields v does not have.
func readWorkJSON(dir, name string, v any) error {
	f, err := openWorkFile(dir, name)
	if err != nil {
		return err
	}
	defer f.Close()
	return decodeWorkJSON(name, f, v)
}

func decodeWorkJSON(name string, r io.Reader, v any) error {
	b, err := io.ReadAll(io.LimitReader(r, maxWorkConfig+1))
	if err != nil {
		return fmt.Errorf("the build's %s: %w", name, err)
	}
	if len(b) > maxWorkConfig {
		return fmt.Errorf("the build's %s: more than %d bytes: refused", name, maxWorkConfig)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("the build's %s: %s", name, oneLine(err))
	}
	if dec.More() {
		return fmt.Errorf("the build's %s: more than one JSON value", name)
	}
	return nil
}

// createWorkFile creates or truncates a file of the work directory for writing, never through a
// symbolic link or out of the directory: prepare may run again over a directory the build's user
// code wrote (its init containers run again when the pod's sandbox is recreated, the emptyDir kept).
func createWorkFile(dir, name string) (*os.File, error) {
	r, err := os.OpenRoot(dir)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	return r.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_TRUNC|syscall.O_NOFOLLOW, 0o644)
}

// writeWorkJSON writes a file of the work directory, readable by the other phases' users.
func writeWorkJSON(dir, name string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("write the build's %s: %w", name, err)
	}
	if len(b) > maxWorkConfig {
		return fmt.Errorf("write the build's %s: more than %d bytes", name, maxWorkConfig)
	}
	f, err := createWorkFile(dir, name)
	if err != nil {
		return fmt.Errorf("write the build's %s: %w", name, err)
	}
	_, err = f.Write(b)
	if err == nil {
		err = f.Chmod(0o644) // the other phases run as other users, whatever the umask
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("write the build's %s: %w", name, err)
	}
	return nil
}
