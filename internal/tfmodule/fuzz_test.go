package tfmodule

import (
	"archive/tar"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

func FuzzExtract(f *testing.F) {
	for _, dir := range []string{"markers", "slow", "syntaxerror"} {
		archive, err := Pack(filepath.Join("..", "provisioner", "terraform", "testdata", dir))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(archive)
	}
	for _, entries := range [][]tarEntry{
		{{name: "main.tf", body: `variable "x" {}`}, {name: "sub/", typ: tar.TypeDir}, {name: "sub/run.sh", body: "#!/bin/sh", mode: 0o755}},
		{{name: "../evil", body: "x"}},
		{{name: "a/../../evil", body: "x"}},
		{{name: "/abs", body: "x"}},
		{{name: "link", typ: tar.TypeSymlink, linkname: "../outside"}},
		{{name: "link", typ: tar.TypeLink, linkname: "main.tf"}},
		{{name: "main.tf", body: "a"}, {name: "main.tf/x", body: "b"}},
		{{name: "d", typ: tar.TypeDir}, {name: "d", body: "x"}},
		{{name: ".", typ: tar.TypeDir}, {name: "./a", body: "x"}},
	} {
		f.Add(makeArchive(f, entries...))
	}
	f.Add([]byte{})
	f.Add([]byte("\x1f\x8b garbage"))
	f.Fuzz(func(t *testing.T, data []byte) {
		parent := t.TempDir()
		dest := filepath.Join(parent, "dest")
		err := Extract(data, dest)
		assertOnlyDest(t, parent)
		// Inspect walks the same archive with the same checks: it may refuse it, but must not panic,
		// and must refuse it whenever Extract did.
		if _, ierr := Inspect(data); err != nil && ierr == nil {
			t.Fatalf("Extract refused the archive (%v) but Inspect accepted it", err)
		}
	})
}

func FuzzInspect(f *testing.F) {
	for _, dir := range []string{"markers", "onlycount", "slow", "syntaxerror", "missingprovider"} {
		src, err := os.ReadFile(filepath.Join("..", "provisioner", "terraform", "testdata", dir, "main.tf"))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(src, false)
	}
	f.Add([]byte(`{"variable": {"a": {}, "b": {"default": 1}}}`), true)
	f.Add([]byte(`{"variable": [{"a": {}}, {"b": {}}]}`), true)
	f.Add([]byte(`{"variable": {"a": }`), true)
	f.Add([]byte("variable \"${x}\" {}\nvariable \"a\" {\n  default = <<EOT\nx\nEOT\n}\n"), false)
	f.Add([]byte("variable {\n"), false)
	f.Add([]byte("# hangar:mutable\nvariable \"n\" {\n  type = list(object({a = number}))\n  default = [{a = 1}]\n  sensitive = true\n  validation {\n    condition = length(var.n) > 0\n    error_message = \"x\"\n  }\n}\n"), false)
	f.Add([]byte(`{"variable": {"z": {"type": "map(string)", "default": {"a": "b"}, "validation": [{"condition": "${var.z != {}}", "error_message": "e"}]}}}`), true)
	for _, d := range deepFiles() { // nested 100,000 deep: refused before parsing
		f.Add([]byte(d.body), d.json)
	}
	f.Fuzz(func(t *testing.T, src []byte, isJSON bool) {
		name := "main.tf"
		if isJSON {
			name = "main.tf.json"
		}
		archive := makeArchive(t, tarEntry{name: name, body: string(src)})
		if len(src) == 0 {
			archive = makeArchive(t, tarEntry{name: name})
		}
		m, err := Inspect(archive)
		if err != nil {
			return
		}
		if len(src) > MaxConfigFileBytes {
			t.Fatalf("Inspect accepted a file of %d bytes, over MaxConfigFileBytes", len(src))
		}
		if !slices.IsSorted(m.Variables) || len(slices.Compact(slices.Clone(m.Variables))) != len(m.Variables) {
			t.Fatalf("Variables %q not sorted and unique", m.Variables)
		}
	})
}
