package devcontainer

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"path"
	"slices"
	"strings"

	"github.com/hangar-dev/hangar/internal/imagebuild"
)

// dockerBuild reads `build` (or the legacy top-level `dockerFile` and `context`): the Dockerfile
// and its context come from the repository (Options.Repo), and become the image build's Base and
// Steps (docs/decisions.md, "Image builds in the cluster: Dockerfiles"). It returns the image the
// workspace starts from, "" when the definition does not build one.
func (t *translator) dockerBuild(take func(string) (json.RawMessage, bool)) string {
	var b struct {
		Dockerfile *string         `json:"dockerfile"`
		Context    *string         `json:"context"`
		Args       map[string]any  `json:"args"`
		Target     *string         `json:"target"`
		Options    []string        `json:"options"`
		CacheFrom  json.RawMessage `json:"cacheFrom"`
	}
	field := "devcontainer.build"
	fileField := "devcontainer.build.dockerfile"
	contextField := "devcontainer.build.context"
	r, hasBuild := take("build")
	if hasBuild {
		var keys map[string]json.RawMessage
		if json.Unmarshal(r, &keys) != nil || json.Unmarshal(r, &b) != nil {
			t.v.Add(field, "must be an object with dockerfile (a path), context, args (an object of strings), target, options (a list) and cacheFrom")
			return ""
		}
		for _, k := range slices.Sorted(maps.Keys(keys)) {
			switch k {
			case "dockerfile", "context", "args", "target", "options", "cacheFrom":
			default:
				t.warn("build.%s is not supported by Hangar and is ignored", k)
			}
		}
	}
	// The legacy fields, from before `build`: dockerFile (spelled dockerfile too) and context.
	for _, k := range []string{"dockerFile", "dockerfile"} {
		if r, ok := take(k); ok {
			var s string
			if json.Unmarshal(r, &s) != nil {
				t.v.Add("devcontainer."+k, "must be a string: the Dockerfile's path, relative to the devcontainer.json")
				return ""
			}
			if b.Dockerfile != nil {
				t.v.Add("devcontainer."+k, "and build.dockerfile both name the Dockerfile: give build.dockerfile only")
				return ""
			}
			b.Dockerfile, field, fileField = &s, "devcontainer."+k, "devcontainer."+k
		}
	}
	if r, ok := take("context"); ok {
		var s string
		if json.Unmarshal(r, &s) != nil {
			t.v.Add("devcontainer.context", "must be a string: the build context's path, relative to the devcontainer.json")
			return ""
		}
		if b.Context == nil {
			b.Context, contextField = &s, "devcontainer.context"
		}
	}
	if !hasBuild && b.Dockerfile == nil {
		if b.Context != nil {
			t.warn("context is ignored: it is the build context of a dockerFile, and there is none")
		}
		return ""
	}
	if b.Dockerfile == nil || *b.Dockerfile == "" {
		t.v.Add(fileField, "is required with build: the path of the Dockerfile, relative to the devcontainer.json (Hangar builds images from a Dockerfile and features only)")
		return ""
	}
	if _, ok := take("image"); ok {
		t.v.Add("devcontainer.image", "and %s both say what the workspace runs: give one or the other", strings.TrimPrefix(fileField, "devcontainer."))
		return ""
	}

	// What docker build would be given.
	opts := imagebuild.DockerfileOptions{Args: map[string]string{}}
	for _, k := range slices.Sorted(maps.Keys(b.Args)) {
		f := fieldPath("devcontainer.build.args", k)
		s, ok := b.Args[k].(string)
		if !ok {
			t.v.Add(f, "must be a string")
			continue
		}
		opts.Args[k] = t.expand(s, f)
	}
	if b.Target != nil {
		opts.Target = *b.Target
	}
	for i, o := range b.Options {
		t.buildOption(fmt.Sprintf("devcontainer.build.options[%d]", i), o, b.Options, i, opts.Args)
	}
	if len(b.CacheFrom) > 0 && string(b.CacheFrom) != "null" {
		t.warn("build.cacheFrom is ignored: Hangar keeps each build's image in the cluster's registry under the definition's hash, and reuses it")
	}

	if t.opts.Repo == nil {
		t.v.Add(field, "builds the image from the Dockerfile %s and its build context, files of the repository: Hangar reads them only when the workspace is created from its repository (hangar create --repo URL); create it from the repository, or use `image`", *b.Dockerfile)
		return ""
	}
	dir := cmpOr(t.opts.Dir, ".")
	file, ok := t.repoPath(fileField, dir, *b.Dockerfile)
	if !ok {
		return ""
	}
	ctxDir, ok := t.repoPath(contextField, dir, cmpOr(ptrOr(b.Context), "."))
	if !ok {
		return ""
	}
	return t.dockerfileBuild(fileField, contextField, "devcontainer.build.target", file, ctxDir, opts)
}

