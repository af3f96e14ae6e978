//go:build linux

package imagebuild

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hangar-dev/hangar/internal/imagebuild/buildtest"
)

// A hostile feature archive writes nothing outside its folder and nothing but files and
// directories, whatever it holds.
func FuzzExtractFeature(f *testing.F) {
	tarOf := func(hs ...*tar.Header) []byte {
		var b bytes.Buffer
		tw := tar.NewWriter(&b)
		for _, h := range hs {
			tw.WriteHeader(h)
			if h.Typeflag == tar.TypeReg {
				tw.Write(bytes.Repeat([]byte("x"), int(h.Size)))
			}
		}
		tw.Close()
		return b.Bytes()
	}
	good := tarOf(&tar.Header{Name: "./", Typeflag: tar.TypeDir, Mode: 0o755}, &tar.Header{Name: "./install.sh", Typeflag: tar.TypeReg, Mode: 0o755, Size: 3})
	f.Add(good)
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write(good)
	zw.Close()
	f.Add(gz.Bytes())
	f.Add(tarOf(&tar.Header{Name: "../evil", Typeflag: tar.TypeReg, Size: 1}))
	f.Add(tarOf(&tar.Header{Name: "/etc/evil", Typeflag: tar.TypeReg, Size: 1}))
	f.Add(tarOf(&tar.Header{Name: "link", Typeflag: tar.TypeSymlink, Linkname: "/etc"}, &tar.Header{Name: "link/passwd", Typeflag: tar.TypeReg, Size: 1}))
	f.Add(tarOf(&tar.Header{Name: "dev", Typeflag: tar.TypeChar, Devmajor: 1, Devminor: 3}))
	f.Add(tarOf(&tar.Header{Name: "a/../../b", Typeflag: tar.TypeReg, Size: 1}))
	limit := maxFeatureArchive
	maxFeatureArchive = 1 << 20
	f.Cleanup(func() { maxFeatureArchive = limit })
	base := f.TempDir()
	f.Fuzz(func(t *testing.T, data []byte) {
		parent, err := os.MkdirTemp(base, "")
		must(t, err)
		defer os.RemoveAll(parent)
		dir := filepath.Join(parent, "feature")
		must(t, os.Mkdir(dir, 0o755))
		r, err := os.OpenRoot(dir)
		must(t, err)
		defer r.Close()
		_ = extractFeature(bytes.NewReader(data), r)
		entries, err := os.ReadDir(parent)
		must(t, err)
		if len(entries) != 1 {
			t.Fatalf("the archive wrote beside its folder: %v", entries)
		}
		var total int64
		filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
			must(t, err)
			fi, err := d.Info()
			must(t, err)
			if !fi.IsDir() && !fi.Mode().IsRegular() {
				t.Errorf("%s is a %v", p, fi.Mode().Type())
			}
			if fi.Mode().IsRegular() {
				total += fi.Size()
			}
			return nil
		})
		if total > maxFeatureArchive {
			t.Errorf("%d bytes extracted", total)
		}
	})
}

func FuzzParseFeatureMetadata(f *testing.F) {
	for _, d := range []string{"hello", "color", "docker-in-docker"} {
		f.Add([]byte(buildtest.Feature(f, d)["devcontainer-feature.json"]))
	}
	f.Add([]byte(`{"id":"x","options":{"9-a":{"type":"boolean","default":true,"enum":[1,null]}},"dependsOn":{"r":{"a":1}},"postCreateCommand":{"a":"b"}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := parseFeatureMetadata(data)
		if err != nil {
			return
		}
		if !featureIDPattern.MatchString(m.ID) {
			t.Fatalf("id %q accepted", m.ID)
		}
		m.refusal()
		m.hooks()
		m.notHonoured()
		if _, err := m.label("ref"); err != nil {
			t.Fatalf("label: %v", err)
		}
		env, err := m.optionEnv(nil)
		if err != nil {
			t.Fatalf("the defaults of an accepted feature: %v", err)
		}
		for _, kv := range env {
			if k, _, _ := strings.Cut(kv, "="); k == "" || strings.ContainsAny(k, "-. ") {
				t.Fatalf("option variable %q", kv)
			}
		}
	})
}

func FuzzParseMountinfo(f *testing.F) {
	f.Add([]byte("22 1 0:21 / / rw shared:1 - overlay overlay rw\n23 22 0:22 / /proc rw - proc proc rw\n"))
	f.Add([]byte(`24 22 8:1 /vol /my\040vol rw - ext4 /dev/sda1 rw` + "\n"))
	f.Add([]byte(`24 22 8:1 /vol /bad\04 rw - ext4 /dev/sda1 rw`))
	f.Fuzz(func(t *testing.T, data []byte) {
		points, err := parseMountinfo(bytes.NewReader(data))
		if err != nil {
			return
		}
		for _, p := range points {
			if !strings.HasPrefix(p, "/") {
				t.Fatalf("mount point %q is not absolute", p)
			}
		}
	})
}

func FuzzParseAccounts(f *testing.F) {
	f.Add([]byte("root:x:0:0:root:/root:/bin/sh\n+nis\n#c\ndev:x:1000:1000::/home/dev:/bin/sh\n"), false)
	f.Add([]byte("staff:x:50:a,b\n"), true)
	f.Fuzz(func(t *testing.T, data []byte, group bool) {
		as, err := parseAccounts(bytes.NewReader(data), group)
		if err != nil {
			return
		}
		for _, a := range as {
			if a.Name == "" || a.UID < 0 || a.GID < 0 {
				t.Fatalf("account %+v", a)
			}
		}
	})
}

func FuzzDecodeSpec(f *testing.F) {
	f.Add([]byte(`{"base":"debian:12","steps":[{"op":"run","args":["/bin/sh","-c","true"],"line":3}],"features":[{"ref":"ghcr.io/x/y:1","options":{"a":true}}]}`))
	f.Add([]byte(`{"base":"b","steps":[{"op":"copy","files":[{"path":"/a","mode":420,"data":"eA=="}]}]}`))
	f.Add([]byte(`{"base":"b","unknown":1}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := decodeSpec(bytes.NewReader(data))
		if err != nil {
			return
		}
		if s.Base == "" {
			t.Fatal("a spec without a base accepted")
		}
		for _, st := range s.Steps {
			st.describe()
		}
		s.Hash()
	})
}

// FuzzDecodeWorkConfig: the config.json push reads from the work directory, which the user's code
// may have written: only the four fields, bounded, and an accepted Env is NAME=value entries.
func FuzzDecodeWorkConfig(f *testing.F) {
	f.Add([]byte(`{"env":["PATH=/bin","A=1"],"user":"dev","working_dir":"/w","labels":{"l":"v"}}`))
	f.Add([]byte(`{"env":["=x"]}`))
	f.Add([]byte(`{"entrypoint":["/evil"]}`))
	f.Add([]byte(`{"labels":{"a":"b"}}{"user":"root"}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var c imageConfig
		if err := decodeWorkJSON(workConfig, bytes.NewReader(data), &c); err != nil {
			return
		}
		if len(data) > maxWorkConfig {
			t.Fatalf("%d bytes accepted, over the bound", len(data))
		}
		if err := c.check(); err != nil {
			return
		}
		for _, kv := range c.Env {
			if k, _, ok := strings.Cut(kv, "="); !ok || k == "" || strings.ContainsRune(kv, 0) {
				t.Fatalf("env entry %q accepted", kv)
			}
		}
	})
}
