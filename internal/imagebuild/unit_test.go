//go:build linux

package imagebuild

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/hangar-dev/hangar/internal/imagebuild/buildtest"
)

func TestOptionEnv(t *testing.T) {
	color, err := parseFeatureMetadata([]byte(buildtest.Feature(t, "color")["devcontainer-feature.json"]))
	must(t, err)
	env, err := color.optionEnv(nil)
	if err != nil || !reflect.DeepEqual(env, []string{"FAVORITE=red"}) {
		t.Errorf("defaults: %q %v, want FAVORITE=red", env, err)
	}
	env, err = color.optionEnv(map[string]any{"favorite": "gold", "extra-opt.1": true})
	if err != nil || !reflect.DeepEqual(env, []string{"EXTRA_OPT_1=true", "FAVORITE=gold"}) {
		t.Errorf("given: %q %v", env, err)
	}
	if _, err := color.optionEnv(map[string]any{"favorite": "blue"}); err == nil || err.Error() != `option favorite: "blue" is not one of red, gold, green` {
		t.Errorf("a value out of the enum: %v", err)
	}
	m, err := parseFeatureMetadata([]byte(`{"id":"x","options":{"install":{"type":"boolean","default":true}}}`))
	must(t, err)
	if _, err := m.optionEnv(map[string]any{"install": "yes"}); err == nil || !strings.Contains(err.Error(), "option install") {
		t.Errorf("a boolean option given %q: %v", "yes", err)
	}
	for id, want := range map[string]string{"greeting": "GREETING", "my-opt.x": "MY_OPT_X", "1abc": "_ABC", "__x": "_X", "9_9x": "_X", "camelCase": "CAMELCASE"} {
		if got := optionEnvName(id); got != want {
			t.Errorf("optionEnvName(%q) = %q, want %q", id, got, want)
		}
	}
}

func TestFeatureMetadataErrorsNameTheField(t *testing.T) {
	for in, want := range map[string]string{
		`{"version":"1"}`: `devcontainer-feature.json: id "": want letters, digits, '.', '_' or '-'`,
		`{"id":"x","options":{"a":{"type":"number"}}}`:                `devcontainer-feature.json: options.a.type: "number", want "string" or "boolean"`,
		`{"id":"x","options":{"a":{"type":"boolean","default":"1"}}}`: `devcontainer-feature.json: options.a.default: want a boolean`,
		`{"id":"x","containerEnv":{"A=B":"c"}}`:                       `devcontainer-feature.json: containerEnv: "A=B" is not a variable name`,
	} {
		if _, err := parseFeatureMetadata([]byte(in)); err == nil || err.Error() != want {
			t.Errorf("%s: %v, want %s", in, err, want)
		}
	}
}

func TestRefusal(t *testing.T) {
	for in, want := range map[string]string{
		`{"id":"x"}`: "",
		`{"id":"x","init":true,"entrypoint":"/e.sh"}`:     "",
		`{"id":"x","capAdd":["SYS_PTRACE"]}`:              "needs privileges (capAdd: SYS_PTRACE), which Hangar's image build and workspaces never have",
		`{"id":"x","securityOpt":["seccomp=unconfined"]}`: "needs privileges (securityOpt: seccomp=unconfined), which Hangar's image build and workspaces never have",
	} {
		m, err := parseFeatureMetadata([]byte(in))
		must(t, err)
		if got := m.refusal(); got != want {
			t.Errorf("%s: %q, want %q", in, got, want)
		}
	}
}

