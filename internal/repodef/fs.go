package repodef

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"slices"
	"strings"
	"sync"
	"time"
)

// Bounds of what an FS reads from the forge for one definition: requests (one per listing or
// file) and bytes. The image build's own bounds (internal/imagebuild) are tighter; these keep
// any reader of the FS, and the forge, safe.
const (
	MaxFSRequests = 1200
	MaxFSBytes    = 4 << 20
)

// ErrBudget is an FS that has read as much as one definition may.
var ErrBudget = errors.New("the repository's files read for this definition exceed the limit")

// FS returns the repository r as an fs.FS (with ReadDir, ReadFile, Stat, Lstat and ReadLink), for
// the files a devcontainer.json names (its Dockerfile, build context, compose files). It reads
// through the forge's API with ctx, lazily, each listing and file once, within MaxFSRequests and
// MaxFSBytes. A file is 0755 when git has it executable, else 0644; folders are listed through
// the git trees API where the forge has one (GitHub, Gitea), whose entries carry their modes.
func FS(ctx context.Context, r Reader) fs.FS {
	return &repoFS{ctx: ctx, r: r, dirs: map[string][]Entry{}, files: map[string][]byte{}}
}

type repoFS struct {
	ctx context.Context
	r   Reader

	mu       sync.Mutex
	requests int
	bytes    int
	dirs     map[string][]Entry
	files    map[string][]byte
}

// request counts a request to the forge, before it is sent; received counts what it answered.
// The caller holds mu.
func (f *repoFS) request() error {
	f.requests++
	if f.requests > MaxFSRequests {
		return fmt.Errorf("%w (%d requests to the forge)", ErrBudget, MaxFSRequests)
	}
	return nil
}

func (f *repoFS) received(n int) error {
	f.bytes += n
	if f.bytes > MaxFSBytes {
		return fmt.Errorf("%w (%d MiB)", ErrBudget, MaxFSBytes>>20)
	}
	return nil
}

func pathErr(op, name string, err error) error {
	if errors.Is(err, ErrNotFound) {
		err = fs.ErrNotExist
	}
	return &fs.PathError{Op: op, Path: name, Err: err}
}

// treeLister lists folders with their git modes (ForgeReader on GitHub and Gitea).
type treeLister interface {
	ListsTrees() bool
	ListTree(ctx context.Context, sha string) ([]Entry, error)
}

// list returns a directory's entries, submodules left out, sorted by name.
func (f *repoFS) list(dir string) ([]Entry, error) {
	f.mu.Lock()
	e, ok := f.dirs[dir]
	f.mu.Unlock()
	if ok {
		return e, nil
	}
	entries, err := f.fetchList(dir)
	if err != nil {
		return nil, err
	}
	entries = slices.DeleteFunc(slices.Clone(entries), func(e Entry) bool { return e.Submodule })
	slices.SortFunc(entries, func(a, b Entry) int { return strings.Compare(a.Name, b.Name) })
	f.mu.Lock()
	f.dirs[dir] = entries
	f.mu.Unlock()
	return entries, nil
}

// fetchList asks the forge for a directory: by its tree where the forge's contents API does not
// say the files' modes (the root by the ref, a folder by the hash its parent's listing gave),
// else by its path.
func (f *repoFS) fetchList(dir string) ([]Entry, error) {
	if tl, ok := f.r.(treeLister); ok && tl.ListsTrees() {
		sha := ""
		if dir != "." {
			parent, err := f.lstat("readdir", dir)
			if err != nil {
				return nil, err
			}
			if !parent.e.Dir || parent.e.SHA == "" {
				return nil, ErrNotFound
			}
			sha = parent.e.SHA
		}
		if err := f.charge(); err != nil {
			return nil, err
		}
		return tl.ListTree(f.ctx, sha)
	}
	if err := f.charge(); err != nil {
		return nil, err
	}
	p := dir
	if dir == "." {
		p = ""
	}
	return f.r.List(f.ctx, p)
}

func (f *repoFS) charge() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.request()
}

// content reads a file once.
func (f *repoFS) content(name string) ([]byte, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if b, ok := f.files[name]; ok {
		return b, nil
	}
	if err := f.request(); err != nil {
		return nil, err
	}
	b, err := f.r.ReadFile(f.ctx, name)
	if err != nil {
		return nil, err
	}
	if err := f.received(len(b)); err != nil {
		return nil, err
	}
	f.files[name] = b
	return b, nil
}

// lstat finds name's entry in its directory's listing.
func (f *repoFS) lstat(op, name string) (*info, error) {
	if !fs.ValidPath(name) {
		return nil, pathErr(op, name, fs.ErrInvalid)
	}
	if name == "." {
		return &info{fs: f, path: ".", e: Entry{Name: ".", Dir: true}}, nil
	}
	entries, err := f.list(path.Dir(name))
	if err != nil {
		return nil, pathErr(op, name, err)
	}
	base := path.Base(name)
	i, ok := slices.BinarySearchFunc(entries, base, func(e Entry, n string) int {
		switch {
		case e.Name < n:
			return -1
		case e.Name > n:
			return 1
		}
		return 0
	})
	if !ok {
		return nil, pathErr(op, name, fs.ErrNotExist)
	}
	return &info{fs: f, path: name, e: entries[i]}, nil
}