// dockerfileBuild reads the Dockerfile file and the build context ctxDir (paths in the repository,
// named by fileField and contextField) and makes them the image build's Base and Steps; it returns
// the image the workspace starts from, "" when they are refused. A devcontainer's `build` and a
// docker-compose primary service's `build` both come here.
func (t *translator) dockerfileBuild(fileField, contextField, targetField, file, ctxDir string, opts imagebuild.DockerfileOptions) string {
	if t.v.Err() != nil {
		return ""
	}
	data, err := readBounded(t.opts.Repo, file, imagebuild.MaxDockerfileBytes)
	if errors.Is(err, fs.ErrNotExist) {
		t.v.Add(fileField, "the repository has no %s", file)
		return ""
	} else if err != nil {
		t.v.Add(fileField, "reading %s: %v", file, err)
		return ""
	}
	if info, err := fs.Stat(t.opts.Repo, ctxDir); err != nil || !info.IsDir() {
		t.v.Add(contextField, "the repository has no folder %s", ctxDir)
		return ""
	}
	opts.Context, _ = fs.Sub(t.opts.Repo, ctxDir) // a valid path: cannot fail
	if ctxDir == "." {
		opts.Context = t.opts.Repo
	}
	opts.Path = file
	df, err := imagebuild.ParseDockerfile(data, opts)
	var de *imagebuild.DockerfileError
	switch {
	case errors.As(err, &de) && de.Target:
		t.v.Add(targetField, "%v", err)
		return ""
	case err != nil:
		t.v.Add(fileField, "%v", err)
		return ""
	}
	for _, w := range df.Warnings {
		t.warn("%s", w)
	}
	if t.build == nil {
		t.build = &imagebuild.Spec{}
	}
	t.build.Base, t.build.Steps = df.Base, df.Steps
	return df.Base
}

// repoPath resolves a path relative to the devcontainer.json's folder (dir) to one inside the
// repository; f names the field that gave it.
func (t *translator) repoPath(f, dir, p string) (string, bool) {
	if strings.ContainsRune(p, 0) || path.IsAbs(p) {
		t.v.Add(f, "must be a path relative to the devcontainer.json's folder, got %q", p)
		return "", false
	}
	out := path.Join(dir, p)
	if out == ".." || strings.HasPrefix(out, "../") || !fs.ValidPath(out) {
		t.v.Add(f, "%q is outside the repository", p)
		return "", false
	}
	return out, true
}

// errNoFile is a file the repository does not have; it is an fs.ErrNotExist.
type errNoFile struct{}

func (errNoFile) Error() string        { return "no such file in the repository" }
func (errNoFile) Is(target error) bool { return target == fs.ErrNotExist }

// readBounded reads a file of fsys, refusing one larger than limit without reading more than
// limit+1 bytes of it.
func readBounded(fsys fs.FS, name string, limit int64) ([]byte, error) {
	file, err := fsys.Open(name)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, errNoFile{}
	} else if err != nil {
		return nil, fmt.Errorf("cannot be read: %v", err)
	}
	defer file.Close()
	if info, err := file.Stat(); err == nil && info.IsDir() {
		return nil, fmt.Errorf("is a folder, not a file")
	}
	data, err := io.ReadAll(io.LimitReader(file, limit+1))
	if err != nil {
		return nil, fmt.Errorf("cannot be read: %v", err)
	}
	if int64(len(data)) > limit {
		return nil, fmt.Errorf("is larger than %d KiB", limit>>10)
	}
	return data, nil
}

// buildOption reads one of build.options (docker build's flags): --build-arg is honoured, the
// flags about docker's own cache and output are ignored, the rest refused by name.
func (t *translator) buildOption(f, o string, all []string, i int, args map[string]string) {
	name, val, hasVal := strings.Cut(o, "=")
	switch name {
	case "--build-arg":
		if !hasVal && i+1 < len(all) {
			val, hasVal = all[i+1], true
		}
		k, v, ok := strings.Cut(val, "=")
		if !hasVal || !ok || k == "" {
			t.v.Add(f, "--build-arg needs NAME=value")
			return
		}
		if _, given := args[k]; !given {
			args[k] = t.expand(v, f)
		}
	case "--pull", "--no-cache", "--progress", "-q", "--quiet", "--rm", "--force-rm", "--load":
		t.warn("build.options %s is ignored: Hangar's build always starts from the base image and is cached by the definition's hash", o)
	case "--platform":
		t.warn("build.options %s is ignored: the image is built on, and for, the cluster's node", o)
	default:
		if !strings.HasPrefix(o, "-") && i > 0 && all[i-1] == "--build-arg" {
			return // the value of the --build-arg before it
		}
		t.v.Add(f, "%s is refused: of docker build's options Hangar honours --build-arg only (the build runs unprivileged in the cluster, without Docker)", name)
	}
}

func ptrOr(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
