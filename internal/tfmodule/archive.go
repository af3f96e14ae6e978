// Package tfmodule is the Terraform module as Hangar moves and reads it, shared by the CLI (which
// packs a directory at push), the server (which inspects a pushed module) and the provisioner's
// runner (which extracts it): modules travel as gzipped tar archives; Pack makes one from a
// directory, Extract unpacks one safely, Inspect reads the input variables a module declares,
// bounded before any parsing (MaxNesting).
package tfmodule

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// Limits of a module archive, counted uncompressed.
const (
	// MaxFiles caps the number of entries (files and directories) of an archive.
	MaxFiles = 10_000
	// MaxBytes caps the total size of the files of an archive.
	MaxBytes = 100 << 20
)

// packTime is the modification time of every entry Pack writes, so the same files always give the
// same archive.
var packTime = time.Unix(0, 0).UTC()

// skippedDirs are directories Pack leaves out wherever they are: terraform's data directory, its
// workspace states and version control metadata.
var skippedDirs = map[string]bool{
	".terraform":          true,
	"terraform.tfstate.d": true,
	".git":                true,
	".hg":                 true,
	".svn":                true,
	".bzr":                true,
}

// skippedFiles are files Pack leaves out wherever they are: local state and its lock. The
// dependency lock file .terraform.lock.hcl is kept: it belongs to the module (terraform recommends
// committing it) and init honours it.
var skippedFiles = map[string]bool{
	"terraform.tfstate":            true,
	"terraform.tfstate.backup":     true,
	".terraform.tfstate.lock.info": true,
}

