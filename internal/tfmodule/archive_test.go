package tfmodule

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"
)

// tarEntry is one entry of a hand-made archive.
type tarEntry struct {
	name     string
	typ      byte
	body     string
	size     int64 // of a body of zeros, when body is ""
	mode     int64
	linkname string
}

// makeArchive builds a gzipped tar archive from entries, without any of Pack's checks.
func makeArchive(tb testing.TB, entries ...tarEntry) []byte {
	tb.Helper()
	var buf bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&buf, gzip.BestSpeed)
	tw := tar.NewWriter(zw)
	for _, e := range entries {
		typ := e.typ
		if typ == 0 {
			typ = tar.TypeReg
		}
		size := int64(len(e.body))
		if e.body == "" {
			size = e.size
		}
		if typ != tar.TypeReg {
			size = 0
		}
		mode := e.mode
		if mode == 0 {
			mode = 0o644
		}
		hdr := &tar.Header{Typeflag: typ, Name: e.name, Size: size, Mode: mode, Linkname: e.linkname, Format: tar.FormatPAX}
		if err := tw.WriteHeader(hdr); err != nil {
			tb.Fatalf("header %q: %v", e.name, err)
		}
		if typ == tar.TypeReg {
			var err error
			if e.body != "" {
				_, err = tw.Write([]byte(e.body))
			} else if size > 0 {
				_, err = tw.Write(make([]byte, size))
			}
			if err != nil {
				tb.Fatalf("body %q: %v", e.name, err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		tb.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		tb.Fatal(err)
	}
	return buf.Bytes()
}

func writeFile(t *testing.T, path, content string, mode fs.FileMode) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), mode); err != nil {
		t.Fatal(err)
	}
}

// tree lists the regular files under dir as name → content, and fails on anything else but
// directories.
func tree(t *testing.T, dir string) map[string]string {
	t.Helper()
	got := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			return nil
		}
		if !d.Type().IsRegular() {
			t.Errorf("%s: not a regular file (%v)", p, d.Type())
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		got[filepath.ToSlash(rel)] = string(b)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return got
}

func TestPackExtractRoundTrip(t *testing.T) {
	src := t.TempDir()
	writeFile(t, filepath.Join(src, "main.tf"), `variable "start_count" {}`+"\n", 0o644)
	writeFile(t, filepath.Join(src, "scripts/setup.sh"), "#!/bin/sh\necho hi\n", 0o750)
	writeFile(t, filepath.Join(src, "modules/a/a.tf"), "# a\n", 0o600)
	writeFile(t, filepath.Join(src, ".terraform.lock.hcl"), "# lock\n", 0o644)
	writeFile(t, filepath.Join(src, "empty.txt"), "", 0o644)
	// Left out: terraform's data dir, local state, workspace states, version control.
	writeFile(t, filepath.Join(src, ".terraform/providers/p"), "binary", 0o755)
	writeFile(t, filepath.Join(src, "modules/a/.terraform/x"), "x", 0o644)
	writeFile(t, filepath.Join(src, "terraform.tfstate"), `{"secret":1}`, 0o644)
	writeFile(t, filepath.Join(src, "terraform.tfstate.backup"), `{"secret":0}`, 0o644)
	writeFile(t, filepath.Join(src, "terraform.tfstate.d/dev/terraform.tfstate"), "{}", 0o644)
	writeFile(t, filepath.Join(src, ".git/config"), "[core]", 0o644)
	// A link to a file inside the module is stored as that file.
	if err := os.Symlink("main.tf", filepath.Join(src, "link.tf")); err != nil {
		t.Fatal(err)
	}

	archive, err := Pack(src)
	if err != nil {
		t.Fatalf("Pack: %v", err)
	}
	dest := filepath.Join(t.TempDir(), "out")
	if err := Extract(archive, dest); err != nil {
		t.Fatalf("Extract: %v", err)
	}
	got := tree(t, dest)
	want := map[string]string{
		"main.tf":             `variable "start_count" {}` + "\n",
		"link.tf":             `variable "start_count" {}` + "\n",
		"scripts/setup.sh":    "#!/bin/sh\necho hi\n",
		"modules/a/a.tf":      "# a\n",
		".terraform.lock.hcl": "# lock\n",
		"empty.txt":           "",
	}
	if len(got) != len(want) {
		t.Errorf("extracted files %v, want %v", keys(got), keys(want))
	}
	for name, content := range want {
		if got[name] != content {
			t.Errorf("%s = %q, want %q", name, got[name], content)
		}
	}
	for name, mode := range map[string]fs.FileMode{"scripts/setup.sh": 0o755, "main.tf": 0o644, "modules/a/a.tf": 0o644} {
		st, err := os.Stat(filepath.Join(dest, name))
		if err != nil {
			t.Fatal(err)
		}
		// The umask may clear bits, never add them.
		if st.Mode().Perm()&^mode != 0 || (mode&0o100 != 0) != (st.Mode().Perm()&0o100 != 0) {
			t.Errorf("%s: mode %v, want %v", name, st.Mode().Perm(), mode)
		}
	}

	// Deterministic: other times and permissions (beyond the execute bit) give the same bytes.
	old := time.Date(2001, 2, 3, 4, 5, 6, 0, time.UTC)
	if err := os.Chtimes(filepath.Join(src, "main.tf"), old, old); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Join(src, "modules/a/a.tf"), 0o664); err != nil {
		t.Fatal(err)
	}
	again, err := Pack(src)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(archive, again) {
		t.Error("Pack is not deterministic")
	}
	// Sorted entries with fixed metadata.
	var names []string
	zr, _ := gzip.NewReader(bytes.NewReader(archive))
	tr := tar.NewReader(zr)
	for {
		hdr, err := tr.Next()
		if err != nil {
			break
		}
		names = append(names, hdr.Name)
		if !hdr.ModTime.Equal(time.Unix(0, 0)) || hdr.Uid != 0 || hdr.Gid != 0 || hdr.Typeflag != tar.TypeReg {
			t.Errorf("%s: header %+v", hdr.Name, hdr)
		}
	}
	if !sort.StringsAreSorted(names) {
		t.Errorf("entries not sorted: %v", names)
	}
}