func TestInstallOrder(t *testing.T) {
	node := func(i int, repo string, after []string, deps ...string) *featureNode {
		return &featureNode{Ref: repo + ":1", Repo: repo, Meta: &featureMetadata{InstallsAfter: after}, index: i, key: repo, deps: deps}
	}
	for _, tc := range []struct {
		name  string
		nodes []*featureNode
		order []string
		want  string
	}{
		{"the user's order", []*featureNode{node(0, "x", nil), node(1, "y", nil)}, nil, "x y"},
		{"installsAfter", []*featureNode{node(0, "x", []string{"y"}), node(1, "y", nil)}, nil, "y x"},
		{"installsAfter a feature not installed", []*featureNode{node(0, "x", []string{"common-utils"}), node(1, "y", nil)}, nil, "x y"},
		{"dependsOn", []*featureNode{node(0, "x", nil, "z"), node(1, "y", nil), node(2, "z", nil)}, nil, "y z x"},
		{"override", []*featureNode{node(0, "x", nil), node(1, "y", nil), node(2, "z", nil)}, []string{"z", "y"}, "z y x"},
		{"override cannot break dependsOn", []*featureNode{node(0, "x", nil, "y"), node(1, "y", nil)}, []string{"x"}, "y x"},
	} {
		nodes := map[string]*featureNode{}
		for _, n := range tc.nodes {
			nodes[n.key] = n
		}
		got, err := installOrder(nodes, tc.order, func(s string) string { return strings.TrimSuffix(s, ":1") })
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		var names []string
		for _, n := range got {
			names = append(names, n.Repo)
		}
		if strings.Join(names, " ") != tc.want {
			t.Errorf("%s: %v, want %s", tc.name, names, tc.want)
		}
	}
	_, err := installOrder(map[string]*featureNode{"x": node(0, "x", nil)}, []string{"w"}, func(s string) string { return s })
	if err == nil || err.Error() != "overrideFeatureInstallOrder names w, which is not one of the features" {
		t.Errorf("an override naming no feature: %v", err)
	}
	if featureKey("r", nil) != featureKey("r", map[string]any{}) || featureKey("r", nil) == featureKey("r", map[string]any{"a": "b"}) {
		t.Error("feature equality: no options and {} must be one feature, other options another")
	}
}

// The snapshot skips the mount points under the root (escaped names too) and records symlinks
// without following them out of the root; a deleted directory is one whiteout.
func TestSnapshotSkipsMountsAndNeverLeavesTheRoot(t *testing.T) {
	root := t.TempDir()
	for _, d := range []string{"proc/1", "my vol", "keep/sub"} {
		must(t, os.MkdirAll(filepath.Join(root, d), 0o755))
	}
	must(t, os.WriteFile(filepath.Join(root, "proc/1/status"), []byte("x"), 0o644))
	must(t, os.WriteFile(filepath.Join(root, "my vol/data"), []byte("x"), 0o644))
	must(t, os.WriteFile(filepath.Join(root, "keep/sub/f"), []byte("x"), 0o644))
	must(t, os.Symlink("/etc", filepath.Join(root, "escape")))
	mountinfo := "22 1 0:21 / / rw shared:1 - overlay overlay rw\n" +
		"23 22 0:22 / " + root + "/proc rw - proc proc rw\n" +
		"24 22 8:1 /vol " + strings.ReplaceAll(root, " ", `\040`) + `/my\040vol rw - ext4 /dev/sda1 rw` + "\n" +
		"25 22 0:23 / /elsewhere rw - tmpfs tmpfs rw\n"
	s, err := newSnapshotter(root, strings.NewReader(mountinfo))
	must(t, err)
	before, err := s.take()
	must(t, err)
	var keys []string
	for k := range before {
		keys = append(keys, k)
	}
	for _, k := range keys {
		if strings.HasPrefix(k, "/proc") || strings.HasPrefix(k, "/my vol") || strings.HasPrefix(k, "/escape/") {
			t.Errorf("the snapshot has %s", k)
		}
	}
	if e, ok := before["/escape"]; !ok || e.mode&fs.ModeSymlink == 0 || e.target != "/etc" {
		t.Errorf("/escape: %+v, want the symlink recorded", e)
	}
	must(t, os.RemoveAll(filepath.Join(root, "keep")))
	after, err := s.take()
	must(t, err)
	var buf bytes.Buffer
	st, err := s.writeDiff(&buf, before, after)
	must(t, err)
	if st != (diffStats{Deleted: 1}) || !bytes.Contains(buf.Bytes(), []byte(".wh.keep")) || bytes.Contains(buf.Bytes(), []byte(".wh.sub")) {
		t.Errorf("deleting /keep: %+v, want one whiteout", st)
	}
}

