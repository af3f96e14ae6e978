package redirect

import "testing"

func TestSafePath(t *testing.T) {
	for _, p := range []string{"/", "/a/b?c=d#e", "/proxy/authorize?host=a&path=%2F"} {
		if !SafePath(p) {
			t.Errorf("SafePath(%q) = false", p)
		}
	}
	for _, p := range []string{"", "a", "//evil.example.com", "/\\evil", "\\\\evil", "https://evil.example.com/", "http:/evil",
		"javascript:alert(1)", "/ok\r\nLocation: x", "/\t/evil", "/a\\b", "/\x7f", "/%2F%2Fevil"} {
		if SafePath(p) {
			t.Errorf("SafePath(%q) = true", p)
		}
	}
}

func FuzzSafePath(f *testing.F) {
	for _, s := range []string{"/", "//x", "/\\x", "/a?b", "https://x/"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, p string) {
		if !SafePath(p) {
			return
		}
		// What a browser would resolve it to, against a base, stays on that base's host.
		if p[0] != '/' || (len(p) > 1 && (p[1] == '/' || p[1] == '\\')) {
			t.Fatalf("SafePath(%q) but it may leave the origin", p)
		}
	})
}
