package server

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/hangar-dev/hangar/internal/workspace"
)

// FuzzParseClientAddress: a check's client_address is an IP address (unmapped, no zone) or a
// validation error naming the field, never a panic, and never an address the text does not say.
func FuzzParseClientAddress(f *testing.F) {
	for _, s := range []string{"", "203.0.113.7", "2001:db8::7", "::ffff:192.0.2.5", "fe80::1%eth0", "203.0.113.7:80", "10.0.0.0/8", "example.com", strings.Repeat("1", 100)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v := &workspace.ValidationError{}
		a := parseClientAddress(v, s)
		if err := v.Err(); err != nil {
			if a.IsValid() || !strings.Contains(err.Error(), "client_address") {
				t.Fatalf("%q: %v and %s", s, err, a)
			}
			return
		}
		if s == "" {
			if a.IsValid() {
				t.Fatalf("nothing gave %s", a)
			}
			return
		}
		want, err := netip.ParseAddr(s)
		if err != nil || !a.IsValid() || a.Zone() != "" || a.Is4In6() || a != want.Unmap().WithZone("") {
			t.Fatalf("%q gave %s", s, a)
		}
	})
}
