//go:build linux

package imagebuild

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// entry is what a snapshot keeps of one path: enough to tell that it changed (type, permissions,
// owners, size, times, inode, a symlink's target) without reading its content. A snapshot keeps
// about 240 bytes a path with its key (BenchmarkSnapshot); no file's content is ever held in
// memory.
type entry struct {
	mode         fs.FileMode
	uid, gid     uint32
	size         int64
	mtime, ctime int64 // nanoseconds
	ino          uint64
	rdev         uint64
	target       string
}

// snapshot maps a path in the image ("/etc/passwd") to its entry.
type snapshot map[string]entry

// snapshotter walks the build's root filesystem.
type snapshotter struct {
	root string
	// skip holds the image paths that are not the image: mount points under the root other than
	// the root itself (their contents belong to the pod, not the image) and the build's own work
	// directory.
	skip map[string]bool
}

// newSnapshotter reads the mount table and returns a snapshotter of root that skips its mounts.
func newSnapshotter(root string, mountinfo io.Reader, extraSkip ...string) (*snapshotter, error) {
	points, err := parseMountinfo(mountinfo)
	if err != nil {
		return nil, err
	}
	s := &snapshotter{root: root, skip: map[string]bool{}}
	for _, p := range points {
		if rel, ok := underRoot(root, p); ok && rel != "/" {
			s.skip[rel] = true
		}
	}
	for _, p := range extraSkip {
		s.skip[p] = true
	}
	return s, nil
}

// underRoot says where host path p is in the image whose root is root, if it is under it.
func underRoot(root, p string) (string, bool) {
	root = filepath.Clean(root)
	if root == "/" {
		return path.Clean(p), true
	}
	if p == root {
		return "/", true
	}
	if strings.HasPrefix(p, root+"/") {
		return path.Clean(p[len(root):]), true
	}
	return "", false
}

// take walks the root without following symbolic links (a link is recorded, never entered, so
// nothing out of the root is read) and without descending into the skipped paths.
func (s *snapshotter) take() (snapshot, error) {
	snap := snapshot{}
	var rootDev uint64
	if fi, err := os.Lstat(s.root); err != nil {
		return nil, fmt.Errorf("snapshot %s: %w", s.root, err)
	} else if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		rootDev = uint64(st.Dev)
	}
	err := filepath.WalkDir(s.root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return fmt.Errorf("snapshot: %w", err)
		}
		rel, _ := underRoot(s.root, p)
		if rel == "/" {
			return nil
		}
		if s.skip[rel] {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		fi, err := d.Info()
		if errors.Is(err, fs.ErrNotExist) {
			return nil // gone since its directory was read
		} else if err != nil {
			return fmt.Errorf("snapshot %s: %w", rel, err)
		}
		st, ok := fi.Sys().(*syscall.Stat_t)
		if !ok {
			return fmt.Errorf("snapshot %s: no stat", rel)
		}
		// A directory on another device is a mount the table did not name (overlayfs reports its
		// own device for directories; files may show their lower layer's, so only directories
		// are checked).
		if d.IsDir() && uint64(st.Dev) != rootDev {
			return filepath.SkipDir
		}
		e := entry{
			mode: fi.Mode(), uid: st.Uid, gid: st.Gid, size: st.Size, ino: st.Ino, rdev: uint64(st.Rdev),
			mtime: time.Unix(st.Mtim.Sec, st.Mtim.Nsec).UnixNano(),
			ctime: time.Unix(st.Ctim.Sec, st.Ctim.Nsec).UnixNano(),
		}
		if fi.Mode()&fs.ModeSymlink != 0 {
			if e.target, err = os.Readlink(p); err != nil {
				return fmt.Errorf("snapshot %s: %w", rel, err)
			}
		}
		snap[rel] = e
		return nil
	})
	if err != nil {
		return nil, err
	}
	return snap, nil
}

// diffStats counts what a layer holds.
type diffStats struct{ Added, Changed, Deleted int }