// resolve follows symlinks, inside the repository only.
func (f *repoFS) resolve(op, name string) (*info, error) {
	for range 16 {
		in, err := f.lstat(op, name)
		if err != nil || !in.e.Symlink {
			return in, err
		}
		target, err := f.ReadLink(name)
		if err != nil {
			return nil, err
		}
		next := path.Join(path.Dir(name), target)
		if path.IsAbs(target) || !fs.ValidPath(next) {
			return nil, pathErr(op, name, fmt.Errorf("a symlink to %s, outside the repository", target))
		}
		name = next
	}
	return nil, pathErr(op, name, errors.New("a chain of more than 16 symlinks"))
}

// Open implements fs.FS.
func (f *repoFS) Open(name string) (fs.File, error) {
	in, err := f.resolve("open", name)
	if err != nil {
		return nil, err
	}
	if in.IsDir() {
		entries, err := f.ReadDir(in.path)
		if err != nil {
			return nil, err
		}
		return &dir{info: in, entries: entries}, nil
	}
	b, err := f.content(in.path)
	if err != nil {
		return nil, pathErr("open", name, err)
	}
	return &file{info: in, Reader: bytes.NewReader(b)}, nil
}

// ReadFile implements fs.ReadFileFS.
func (f *repoFS) ReadFile(name string) ([]byte, error) {
	in, err := f.resolve("read", name)
	if err != nil {
		return nil, err
	}
	if in.IsDir() {
		return nil, pathErr("read", name, errors.New("is a directory"))
	}
	b, err := f.content(in.path)
	if err != nil {
		return nil, pathErr("read", name, err)
	}
	return slices.Clone(b), nil
}

// ReadDir implements fs.ReadDirFS.
func (f *repoFS) ReadDir(name string) ([]fs.DirEntry, error) {
	in, err := f.resolve("readdir", name)
	if err != nil {
		return nil, err
	}
	if !in.IsDir() {
		return nil, pathErr("readdir", name, errors.New("not a directory"))
	}
	entries, err := f.list(in.path)
	if err != nil {
		return nil, pathErr("readdir", name, err)
	}
	out := make([]fs.DirEntry, len(entries))
	for i, e := range entries {
		out[i] = &info{fs: f, path: path.Join(in.path, e.Name), e: e}
	}
	return out, nil
}

// Stat implements fs.StatFS.
func (f *repoFS) Stat(name string) (fs.FileInfo, error) { return f.resolve("stat", name) }

// Lstat implements fs.ReadLinkFS.
func (f *repoFS) Lstat(name string) (fs.FileInfo, error) { return f.lstat("lstat", name) }

// ReadLink implements fs.ReadLinkFS.
func (f *repoFS) ReadLink(name string) (string, error) {
	in, err := f.lstat("readlink", name)
	if err != nil {
		return "", err
	}
	if !in.e.Symlink {
		return "", pathErr("readlink", name, fs.ErrInvalid)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if b, ok := f.files[name]; ok {
		return string(b), nil
	}
	if err := f.request(); err != nil {
		return "", err
	}
	var target string
	if lr, ok := f.r.(interface {
		ReadLink(context.Context, string) (string, error)
	}); ok {
		target, err = lr.ReadLink(f.ctx, name)
	} else {
		var b []byte
		b, err = f.r.ReadFile(f.ctx, name)
		target = string(b)
	}
	if err != nil {
		return "", pathErr("readlink", name, err)
	}
	if err := f.received(len(target)); err != nil {
		return "", err
	}
	f.files[name] = []byte(target)
	return target, nil
}

// info is an entry as fs.FileInfo and fs.DirEntry.
type info struct {
	fs   *repoFS
	path string
	e    Entry
}

func (i *info) Name() string               { return path.Base(i.path) }
func (i *info) IsDir() bool                { return i.e.Dir }
func (i *info) ModTime() time.Time         { return time.Time{} }
func (i *info) Sys() any                   { return nil }
func (i *info) Type() fs.FileMode          { return i.Mode().Type() }
func (i *info) Info() (fs.FileInfo, error) { return i, nil }

func (i *info) Size() int64 {
	i.fs.mu.Lock()
	defer i.fs.mu.Unlock()
	if b, ok := i.fs.files[i.path]; ok {
		return int64(len(b))
	}
	return i.e.Size
}

func (i *info) Mode() fs.FileMode {
	switch {
	case i.e.Dir:
		return fs.ModeDir | 0o755
	case i.e.Symlink:
		return fs.ModeSymlink | 0o777
	case i.e.Mode&0o111 != 0:
		return 0o755
	}
	return 0o644
}

type file struct {
	info *info
	*bytes.Reader
}

func (f *file) Stat() (fs.FileInfo, error) { return f.info, nil }
func (f *file) Close() error               { return nil }

type dir struct {
	info    *info
	entries []fs.DirEntry
	off     int
}

func (d *dir) Stat() (fs.FileInfo, error) { return d.info, nil }
func (d *dir) Close() error               { return nil }
func (d *dir) Read([]byte) (int, error) {
	return 0, &fs.PathError{Op: "read", Path: d.info.path, Err: errors.New("is a directory")}
}

func (d *dir) ReadDir(n int) ([]fs.DirEntry, error) {
	rest := d.entries[d.off:]
	if n <= 0 {
		d.off = len(d.entries)
		return rest, nil
	}
	if len(rest) == 0 {
		return nil, io.EOF
	}
	n = min(n, len(rest))
	d.off += n
	return rest[:n], nil
}
