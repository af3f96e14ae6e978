//go:build linux

package imagebuild

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"

	"github.com/hangar-dev/hangar/internal/clock"
)

// MetadataLabel is the Dev Containers label that carries what the image's features contribute to
// the container (containerEnv, lifecycle commands, customizations), as a JSON array.
const MetadataLabel = "devcontainer.metadata"

// defaultPath is the PATH a RUN gets when the image sets none (Docker's).
const defaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// Executor runs one Spec and pushes its image.
type Executor struct {
	// Root is the filesystem the build changes: "/" in a build pod (whose image is the Spec's
	// Base); a directory holding the base's files in the tests, where each RUN is chrooted into it.
	Root string
	// Mountinfo is the mount table whose mount points under Root are not the image
	// (/proc/self/mountinfo).
	Mountinfo string
	// Insecure lists the registries (host:port) reached over plain HTTP.
	Insecure []string
	// Keychain gives registry credentials (authn.DefaultKeychain reads $DOCKER_CONFIG).
	Keychain authn.Keychain
	// Transport, if set, carries the registry requests.
	Transport http.RoundTripper
	// Out gets the progress and the commands' output.
	Out io.Writer
	// OutputDelay is how long a step's output may stay open after its command exits, held by a
	// process the command left running (2 s if zero).
	OutputDelay time.Duration
	// Clock stamps the image's creation and history entry (clock.Real if nil).
	Clock clock.Clock
}

// buildState is the image's config as the steps change it.
type buildState struct {
	env     []string
	workdir string
	user    string
	labels  map[string]string
}

// step applies one instruction.
func (x *Executor) step(ctx context.Context, st *buildState, s Step) error {
	switch s.Op {
	case OpRun:
		return x.run(ctx, s.Args, st.user, st.workdir, append(withDefaults(st.env), s.Env...))
	case OpCopy:
		files := s.Files
		if s.Value != "" && len(files) == 1 {
			// COPY app.sh /usr/local/bin: into the directory, when the image has one there.
			var isDir bool
			if err := x.inRoot(func(r *os.Root) error {
				fi, err := r.Stat(strings.TrimPrefix(path.Clean(files[0].Path), "/"))
				isDir = err == nil && fi.IsDir()
				return nil
			}); err != nil {
				return err
			}
			if isDir {
				f := files[0]
				f.Path = path.Join(f.Path, s.Value)
				files = []File{f}
			}
		}
		return x.copyFiles(files)
	case OpEnv:
		st.env = setEnv(st.env, s.Key, expandStepEnv(s.Value, st.env))
	case OpLabel:
		st.labels[s.Key] = s.Value
	case OpUser:
		st.user = s.Value
	case OpWorkdir:
		dir := s.Value
		if !path.IsAbs(dir) {
			dir = path.Join("/", st.workdir, dir)
		}
		st.workdir = path.Clean(dir)
		// Docker creates the directory, owned by the USER at that point.
		id, err := resolveUser(x.Root, st.user)
		if err != nil {
			return err
		}
		return x.inRoot(func(r *os.Root) error {
			rel := strings.TrimPrefix(st.workdir, "/")
			if rel == "" {
				return nil
			}
			if _, err := r.Stat(rel); err == nil {
				return nil
			}
			if err := r.MkdirAll(rel, 0o755); err != nil {
				return err
			}
			return r.Lchown(rel, id.UID, id.GID)
		})
	}
	return nil
}

// run executes argv in the image as user (root for an empty one), in dir, with env: chrooted into
// Root unless Root is "/". Its output goes to Out, indented.
func (x *Executor) run(ctx context.Context, argv []string, user, dir string, env []string) error {
	id, err := resolveUser(x.Root, user)
	if err != nil {
		return err
	}
	env = withHome(env, id.Home)
	prog := argv[0]
	if !strings.Contains(prog, "/") {
		if prog, err = x.lookPath(prog, env); err != nil {
			return err
		}
	}
	if dir == "" {
		dir = "/"
	}
	cmd := exec.CommandContext(ctx, prog, argv[1:]...)
	cmd.Args[0] = argv[0]
	cmd.Env, cmd.Dir = env, dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(id.UID), Gid: uint32(id.GID), Groups: gids(id.Groups)}, Setpgid: true}
	if filepath.Clean(x.Root) != "/" {
		// Chroot needs root (CAP_SYS_CHROOT): the tests run as root, as a build pod does.
		cmd.SysProcAttr.Chroot = x.Root
	}
	// The command and what it starts are one process group, ended together when the build is.
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	// A step is done when its command exits, as in Docker: what it left running (`service mysql
	// start`) would hold the output open and change the files under the snapshot, so it gets
	// outputDelay to finish its output and then the whole group is killed.
	cmd.WaitDelay = x.outputDelay()
	out := newIndentWriter(x.Out, "    ")
	cmd.Stdout, cmd.Stderr = out, out
	err = cmd.Run()
	if cmd.Process != nil {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) // ESRCH when nothing is left
	}
	endOrphans()
	out.Flush()
	if errors.Is(err, exec.ErrWaitDelay) {
		return nil // the command succeeded; what it left behind is ended
	}
	return err
}

