// Package redirect says which redirect targets are safe: Hangar's browser endpoints (the server's
// sign-in, the proxy's callback) send browsers back only to paths on the same origin, never to a
// URL a link could choose (open redirects).
package redirect

import (
	"net/url"
	"strings"
)

// SafePath reports whether p is a path on the same origin to send a browser back to: it starts
// with one '/', holds no backslash, control character, scheme or host, so that no browser reads it
// as another host.
func SafePath(p string) bool {
	if p == "" || p[0] != '/' || len(p) > 4096 {
		return false
	}
	if len(p) > 1 && (p[1] == '/' || p[1] == '\\') {
		return false
	}
	for i := 0; i < len(p); i++ {
		if c := p[i]; c < 0x20 || c == 0x7f || c == '\\' {
			return false
		}
	}
	u, err := url.Parse(p)
	return err == nil && u.Scheme == "" && u.Host == "" && u.User == nil && strings.HasPrefix(u.Path, "/") && !strings.HasPrefix(u.Path, "//")
}