// --insecure-registry makes exactly the registries it names plain HTTP.
func TestInsecureRegistries(t *testing.T) {
	x := &Executor{Insecure: []string{"registry.example:5000"}}
	for ref, want := range map[string]string{
		"registry.example:5000/hangar/builds:abc": "http",
		"registry.example/hangar/builds:abc":      "https",
		"ghcr.io/devcontainers/features/node:1":   "https",
	} {
		r, err := x.parseRef(ref)
		must(t, err)
		if got := r.Context().Registry.Scheme(); got != want {
			t.Errorf("%s: %s, want %s", ref, got, want)
		}
	}
}

// A file's capabilities (setcap) travel in the layer as the PAX record containerd applies.
func TestLayerKeepsFileCapabilities(t *testing.T) {
	root := t.TempDir()
	s := &snapshotter{root: root, skip: map[string]bool{}}
	before, err := s.take()
	must(t, err)
	p := filepath.Join(root, "ping")
	must(t, os.WriteFile(p, []byte("#!/bin/sh\n"), 0o755))
	// cap_net_raw+ep as setcap writes it (VFS_CAP_REVISION_2: magic, permitted, inheritable).
	capData := []byte{0x01, 0x00, 0x00, 0x02, 0x00, 0x20, 0x00, 0x00, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}
	if err := unix.Setxattr(p, capabilityXattr, capData, 0); err != nil {
		t.Fatalf("set %s (this test runs as root): %v", capabilityXattr, err)
	}
	after, err := s.take()
	must(t, err)
	var buf bytes.Buffer
	_, err = s.writeDiff(&buf, before, after)
	must(t, err)
	tr := tar.NewReader(&buf)
	h, err := tr.Next()
	must(t, err)
	if h.Name != "ping" || h.PAXRecords["SCHILY.xattr."+capabilityXattr] != string(capData) {
		t.Errorf("%s: PAX records %q, want the file's capabilities", h.Name, h.PAXRecords)
	}
}

// A spec's errors name the field.
func TestDecodeSpecNamesTheField(t *testing.T) {
	for in, want := range map[string]string{
		`{}`:                                  "spec: base: an image is required",
		`{"base":"b","steps":[{"op":"run"}]}`: "spec: steps[0].args: a command is required",
		`{"base":"b","steps":[{"op":"copy","files":[{"path":"rel"}]}]}`: `spec: steps[0].files[0].path: "rel" is not absolute`,
		`{"base":"b","steps":[{"op":"shell"}]}`:                         `spec: steps[0].op: unknown operation "shell"`,
		`{"base":"b","features":[{"ref":"./local-feature"}]}`:           "spec: features[0].ref: ./local-feature is a local feature (a folder next to devcontainer.json), which the build does not take yet: publish it to an OCI registry",
		`{"base":"b","features":[{"ref":"https://example.com/f.tgz"}]}`: "spec: features[0].ref: https://example.com/f.tgz is a tarball URL, which the build does not fetch: publish the feature to an OCI registry",
		`{"base":"b","unknown":1}`:                                      `--spec: json: unknown field "unknown"`,
	} {
		if _, err := decodeSpec(strings.NewReader(in)); err == nil || err.Error() != want {
			t.Errorf("%s: %v\nwant %s", in, err, want)
		}
	}
}