// endOrphans kills what a step left running in a session of its own (a daemon that called
// setsid), when the build is its container's first process: every other process of the
// container's PID namespace is then a step's, and becomes the build's child when its parent dies.
// It returns when none is left, so that nothing writes under the snapshot. Elsewhere (the tests'
// --root) it does nothing.
func endOrphans() {
	if os.Getpid() != 1 {
		return
	}
	for round := 0; round < 100; round++ {
		entries, err := os.ReadDir("/proc")
		if err != nil {
			return
		}
		left := 0
		for _, e := range entries {
			if pid, err := strconv.Atoi(e.Name()); err == nil && pid > 1 {
				left++
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
		if left == 0 {
			return
		}
		for { // reap until no child is left (ECHILD)
			if _, err := syscall.Wait4(-1, nil, 0, nil); err != nil && !errors.Is(err, syscall.EINTR) {
				break
			}
		}
		time.Sleep(10 * time.Millisecond) // for grandchildren still being given to us
	}
}

// outputDelay is how long a step's output may stay open after its command exits.
func (x *Executor) outputDelay() time.Duration {
	if x.OutputDelay > 0 {
		return x.OutputDelay
	}
	return 2 * time.Second
}

func gids(groups []int) []uint32 {
	out := make([]uint32, len(groups))
	for i, g := range groups {
		out[i] = uint32(g)
	}
	return out
}

// lookPath finds a program by the PATH of env, in the image.
func (x *Executor) lookPath(prog string, env []string) (string, error) {
	p := defaultPath
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			p = v
		}
	}
	for _, d := range filepath.SplitList(p) {
		if !path.IsAbs(d) {
			continue
		}
		cand := path.Join(d, prog)
		if fi, err := os.Stat(filepath.Join(x.Root, cand)); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return cand, nil
		}
	}
	return "", fmt.Errorf("%s: not found in PATH %s", prog, p)
}

// copyFiles writes a COPY's files into the image, with their owners (names resolved in the
// image's /etc/passwd and /etc/group) and modes. Missing parent directories are created as
// Docker does: root's, 0755.
func (x *Executor) copyFiles(files []File) error {
	return x.inRoot(func(r *os.Root) error {
		for _, f := range files {
			uid, gid := f.UID, f.GID
			if f.User != "" {
				id, err := resolveUser(x.Root, f.User)
				if err != nil {
					return fmt.Errorf("%s: %w", f.Path, err)
				}
				// A user without a group: the group whose number is the user's uid, as Docker does.
				uid, gid = id.UID, id.UID
			}
			if f.Group != "" {
				g, err := resolveGroup(x.Root, f.Group)
				if err != nil {
					return fmt.Errorf("%s: %w", f.Path, err)
				}
				gid = g
			}
			rel := strings.TrimPrefix(path.Clean(f.Path), "/")
			if rel == "" {
				continue
			}
			if d := path.Dir(rel); d != "." {
				if err := r.MkdirAll(d, 0o755); err != nil {
					return fmt.Errorf("%s: %w", f.Path, err)
				}
			}
			mode := fs.FileMode(f.Mode)
			var err error
			switch {
			case mode.IsDir():
				if err = r.MkdirAll(rel, mode.Perm()); err == nil {
					err = r.Chmod(rel, mode&(fs.ModePerm|fs.ModeSetuid|fs.ModeSetgid|fs.ModeSticky))
				}
			case mode&fs.ModeSymlink != 0:
				if fi, serr := r.Lstat(rel); serr == nil && !fi.IsDir() {
					err = r.Remove(rel)
				}
				if err == nil {
					err = r.Symlink(f.Target, rel)
				}
			case mode.IsRegular():
				var w *os.File
				if w, err = r.OpenFile(rel, os.O_WRONLY|os.O_CREATE|os.O_TRUNC|syscall.O_NOFOLLOW, 0o600); err == nil {
					_, err = w.Write(f.Data)
					if cerr := w.Close(); err == nil {
						err = cerr
					}
				}
				if err == nil {
					err = r.Chmod(rel, mode&(fs.ModePerm|fs.ModeSetuid|fs.ModeSetgid|fs.ModeSticky))
				}
			default:
				err = fmt.Errorf("mode %v: only files, directories and symlinks can be copied", mode)
			}
			if err == nil {
				err = r.Lchown(rel, uid, gid)
			}
			if err != nil {
				return fmt.Errorf("%s: %w", f.Path, err)
			}
			if mode.IsRegular() && mode&(fs.ModeSetuid|fs.ModeSetgid) != 0 {
				// chown clears setuid and setgid: set them again.
				if err := r.Chmod(rel, mode&(fs.ModePerm|fs.ModeSetuid|fs.ModeSetgid|fs.ModeSticky)); err != nil {
					return fmt.Errorf("%s: %w", f.Path, err)
				}
			}
		}
		return nil
	})
}

