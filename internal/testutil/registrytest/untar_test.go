package registrytest

import (
	"archive/tar"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// An archive entry that would land outside the unpacking directory, or is not a file or folder,
// is refused with its name, and nothing is written outside.
func TestUntarRefuses(t *testing.T) {
	for _, tc := range []struct {
		h    tar.Header
		want string
	}{
		{tar.Header{Name: "../evil", Typeflag: tar.TypeReg, Mode: 0o644}, `entry "../evil" leaves`},
		{tar.Header{Name: "/abs/evil", Typeflag: tar.TypeReg, Mode: 0o644}, `entry "/abs/evil" leaves`},
		{tar.Header{Name: "blobs/../../evil", Typeflag: tar.TypeReg, Mode: 0o644}, `entry "blobs/../../evil" leaves`},
		{tar.Header{Name: "link", Typeflag: tar.TypeSymlink, Linkname: "/etc"}, `entry "link": type '2' is not a file`},
	} {
		root := t.TempDir()
		archive := filepath.Join(root, "a.tar")
		f, err := os.Create(archive)
		if err != nil {
			t.Fatal(err)
		}
		tw := tar.NewWriter(f)
		if err := tw.WriteHeader(&tc.h); err != nil {
			t.Fatal(err)
		}
		if err := tw.Close(); err != nil {
			t.Fatal(err)
		}
		f.Close()
		dir := filepath.Join(root, "out", "in")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		err = untar(archive, dir)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("untar %q: %v, want an error containing %q", tc.h.Name, err, tc.want)
		}
		if _, err := os.Stat(filepath.Join(root, "out", "evil")); err == nil {
			t.Errorf("untar %q wrote outside its directory", tc.h.Name)
		}
	}
}
