package server_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"maps"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/hangar-dev/hangar/internal/sdk"
	"github.com/hangar-dev/hangar/internal/servertest"
)

// TestTemplatePushRefusesLargeConfigFile: the probe's archive (a .tf file of 8 MiB of nested
// parentheses, a few KiB compressed) is refused with a 400 naming the archive, the file and the
// limit, and nothing is stored. On both stores.
func TestTemplatePushRefusesLargeConfigFile(t *testing.T) {
	for _, engine := range servertest.Engines {
		t.Run(engine, func(t *testing.T) {
			env := servertest.NewWith(t, engine)
			// Made by hand: Pack (hangar templates push) refuses such a file before any upload.
			archive := rawArchive(t, map[string]string{"main.tf": `variable "v" {}` + "\n", "big.tf": "x = " + strings.Repeat("(", 8<<20)})
			if len(archive) > 64<<10 {
				t.Fatalf("archive of %d bytes, want a small one", len(archive))
			}
			status, body := call(t, env, env.AdminToken, "POST", "/api/v1/templates/big/versions",
				sdk.CreateTemplateVersionRequest{Kind: "terraform", Archive: archive})
			wantField(t, "template push", status, body, "archive")
			for _, want := range []string{"big.tf is 8388612 bytes", "at most 262144 bytes (256 KiB)", "split it"} {
				if !strings.Contains(string(body), want) {
					t.Errorf("answer %s lacks %q", body, want)
				}
			}
			if status, _ := call(t, env, env.AdminToken, "GET", "/api/v1/templates/big", nil); status != http.StatusNotFound {
				t.Errorf("template after the refused push: %d, want 404", status)
			}
		})
	}
}

// rawArchive is a gzipped tar of files (name → content), without Pack's checks.
func rawArchive(t *testing.T, files map[string]string) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	for _, name := range slices.Sorted(maps.Keys(files)) {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: 0o644, Size: int64(len(files[name]))}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write([]byte(files[name])); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}