// inRoot runs fn with the image's root opened as an os.Root, so that no path or symlink leads
// out of it.
func (x *Executor) inRoot(fn func(*os.Root) error) error {
	r, err := os.OpenRoot(x.Root)
	if err != nil {
		return err
	}
	defer r.Close()
	return fn(r)
}

func (x *Executor) now() time.Time {
	if x.Clock == nil {
		return clock.Real{}.Now()
	}
	return x.Clock.Now()
}

// remote is the options of every registry request.
func (x *Executor) remote(ctx context.Context) []remote.Option {
	kc := x.Keychain
	if kc == nil {
		kc = authn.DefaultKeychain
	}
	opts := []remote.Option{remote.WithContext(ctx), remote.WithAuthFromKeychain(kc)}
	if x.Transport != nil {
		opts = append(opts, remote.WithTransport(x.Transport))
	}
	return opts
}

// parseRef parses an image or feature reference; a registry of --insecure-registry is reached
// over plain HTTP.
func (x *Executor) parseRef(s string) (name.Reference, error) {
	ref, err := name.ParseReference(s)
	if err != nil {
		return nil, err
	}
	for _, h := range x.Insecure {
		if ref.Context().RegistryStr() == h {
			return name.ParseReference(s, name.Insecure)
		}
	}
	return ref, nil
}

// isNotFound says whether a registry answered that a manifest is not there.
func isNotFound(err error) bool {
	var te *transport.Error
	return errors.As(err, &te) && te.StatusCode == http.StatusNotFound
}

// registryMessage is a registry error on one line; a refusal of the credentials says where they
// come from.
func registryMessage(err error) string {
	var te *transport.Error
	if errors.As(err, &te) && (te.StatusCode == http.StatusUnauthorized || te.StatusCode == http.StatusForbidden) {
		return fmt.Sprintf("the registry answered %d %s: the build has no credentials for it, or wrong ones (a docker config.json in $DOCKER_CONFIG)", te.StatusCode, http.StatusText(te.StatusCode))
	}
	return oneLine(err)
}

// validate checks a Spec as read from its file; an error names the field.
func (s Spec) validate() error {
	if s.Base == "" {
		return errors.New("spec: base: an image is required")
	}
	for i, st := range s.Steps {
		switch st.Op {
		case OpRun:
			if len(st.Args) == 0 || st.Args[0] == "" {
				return fmt.Errorf("spec: steps[%d].args: a command is required", i)
			}
		case OpCopy:
			for j, f := range st.Files {
				if !path.IsAbs(f.Path) {
					return fmt.Errorf("spec: steps[%d].files[%d].path: %q is not absolute", i, j, f.Path)
				}
			}
		case OpEnv, OpLabel:
			if st.Key == "" || strings.ContainsAny(st.Key, "=\x00") && st.Op == OpEnv {
				return fmt.Errorf("spec: steps[%d].key: %q is not a name", i, st.Key)
			}
		case OpWorkdir, OpUser:
			if st.Value == "" {
				return fmt.Errorf("spec: steps[%d].value: empty", i)
			}
		default:
			return fmt.Errorf("spec: steps[%d].op: unknown operation %q", i, st.Op)
		}
	}
	for i, f := range s.Features {
		switch {
		case f.Ref == "":
			return fmt.Errorf("spec: features[%d].ref: a reference is required", i)
		case strings.HasPrefix(f.Ref, "./") || strings.HasPrefix(f.Ref, "../"):
			return fmt.Errorf("spec: features[%d].ref: %s is a local feature (a folder next to devcontainer.json), which the build does not take yet: publish it to an OCI registry", i, f.Ref)
		case strings.HasPrefix(f.Ref, "https://") || strings.HasPrefix(f.Ref, "http://"):
			return fmt.Errorf("spec: features[%d].ref: %s is a tarball URL, which the build does not fetch: publish the feature to an OCI registry", i, f.Ref)
		}
		if _, err := name.ParseReference(f.Ref); err != nil {
			return fmt.Errorf("spec: features[%d].ref: %s", i, oneLine(err))
		}
	}
	return nil
}