// writeDiff writes, as one uncompressed tar layer, what changed from before to after: new and
// changed files, directories, symlinks and devices with their owners and modes (hard links as
// regular files), and a `.wh.` whiteout for each deleted path whose directory is still there (a
// deleted directory's whiteout hides its contents). Contents stream from the root.
func (s *snapshotter) writeDiff(w io.Writer, before, after snapshot) (diffStats, error) {
	var st diffStats
	type item struct {
		name     string // the tar entry's path, relative
		path     string // image path, for content
		e        entry
		whiteout bool
	}
	var items []item
	for p, e := range after {
		old, existed := before[p]
		if existed && old == e {
			continue
		}
		if e.mode.Type()&fs.ModeSocket != 0 {
			continue // a socket is a running process's, not the image's
		}
		if existed {
			st.Changed++
		} else {
			st.Added++
		}
		items = append(items, item{name: strings.TrimPrefix(p, "/"), path: p, e: e})
	}
	for p := range before {
		if _, ok := after[p]; ok {
			continue
		}
		dir := path.Dir(p)
		if dir != "/" {
			if parent, ok := after[dir]; !ok || !parent.mode.IsDir() {
				continue // the parent's own deletion or replacement hides it
			}
		}
		st.Deleted++
		items = append(items, item{name: strings.TrimPrefix(path.Join(dir, ".wh."+path.Base(p)), "/"), whiteout: true})
	}
	sort.Slice(items, func(i, j int) bool { return items[i].name < items[j].name })
	tw := tar.NewWriter(w)
	for _, it := range items {
		if it.whiteout {
			if err := tw.WriteHeader(&tar.Header{Name: it.name, Typeflag: tar.TypeReg, Mode: 0o644, ModTime: time.Unix(0, 0), Format: tar.FormatPAX}); err != nil {
				return st, fmt.Errorf("layer: whiteout %s: %w", it.name, err)
			}
			continue
		}
		if err := s.writeEntry(tw, it.name, it.path, it.e); err != nil {
			return st, err
		}
	}
	if err := tw.Close(); err != nil {
		return st, fmt.Errorf("layer: %w", err)
	}
	return st, nil
}

// writeEntry writes one path's header and, for a regular file, its content.
func (s *snapshotter) writeEntry(tw *tar.Writer, name, p string, e entry) error {
	h := &tar.Header{
		Name: name, Mode: tarMode(e.mode), Uid: int(e.uid), Gid: int(e.gid),
		ModTime: time.Unix(0, e.mtime), Format: tar.FormatPAX,
	}
	switch t := e.mode.Type(); {
	case t == 0:
		h.Typeflag = tar.TypeReg
	case t&fs.ModeDir != 0:
		h.Typeflag = tar.TypeDir
		h.Name += "/"
	case t&fs.ModeSymlink != 0:
		h.Typeflag, h.Linkname = tar.TypeSymlink, e.target
	case t&fs.ModeNamedPipe != 0:
		h.Typeflag = tar.TypeFifo
	case t&fs.ModeDevice != 0:
		h.Typeflag = tar.TypeBlock
		if t&fs.ModeCharDevice != 0 {
			h.Typeflag = tar.TypeChar
		}
		h.Devmajor, h.Devminor = int64((e.rdev>>8)&0xfff|(e.rdev>>32)&^0xfff), int64(e.rdev&0xff|(e.rdev>>12)&^0xff)
	default:
		return nil
	}
	if h.Typeflag != tar.TypeReg {
		if err := tw.WriteHeader(h); err != nil {
			return fmt.Errorf("layer: %s: %w", p, err)
		}
		return nil
	}
	f, err := os.OpenFile(filepath.Join(s.root, filepath.FromSlash(p)), os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return fmt.Errorf("layer: %s: %w", p, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return fmt.Errorf("layer: %s: %w", p, err)
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("layer: %s changed while the layer was written", p)
	}
	h.Size = fi.Size()
	// File capabilities (setcap's, as ping's) are an extended attribute; tar carries them as a
	// PAX record, which containerd applies.
	if c, ok := fileCapability(f); ok {
		h.PAXRecords = map[string]string{"SCHILY.xattr." + capabilityXattr: c}
	}
	if err := tw.WriteHeader(h); err != nil {
		return fmt.Errorf("layer: %s: %w", p, err)
	}
	if _, err := io.CopyN(tw, f, h.Size); err != nil {
		return fmt.Errorf("layer: %s: %w", p, err)
	}
	return nil
}

// tarMode is a tar header's mode: the permission bits and setuid, setgid and sticky.
func tarMode(m fs.FileMode) int64 {
	v := int64(m.Perm())
	if m&fs.ModeSetuid != 0 {
		v |= 0o4000
	}
	if m&fs.ModeSetgid != 0 {
		v |= 0o2000
	}
	if m&fs.ModeSticky != 0 {
		v |= 0o1000
	}
	return v
}

// capabilityXattr is where Linux keeps a file's capabilities.
const capabilityXattr = "security.capability"

// fileCapability reads an open file's capabilities, if it has any.
func fileCapability(f *os.File) (string, bool) {
	buf := make([]byte, 64) // a vfs_cap_data is at most 24 bytes
	rc, err := f.SyscallConn()
	if err != nil {
		return "", false
	}
	n, gerr := 0, error(nil)
	if err := rc.Control(func(fd uintptr) { n, gerr = unix.Fgetxattr(int(fd), capabilityXattr, buf) }); err != nil || gerr != nil || n <= 0 {
		return "", false
	}
	return string(buf[:n]), true
}