func keys(m map[string]string) []string {
	var k []string
	for n := range m {
		k = append(k, n)
	}
	sort.Strings(k)
	return k
}

func TestPackRefuses(t *testing.T) {
	t.Parallel()
	t.Run("link outside", func(t *testing.T) {
		src := t.TempDir()
		outside := filepath.Join(t.TempDir(), "secret")
		writeFile(t, outside, "secret", 0o644)
		writeFile(t, filepath.Join(src, "main.tf"), "", 0o644)
		if err := os.Symlink(outside, filepath.Join(src, "leak.tf")); err != nil {
			t.Fatal(err)
		}
		_, err := Pack(src)
		if err == nil || !strings.Contains(err.Error(), "leak.tf") || !strings.Contains(err.Error(), "outside") {
			t.Fatalf("Pack = %v, want an error naming leak.tf", err)
		}
	})
	t.Run("relative link outside", func(t *testing.T) {
		parent := t.TempDir()
		src := filepath.Join(parent, "mod")
		writeFile(t, filepath.Join(parent, "secret"), "secret", 0o644)
		writeFile(t, filepath.Join(src, "main.tf"), "", 0o644)
		if err := os.Symlink("../secret", filepath.Join(src, "leak.tf")); err != nil {
			t.Fatal(err)
		}
		if _, err := Pack(src); err == nil || !strings.Contains(err.Error(), "leak.tf") {
			t.Fatalf("Pack = %v, want an error naming leak.tf", err)
		}
	})
	t.Run("link to a directory", func(t *testing.T) {
		src := t.TempDir()
		writeFile(t, filepath.Join(src, "sub/main.tf"), "", 0o644)
		if err := os.Symlink("sub", filepath.Join(src, "again")); err != nil {
			t.Fatal(err)
		}
		if _, err := Pack(src); err == nil || !strings.Contains(err.Error(), "again") {
			t.Fatalf("Pack = %v, want an error naming the link", err)
		}
	})
	t.Run("too many files", func(t *testing.T) {
		src := t.TempDir()
		for i := 0; i <= MaxFiles; i++ {
			if err := os.WriteFile(filepath.Join(src, "f"+strconv.Itoa(i)), nil, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := Pack(src); err == nil || !strings.Contains(err.Error(), "more than") {
			t.Fatalf("Pack = %v, want too many files", err)
		}
	})
	t.Run("configuration file too large", func(t *testing.T) {
		src := t.TempDir()
		writeFile(t, filepath.Join(src, "main.tf"), `variable "v" {}`, 0o644)
		writeFile(t, filepath.Join(src, "sub/generated.tf.json"), strings.Repeat(" ", MaxConfigFileBytes+1), 0o644)
		writeFile(t, filepath.Join(src, ".hidden.tf"), strings.Repeat(" ", MaxConfigFileBytes+1), 0o644) // terraform skips it
		_, err := Pack(src)
		if err == nil || !strings.Contains(err.Error(), "sub/generated.tf.json is 262145 bytes") || !strings.Contains(err.Error(), "at most 262144 bytes") {
			t.Fatalf("Pack = %v, want the file named with the limit", err)
		}
	})
	t.Run("too many bytes", func(t *testing.T) {
		src := t.TempDir()
		f, err := os.Create(filepath.Join(src, "big"))
		if err != nil {
			t.Fatal(err)
		}
		if err := f.Truncate(MaxBytes + 1); err != nil { // sparse: costs no disk
			t.Fatal(err)
		}
		f.Close()
		if _, err := Pack(src); err == nil || !strings.Contains(err.Error(), "larger than") {
			t.Fatalf("Pack = %v, want too large", err)
		}
	})
}

func TestExtractRefuses(t *testing.T) {
	t.Parallel()
	many := make([]tarEntry, MaxFiles+1)
	for i := range many {
		many[i] = tarEntry{name: "f" + strconv.Itoa(i), body: "x"}
	}
	for _, tc := range []struct {
		name    string
		entries []tarEntry
		want    []string // substrings of the error
	}{
		{"traversal", []tarEntry{{name: "main.tf", body: "x"}, {name: "../evil", body: "x"}}, []string{`"../evil"`, ".."}},
		{"nested traversal", []tarEntry{{name: "a/../../evil", body: "x"}}, []string{`"a/../../evil"`}},
		{"traversal dir", []tarEntry{{name: "../d/", typ: tar.TypeDir}}, []string{`"../d/"`}},
		{"absolute", []tarEntry{{name: "/tmp/evil", body: "x"}}, []string{`"/tmp/evil"`, "absolute"}},
		{"backslash", []tarEntry{{name: `..\evil`, body: "x"}}, []string{"backslash"}},
		{"symlink", []tarEntry{{name: "link", typ: tar.TypeSymlink, linkname: "/etc/passwd"}}, []string{`"link"`, "symbolic link", "/etc/passwd"}},
		{"relative symlink", []tarEntry{{name: "link", typ: tar.TypeSymlink, linkname: "main.tf"}}, []string{`"link"`, "symbolic link"}},
		{"hardlink", []tarEntry{{name: "main.tf", body: "x"}, {name: "hard", typ: tar.TypeLink, linkname: "main.tf"}}, []string{`"hard"`, "hard link"}},
		{"char device", []tarEntry{{name: "null", typ: tar.TypeChar}}, []string{`"null"`, "device"}},
		{"block device", []tarEntry{{name: "sda", typ: tar.TypeBlock}}, []string{`"sda"`, "device"}},
		{"fifo", []tarEntry{{name: "pipe", typ: tar.TypeFifo}}, []string{`"pipe"`, "pipe"}},
		{"duplicate", []tarEntry{{name: "main.tf", body: "a"}, {name: "./main.tf", body: "b"}}, []string{`"./main.tf"`, "twice"}},
		{"too many files", many, []string{"more than 10000"}},
		{"too many bytes", []tarEntry{{name: "a", size: MaxBytes / 2}, {name: "b", size: MaxBytes/2 + 1}}, []string{`"b"`, "larger than 100 MiB"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			parent := t.TempDir()
			dest := filepath.Join(parent, "dest")
			err := Extract(makeArchive(t, tc.entries...), dest)
			if err == nil {
				t.Fatal("Extract succeeded")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
			assertOnlyDest(t, parent)
		})
	}
	t.Run("not an archive", func(t *testing.T) {
		if err := Extract([]byte("plain text"), t.TempDir()); err == nil || !strings.Contains(err.Error(), "gzip") {
			t.Fatalf("Extract = %v", err)
		}
	})
	t.Run("through a link already in dest", func(t *testing.T) {
		parent := t.TempDir()
		dest := filepath.Join(parent, "dest")
		outside := filepath.Join(parent, "outside")
		if err := os.MkdirAll(dest, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Mkdir(outside, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(outside, filepath.Join(dest, "link")); err != nil {
			t.Fatal(err)
		}
		err := Extract(makeArchive(t, tarEntry{name: "link/evil", body: "x"}), dest)
		if err == nil || !strings.Contains(err.Error(), `"link/evil"`) {
			t.Fatalf("Extract = %v, want an error naming link/evil", err)
		}
		if _, err := os.Stat(filepath.Join(outside, "evil")); !os.IsNotExist(err) {
			t.Fatalf("file written outside dest: %v", err)
		}
	})
	t.Run("size exactly at the limit", func(t *testing.T) {
		dest := t.TempDir()
		if err := Extract(makeArchive(t, tarEntry{name: "a", size: MaxBytes}, tarEntry{name: "d/", typ: tar.TypeDir}), dest); err != nil {
			t.Fatalf("Extract: %v", err)
		}
	})
}

// assertOnlyDest fails if parent holds anything but dest.
func assertOnlyDest(t testing.TB, parent string) {
	t.Helper()
	ents, err := os.ReadDir(parent)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if e.Name() != "dest" {
			t.Errorf("written outside dest: %s", filepath.Join(parent, e.Name()))
		}
	}
	filepath.WalkDir(filepath.Join(parent, "dest"), func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && !d.Type().IsRegular() {
			t.Errorf("%s: extracted a %v", p, d.Type())
		}
		return nil
	})
}
