package main_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestStatePushOverTheStorageLimit: with the real binary, `hangar state push --no-build` of a
// state that would bring its user over `hangar server --max-storage-per-user` is refused with the
// create's message, naming what is kept, what the state adds and the limit; the saved state is
// unchanged.
func TestStatePushOverTheStorageLimit(t *testing.T) {
	markerDir := filepath.Join(sharedDir(t), "markers")
	h := startLoggedIn(t, "MARKER_DIR="+markerDir, "HANGAR_MAX_STORAGE_PER_USER=64Ki")
	h.must("templates", "push", "markers", "--directory", "testdata/markers")
	h.must("create", "tf1", "--template", "markers", "--wait", "--timeout", "2m")
	before := h.must("state", "pull", "tf1")

	big := filepath.Join(h.dir, "big.tfstate")
	state := fmt.Sprintf(`{"version":4,"terraform_version":"1.11.0","serial":99,"lineage":"big","outputs":{"pad":{"value":%q,"type":"string"}},"resources":[]}`,
		strings.Repeat("p", 100_000))
	if err := os.WriteFile(big, []byte(state), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := h.hangar("state", "push", "tf1", big, "--no-build", "--force")
	if err == nil {
		t.Fatalf("a state push over the storage limit succeeded:\n%s", out)
	}
	t.Logf("hangar state push answered:\n%s", out)
	if strings.Count(out, "storage limit reached") != 1 {
		t.Errorf("state push over the limit says 'storage limit reached' more than once:\n%s", out)
	}
	for _, want := range []string{"storage limit reached", "this state adds ", "over the limit of 64.0 KiB per user", "--max-storage-per-user"} {
		if !strings.Contains(out, want) {
			t.Errorf("state push over the limit does not say %q:\n%s", want, out)
		}
	}
	if after := h.must("state", "pull", "tf1"); after != before {
		t.Errorf("the refused push changed the saved state:\n%s", after)
	}
}