// A hostile feature archive is refused with what is wrong, and writes nothing out of its folder.
func TestExtractFeatureRefusesHostileArchives(t *testing.T) {
	tarOf := func(hs ...*tar.Header) []byte {
		var b bytes.Buffer
		tw := tar.NewWriter(&b)
		for _, h := range hs {
			must(t, tw.WriteHeader(h))
			if h.Typeflag == tar.TypeReg {
				_, err := tw.Write(bytes.Repeat([]byte("x"), int(h.Size)))
				must(t, err)
			}
		}
		must(t, tw.Close())
		return b.Bytes()
	}
	limit := maxFeatureArchive
	maxFeatureArchive = 8 << 20 // the same checks at 8 MiB, without writing 64
	defer func() { maxFeatureArchive = limit }()
	many := make([]*tar.Header, maxFeatureEntries+1)
	for i := range many {
		many[i] = &tar.Header{Name: fmt.Sprintf("d%d/", i), Typeflag: tar.TypeDir, Mode: 0o755}
	}
	for name, tc := range map[string]struct {
		archive []byte
		want    string
	}{
		"dot-dot":  {tarOf(&tar.Header{Name: "../evil", Typeflag: tar.TypeReg, Size: 1}), `feature archive: entry "../evil" leaves the feature's folder`},
		"absolute": {tarOf(&tar.Header{Name: "/etc/evil", Typeflag: tar.TypeReg, Size: 1}), `feature archive: entry "/etc/evil": not a relative path`},
		"symlink":  {tarOf(&tar.Header{Name: "link", Typeflag: tar.TypeSymlink, Linkname: "/etc"}), `feature archive: link: only files and directories are allowed (type "2")`},
		"device":   {tarOf(&tar.Header{Name: "null", Typeflag: tar.TypeChar, Devmajor: 1, Devminor: 3}), `feature archive: null: only files and directories are allowed (type "3")`},
		"entries":  {tarOf(many...), fmt.Sprintf("feature archive: more than %d entries", maxFeatureEntries)},
		"size":     {tarOf(&tar.Header{Name: "big", Typeflag: tar.TypeReg, Size: maxFeatureArchive + 1}), fmt.Sprintf("feature archive: more than %d bytes", maxFeatureArchive)},
		"files":    {tarOf(&tar.Header{Name: "a", Typeflag: tar.TypeReg, Size: maxFeatureArchive / 2}, &tar.Header{Name: "b", Typeflag: tar.TypeReg, Size: maxFeatureArchive/2 + 1}), fmt.Sprintf("feature archive: more than %d bytes", maxFeatureArchive)},
	} {
		parent := t.TempDir()
		dir := filepath.Join(parent, "feature")
		must(t, os.Mkdir(dir, 0o755))
		r, err := os.OpenRoot(dir)
		must(t, err)
		err = extractFeature(bytes.NewReader(tc.archive), r)
		r.Close()
		if err == nil || err.Error() != tc.want {
			t.Errorf("%s: %v, want %s", name, err, tc.want)
		}
		if entries, _ := os.ReadDir(parent); len(entries) != 1 {
			t.Errorf("%s: written beside the folder: %v", name, entries)
		}
	}
}

// The work directory's JSON files are written never through a link the build's user code left
// there (prepare runs again over the same emptyDir when the pod's sandbox is recreated): the
// write is refused and the link's target is left as it was.
func TestWriteWorkJSONRefusesALink(t *testing.T) {
	dir, outside := t.TempDir(), filepath.Join(t.TempDir(), "target")
	if err := os.WriteFile(outside, []byte("kept"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(dir, workBase)); err != nil {
		t.Fatal(err)
	}
	err := writeWorkJSON(dir, workBase, imageConfig{User: "root"})
	if err == nil || !strings.Contains(err.Error(), workBase) {
		t.Fatalf("writing through a link: %v", err)
	}
	if b, _ := os.ReadFile(outside); string(b) != "kept" {
		t.Fatalf("the link's target was written: %q", b)
	}
	if err := writeWorkJSON(dir, workPlan, []plannedFeature{}); err != nil {
		t.Fatalf("a plain file: %v", err)
	}
}