// Pack returns a deterministic gzipped tar archive of the module in dir: regular files only, in
// sorted order, with fixed times, owners and modes (0644, or 0755 when any execute bit is set).
// It skips .terraform/, terraform.tfstate.d/, version control directories and local state files.
// A symbolic link to a regular file inside dir is stored as that file; a link pointing outside dir,
// a link to a directory, or any other special file is an error. So is a module over MaxFiles files
// or MaxBytes bytes, or a configuration file over MaxConfigFileBytes.
func Pack(dir string) ([]byte, error) {
	root, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("pack %s: %w", dir, err)
	}
	realRoot, err := filepath.EvalSymlinks(root)
	if err != nil {
		return nil, fmt.Errorf("pack %s: %w", dir, err)
	}
	if st, err := os.Stat(realRoot); err != nil {
		return nil, fmt.Errorf("pack %s: %w", dir, err)
	} else if !st.IsDir() {
		return nil, fmt.Errorf("pack %s: not a directory", dir)
	}

	type file struct {
		name string // slash-separated, relative to dir
		path string // where to read it
		exec bool
	}
	var files []file
	var total int64
	err = filepath.WalkDir(realRoot, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p == realRoot {
			return nil
		}
		rel, err := filepath.Rel(realRoot, p)
		if err != nil {
			return err
		}
		name := filepath.ToSlash(rel)
		if d.IsDir() {
			if skippedDirs[d.Name()] {
				return fs.SkipDir
			}
			return nil
		}
		if skippedFiles[d.Name()] {
			return nil
		}
		src := p
		info, err := d.Info()
		if err != nil {
			return err
		}
		if info.Mode()&fs.ModeSymlink != 0 {
			target, err := filepath.EvalSymlinks(p)
			if err != nil {
				return fmt.Errorf("%s: symbolic link: %w", name, err)
			}
			if r, err := filepath.Rel(realRoot, target); err != nil || r == ".." || strings.HasPrefix(r, ".."+string(filepath.Separator)) {
				return fmt.Errorf("%s: symbolic link points outside the module directory (to %s)", name, target)
			}
			if info, err = os.Stat(target); err != nil {
				return fmt.Errorf("%s: %w", name, err)
			}
			if info.IsDir() {
				return fmt.Errorf("%s: symbolic link to a directory is not supported", name)
			}
			src = target
		}
		if !info.Mode().IsRegular() {
			return fmt.Errorf("%s: not a regular file (%s)", name, info.Mode().Type())
		}
		if len(files) >= MaxFiles {
			return fmt.Errorf("module has more than %d files", MaxFiles)
		}
		if !ignoredFile(name) && isConfigFile(name) && info.Size() > MaxConfigFileBytes {
			return fileTooLarge(name, info.Size()) // as Inspect would refuse it, before any upload
		}
		total += info.Size()
		if total > MaxBytes {
			return fmt.Errorf("module is larger than %d MiB (at %s)", MaxBytes>>20, name)
		}
		files = append(files, file{name: name, path: src, exec: info.Mode().Perm()&0o111 != 0})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("pack %s: %w", dir, err)
	}
	sort.Slice(files, func(i, j int) bool { return files[i].name < files[j].name })

	var buf bytes.Buffer
	zw, err := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	if err != nil {
		return nil, err
	}
	tw := tar.NewWriter(zw)
	total = 0
	for _, f := range files {
		data, err := os.ReadFile(f.path)
		if err != nil {
			return nil, fmt.Errorf("pack %s: %w", dir, err)
		}
		total += int64(len(data))
		if total > MaxBytes {
			return nil, fmt.Errorf("pack %s: module is larger than %d MiB (at %s)", dir, MaxBytes>>20, f.name)
		}
		mode := int64(0o644)
		if f.exec {
			mode = 0o755
		}
		hdr := &tar.Header{
			Typeflag: tar.TypeReg,
			Name:     f.name,
			Mode:     mode,
			Size:     int64(len(data)),
			ModTime:  packTime,
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return nil, fmt.Errorf("pack %s: %s: %w", dir, f.name, err)
		}
		if _, err := tw.Write(data); err != nil {
			return nil, fmt.Errorf("pack %s: %s: %w", dir, f.name, err)
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// Extract unpacks a module archive into dest (created if missing). It refuses, naming the entry,
// absolute paths, paths with "..", symbolic and hard links, devices and other special entries,
// duplicate files, and archives over MaxFiles entries or MaxBytes bytes uncompressed. Files are
// created with mode 0644 (0755 when the archive marks them executable), never over an existing
// file, and never outside dest, even through a symbolic link already in dest. On error dest may
// hold part of the archive.
func Extract(archive []byte, dest string) error {
	if err := os.MkdirAll(dest, 0o755); err != nil {
		return fmt.Errorf("extract module: %w", err)
	}
	root, err := os.OpenRoot(dest)
	if err != nil {
		return fmt.Errorf("extract module: %w", err)
	}
	defer root.Close()
	err = walkArchive(archive, func(e entry, r io.Reader) error {
		if e.dir {
			if err := root.MkdirAll(e.name, 0o755); err != nil {
				return fmt.Errorf("%q: %w", e.name, err)
			}
			return nil
		}
		if d := path.Dir(e.name); d != "." {
			if err := root.MkdirAll(d, 0o755); err != nil {
				return fmt.Errorf("%q: %w", e.name, err)
			}
		}
		mode := fs.FileMode(0o644)
		if e.exec {
			mode = 0o755
		}
		f, err := root.OpenFile(e.name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
		if err != nil {
			return fmt.Errorf("%q: %w", e.name, err)
		}
		_, err = io.Copy(f, r)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return fmt.Errorf("%q: %w", e.name, err)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("extract module: %w", err)
	}
	return nil
}

// entry is a checked archive entry.
type entry struct {
	name string // clean, relative, slash-separated
	dir  bool
	exec bool
	size int64 // as the header says; the reader never gives more
}

// errTooLarge is what a reader returns past the archive's byte budget.
var errTooLarge = fmt.Errorf("archive is larger than %d MiB uncompressed", MaxBytes>>20)

// walkArchive checks every entry of a gzipped tar archive and calls fn for each directory and
// regular file, with a reader of the file's contents (fn need not read it). It stops at the first
// bad entry or error.
func walkArchive(archive []byte, fn func(e entry, r io.Reader) error) error {
	zr, err := gzip.NewReader(bytes.NewReader(archive))
	if err != nil {
		return fmt.Errorf("not a gzipped tar archive: %w", err)
	}
	defer zr.Close()
	tr := tar.NewReader(zr)
	var count int
	var budget int64 = MaxBytes
	files := map[string]bool{}
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("reading archive: %w", err)
		}
		count++
		if count > MaxFiles {
			return fmt.Errorf("archive has more than %d entries (at %q)", MaxFiles, hdr.Name)
		}
		var e entry
		switch hdr.Typeflag {
		case tar.TypeXGlobalHeader:
			continue
		case tar.TypeDir:
			e.dir = true
		case tar.TypeReg, 0: // 0 is the pre-POSIX regular file flag
		case tar.TypeSymlink:
			return fmt.Errorf("%q is a symbolic link (to %q): links are not allowed", hdr.Name, hdr.Linkname)
		case tar.TypeLink:
			return fmt.Errorf("%q is a hard link (to %q): links are not allowed", hdr.Name, hdr.Linkname)
		case tar.TypeChar, tar.TypeBlock:
			return fmt.Errorf("%q is a device: only regular files and directories are allowed", hdr.Name)
		case tar.TypeFifo:
			return fmt.Errorf("%q is a named pipe: only regular files and directories are allowed", hdr.Name)
		default:
			return fmt.Errorf("%q has unsupported type %q: only regular files and directories are allowed", hdr.Name, string(hdr.Typeflag))
		}
		name, err := checkName(hdr.Name)
		if err != nil {
			return err
		}
		if name == "." {
			if e.dir {
				continue
			}
			return fmt.Errorf("%q: not a file name", hdr.Name)
		}
		e.name = name
		if e.dir {
			if err := fn(e, eofReader{}); err != nil {
				return err
			}
			continue
		}
		if files[name] {
			return fmt.Errorf("%q appears twice in the archive", hdr.Name)
		}
		files[name] = true
		if hdr.Size > budget {
			return fmt.Errorf("%w (at %q)", errTooLarge, hdr.Name)
		}
		e.exec = hdr.Mode&0o111 != 0
		e.size = hdr.Size
		lr := &budgetReader{r: tr, left: &budget}
		if err := fn(e, lr); err != nil {
			if errors.Is(err, errTooLarge) {
				return fmt.Errorf("%w (at %q)", errTooLarge, hdr.Name)
			}
			return err
		}
		// Account for what fn did not read, so the budget covers the whole archive.
		if _, err := io.Copy(io.Discard, lr); err != nil {
			if errors.Is(err, errTooLarge) {
				return fmt.Errorf("%w (at %q)", errTooLarge, hdr.Name)
			}
			return fmt.Errorf("reading %q: %w", hdr.Name, err)
		}
	}
}

// checkName returns the clean form of an archive entry name, refusing absolute paths, ".."
// elements, backslashes and NUL bytes.
func checkName(name string) (string, error) {
	switch {
	case name == "":
		return "", errors.New("archive entry with an empty name")
	case strings.ContainsRune(name, 0):
		return "", fmt.Errorf("%q: NUL byte in name", name)
	case strings.Contains(name, `\`):
		return "", fmt.Errorf("%q: backslash in name", name)
	case strings.HasPrefix(name, "/") || filepath.IsAbs(name) || filepath.VolumeName(name) != "":
		return "", fmt.Errorf("%q: absolute path", name)
	}
	for _, el := range strings.Split(name, "/") {
		if el == ".." {
			return "", fmt.Errorf("%q: path goes outside the module (..)", name)
		}
	}
	return path.Clean(name), nil
}

// budgetReader reads from r, charging every byte to *left; it fails with errTooLarge once the
// budget is spent.
type budgetReader struct {
	r    io.Reader
	left *int64
}

func (b *budgetReader) Read(p []byte) (int, error) {
	if int64(len(p)) > *b.left+1 {
		p = p[:*b.left+1]
	}
	n, err := b.r.Read(p)
	*b.left -= int64(n)
	if *b.left < 0 {
		return n, errTooLarge
	}
	return n, err
}

type eofReader struct{}

func (eofReader) Read([]byte) (int, error) { return 0, io.EOF }