// describe is a step as the log shows it: the instruction and its argument, on one short line.
func (s Step) describe() string {
	var d string
	switch s.Op {
	case OpRun:
		if len(s.Args) == 3 && s.Args[1] == "-c" {
			d = "RUN " + s.Args[2]
		} else {
			b, _ := json.Marshal(s.Args)
			d = "RUN " + string(b)
		}
	case OpCopy:
		if len(s.Files) == 1 {
			d = "COPY " + s.Files[0].Path
		} else {
			d = fmt.Sprintf("COPY %d files", len(s.Files))
			if len(s.Files) > 0 {
				d += " to " + path.Dir(s.Files[0].Path)
			}
		}
	case OpEnv:
		d = "ENV " + s.Key + "=" + s.Value
	case OpLabel:
		d = "LABEL " + s.Key + "=" + s.Value
	case OpWorkdir:
		d = "WORKDIR " + s.Value
	case OpUser:
		d = "USER " + s.Value
	}
	return shorten(d, 100)
}

// where is the step's Dockerfile line between open and close, or nothing.
func (s Step) where(open, close string) string {
	if s.Line <= 0 {
		return ""
	}
	return fmt.Sprintf("%sDockerfile:%d%s", open, s.Line, close)
}

// shorten makes s one line of at most n runes.
func shorten(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > n {
		return string(r[:n-3]) + "..."
	}
	return s
}

// oneLine is an error's message on one line (the pod's termination message is the log's tail).
func oneLine(err error) string {
	return strings.Join(strings.Fields(err.Error()), " ")
}

// setEnv sets NAME=value in env, replacing an earlier value.
func setEnv(env []string, key, value string) []string {
	out := make([]string, 0, len(env)+1)
	for _, kv := range env {
		if k, _, _ := strings.Cut(kv, "="); k != key {
			out = append(out, kv)
		}
	}
	return append(out, key+"="+value)
}

// getEnv is NAME's value in env (the last one).
func getEnv(env []string, key string) (string, bool) {
	v, ok := "", false
	for _, kv := range env {
		if k, val, _ := strings.Cut(kv, "="); k == key {
			v, ok = val, true
		}
	}
	return v, ok
}

// withDefaults adds Docker's PATH when env has none.
func withDefaults(env []string) []string {
	env = append([]string(nil), env...)
	if _, ok := getEnv(env, "PATH"); !ok {
		env = append(env, "PATH="+defaultPath)
	}
	return env
}

// withHome adds HOME, as Docker does, when env has none.
func withHome(env []string, home string) []string {
	if _, ok := getEnv(env, "HOME"); ok || home == "" {
		return env
	}
	return append(env, "HOME="+home)
}

// expandStepEnv expands an OpEnv's Value (Spec's rule): ${NAME} is NAME's value in env (empty when
// unset), $$ a literal $; anything else is kept as it is.
func expandStepEnv(s string, env []string) string {
	if !strings.Contains(s, "$") {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '$' || i+1 == len(s) {
			b.WriteByte(s[i])
			continue
		}
		switch s[i+1] {
		case '$':
			b.WriteByte('$')
			i++
		case '{':
			end := strings.IndexByte(s[i+2:], '}')
			if end < 0 {
				b.WriteString(s[i:])
				return b.String()
			}
			v, _ := getEnv(env, s[i+2:i+2+end])
			b.WriteString(v)
			i += 2 + end
		default:
			b.WriteByte('$')
		}
	}
	return b.String()
}

// expandEnv substitutes $NAME and ${NAME} from env, as an ENV instruction does.
func expandEnv(s string, env []string) string {
	return os.Expand(s, func(k string) string {
		v, _ := getEnv(env, k)
		return v
	})
}

// sortedEnvKeys is a map's keys in order, for a deterministic config.
func sortedEnvKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
