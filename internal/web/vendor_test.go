package web

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"testing"
)

// TestVendoredXterm: the vendored xterm.js files are the pinned release's, byte for byte
// (static/vendor/xterm/VERSIONS.txt says where they come from), and their licences are beside them.
func TestVendoredXterm(t *testing.T) {
	versions, err := static.ReadFile("static/vendor/xterm/VERSIONS.txt")
	if err != nil {
		t.Fatal(err)
	}
	for name, sum := range map[string]string{
		"xterm.js":        "1f991ac3b4b283ebf96e60ae23a00a52765dd3a2e46fa6fdda9f1aab032f7495",
		"xterm.css":       "ba8e6985669488981ccf40c0cefe3aba80722cb6c92de7ad628b0bd717faf2b6",
		"addon-fit.js":    "bdaefa370b1bfc42ee88d46fe6072400902a4d4b2d45cd93438dda9b23c97089",
		"addon-canvas.js": "7b3e904d5bec98b54d26674994cf994396c4af0971010ffd0d4983229b65d933",
	} {
		b, err := static.ReadFile("static/vendor/xterm/" + name)
		if err != nil {
			t.Fatal(err)
		}
		got := sha256.Sum256(b)
		if hex.EncodeToString(got[:]) != sum {
			t.Errorf("%s: sha256 %x, want %s (the pinned release's)", name, got, sum)
		}
		if !strings.Contains(string(versions), sum) {
			t.Errorf("VERSIONS.txt does not record %s's sum %s", name, sum)
		}
	}
	for _, name := range []string{"LICENSE-xterm.txt", "LICENSE-addon-fit.txt", "LICENSE-addon-canvas.txt"} {
		b, err := static.ReadFile("static/vendor/xterm/" + name)
		if err != nil || !strings.Contains(string(b), "Permission is hereby granted") {
			t.Errorf("%s: the MIT licence is missing (%v)", name, err)
		}
	}
}
