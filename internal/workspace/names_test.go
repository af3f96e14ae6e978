package workspace

import (
	"strings"
	"testing"

	"github.com/google/uuid"
)

func TestHostLabelIsUnique(t *testing.T) {
	// The ambiguity "--" rules out: workspace a-b of c and workspace a of b-c.
	if HostLabel(3000, "a-b", "c") == HostLabel(3000, "a", "b-c") {
		t.Fatal("a-b of c and a of b-c share a host")
	}
	for _, tc := range []struct {
		label       string
		port        int
		name, owner string
	}{
		{"3000-a-b--c", 3000, "a-b", "c"},
		{"3000-a--b-c", 3000, "a", "b-c"},
		{"8080-dev--alice", 8080, "dev", "alice"},
		{"1-x--y", 1, "x", "y"},
		{"65535-" + strings.Repeat("n", 40) + "--" + strings.Repeat("o", 15), 65535, strings.Repeat("n", 40), strings.Repeat("o", 15)},
	} {
		port, name, owner, ok := ParseHostLabel(tc.label)
		if !ok || port != tc.port || name != tc.name || owner != tc.owner {
			t.Errorf("ParseHostLabel(%q) = %d %q %q %v", tc.label, port, name, owner, ok)
		}
		if got := HostLabel(port, name, owner); got != tc.label {
			t.Errorf("HostLabel(%d, %q, %q) = %q, want %q", port, name, owner, got, tc.label)
		}
	}
	for _, bad := range []string{"", "3000", "3000-dev", "3000-dev--", "3000---alice", "03000-dev--alice", "65536-dev--alice",
		"x-dev--alice", "3000-a--b--c", "3000-a---b", "3000-Dev--alice", "3000-dev--alice-", "3000-" + strings.Repeat("n", 41) + "--o",
		"3000-" + strings.Repeat("n", 30) + "--" + strings.Repeat("o", 30)} {
		if p, n, o, ok := ParseHostLabel(bad); ok {
			t.Errorf("ParseHostLabel(%q) = %d %q %q, want refused", bad, p, n, o)
		}
	}
	if p, n, o, ok := ParseHost("3000-Dev--Alice.WS.example.com.:443", "ws.example.com"); !ok || p != 3000 || n != "dev" || o != "alice" {
		t.Errorf("ParseHost with case, trailing dot and port = %d %q %q %v", p, n, o, ok)
	}
	if _, _, _, ok := ParseHost("3000-dev--alice.evil.ws.example.com", "ws.example.com"); ok {
		t.Error("ParseHost took a host two labels under the zone")
	}
	if _, _, _, ok := ParseHost("3000-dev--alice.example.com", "ws.example.com"); ok {
		t.Error("ParseHost took a host of another zone")
	}
}

func TestNameRules(t *testing.T) {
	if CheckName("a--b") == "" || CheckName(strings.Repeat("a", 41)) == "" || CheckName("dev") != "" {
		t.Error("CheckName")
	}
	if CheckUsername("a--b") == "" || CheckUsername(strings.Repeat("u", 33)) == "" || CheckUsername(strings.Repeat("u", 32)) != "" {
		t.Error("CheckUsername")
	}
	if msg := CheckNameForOwner(strings.Repeat("n", 24), strings.Repeat("u", 32)); !strings.Contains(msg, "55") {
		t.Errorf("a name and owner of 56 characters: %q", msg)
	}
	if msg := CheckNameForOwner(strings.Repeat("n", 23), strings.Repeat("u", 32)); msg != "" {
		t.Errorf("a name and owner of 55 characters: %q", msg)
	}
	if msg := CheckNameForOwner("dev", "b--c"); !strings.Contains(msg, "b--c") {
		t.Errorf("an owner from before the rules with --: %q", msg)
	}
}

func TestKubeName(t *testing.T) {
	seen := map[string]bool{}
	for i := 0; i < 1000; i++ {
		id := uuid.NewString()
		for _, name := range []string{"dev", "1x", "9" + strings.Repeat("d", 39), strings.Repeat("a", 29) + "-b" + strings.Repeat("c", 9)} {
			k := KubeName(name, id)
			if !IsDNSLabel(k, MaxKubeNameLength) || !IsDNSLabel(Namespace(k), 63) {
				t.Fatalf("KubeName(%q, %s) = %q: not a DNS label of at most %d", name, id, k, MaxKubeNameLength)
			}
			head := name
			if name[0] >= '0' && name[0] <= '9' {
				head = "w-" + name
			}
			if !strings.HasPrefix(k, head[:min(len(head), 20)]) {
				t.Fatalf("KubeName(%q, %s) = %q does not start with %q", name, id, k, head)
			}
			// The Service named by it must be an RFC 1035 label: a letter first.
			if k[0] < 'a' || k[0] > 'z' {
				t.Fatalf("KubeName(%q, %s) = %q does not start with a letter", name, id, k)
			}
			if seen[k] {
				t.Fatalf("KubeName %q twice", k)
			}
			seen[k] = true
			if KubeName(name, id) != k {
				t.Fatal("KubeName is not stable")
			}
		}
	}
}

func TestParseRef(t *testing.T) {
	for in, want := range map[string]Ref{"dev": {Name: "dev"}, "alice/dev": {Owner: "alice", Name: "dev"}} {
		if got, err := ParseRef("name", in); err != nil || got != want || got.String() != in {
			t.Errorf("ParseRef(%q) = %+v, %v", in, got, err)
		}
	}
	for _, bad := range []string{"", "/", "a/", "/b", "a/b/c", "A/b", "a/B", "a b", "-a", "a/-b"} {
		if _, err := ParseRef("name", bad); err == nil || !strings.HasPrefix(err.Error(), "name: ") && !strings.Contains(err.Error(), "name:") {
			t.Errorf("ParseRef(%q) = %v, want an error naming the field", bad, err)
		}
	}
}

// FuzzParseHost: whatever a host is, ParseHost either refuses it or reads a port, name and owner
// that make exactly that host again, so one host names at most one workspace.
func FuzzParseHost(f *testing.F) {
	for _, s := range []string{"3000-dev--alice.ws.example.com", "3000-a-b--c.ws.example.com", "3000-a--b-c.ws.example.com",
		"1-x--y.ws.example.com:8443", "3000---.ws.example.com", "3000-dev--alice", "", "0-a--b.ws.example.com"} {
		f.Add(s)
	}
	const zone = "ws.example.com"
	f.Fuzz(func(t *testing.T, host string) {
		port, name, owner, ok := ParseHost(host, zone)
		if !ok {
			return
		}
		if port < 1 || port > 65535 || CheckName(name) != "" || strings.Contains(owner, HostSeparator) || !IsDNSLabel(owner, 63) {
			t.Fatalf("ParseHost(%q) = %d %q %q: not what HostLabel takes", host, port, name, owner)
		}
		h := strings.ToLower(host)
		if i := strings.IndexByte(h, ':'); i >= 0 {
			h = h[:i]
		}
		h = strings.TrimSuffix(h, ".")
		if again := HostLabel(port, name, owner) + "." + zone; again != h {
			t.Fatalf("ParseHost(%q) = %d %q %q, which make %q", host, port, name, owner, again)
		}
	})
}

// FuzzParseRef: ParseRef refuses with an error naming the field, or reads a reference that prints
// back as its input.
func FuzzParseRef(f *testing.F) {
	for _, s := range []string{"dev", "alice/dev", "a/b/c", "/", "", "Alice/dev"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		ref, err := ParseRef("name", s)
		if err != nil {
			if !strings.Contains(err.Error(), "name: ") {
				t.Fatalf("ParseRef(%q): %v does not name the field", s, err)
			}
			return
		}
		if ref.String() != s || !IsDNSLabel(ref.Name, 63) || (ref.Owner != "" && !IsDNSLabel(ref.Owner, 63)) {
			t.Fatalf("ParseRef(%q) = %+v", s, ref)
		}
	})
}

// FuzzNormalizeHost: a host NormalizeHost accepts is made of DNS characters and an optional port
// only, so a redirect to it names that host and nothing else.
func FuzzNormalizeHost(f *testing.F) {
	for _, s := range []string{"3000-dev--alice.ws.example.com", "A.B:8443", "a.b.:443", "a/b", "a@b", "a:0", "a:65536", ":1", "a:", "a:+80", "..", ".a", "a..b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, host string) {
		name, withPort, ok := NormalizeHost(host)
		if !ok {
			return
		}
		if name == "" || !strings.HasPrefix(withPort, name) || strings.ContainsAny(withPort, "/@?#\\ ") || strings.ToLower(withPort) != withPort {
			t.Fatalf("NormalizeHost(%q) = %q, %q", host, name, withPort)
		}
		if n2, w2, ok := NormalizeHost(withPort); !ok || n2 != name || w2 != withPort {
			t.Fatalf("NormalizeHost is not stable on %q: %q %q %v", withPort, n2, w2, ok)
		}
	})
}

func TestNormalizeHost(t *testing.T) {
	for in, want := range map[string]string{
		"3000-Dev--Alice.WS.example.com": "3000-dev--alice.ws.example.com",
		"a.b.:443":                       "a.b:443",
		"a.b:8443":                       "a.b:8443",
	} {
		if _, got, ok := NormalizeHost(in); !ok || got != want {
			t.Errorf("NormalizeHost(%q) = %q, %v; want %q", in, got, ok, want)
		}
	}
	for _, in := range []string{"", ".", "..", ".a", "a..b", "a:+80", "a:-1", "a:0", "a:080", "a:65536", "a:", "a/b", "a@b", "a b"} {
		if _, got, ok := NormalizeHost(in); ok {
			t.Errorf("NormalizeHost(%q) = %q, accepted", in, got)
		}
	}
}
