package gitcred

import (
	"crypto/ed25519"
	"crypto/rand"
	"strings"
	"testing"

	"golang.org/x/crypto/ssh"
)

func testKey(t testing.TB) ssh.PublicKey {
	pub, _, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	k, err := ssh.NewPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func line(host string, k ssh.PublicKey) string {
	return host + " " + strings.TrimSpace(string(ssh.MarshalAuthorizedKey(k)))
}

// HostKeyCheck accepts the key a line names for the host and port, and refuses an unknown host
// and another key, naming the host; the algorithms are the known keys' types.
func TestHostKeyCheck(t *testing.T) {
	forge, other := testKey(t), testKey(t)
	check, algs := HostKeyCheck("# forges\n\n" + line("github.com", forge) + "\n" + line("[git.example.com]:2222", forge) + "\n@revoked " + line("github.com", other) + "\n")
	for _, tc := range []struct {
		hostport string
		key      ssh.PublicKey
		want     string // "": accepted
	}{
		{"github.com:22", forge, ""},
		{"git.example.com:2222", forge, ""},
		{"git.example.com:22", forge, "the SSH host git.example.com is not among the forges' known hosts"},
		{"github.com:22", other, "the SSH host github.com offered the key ssh-ed25519 " + ssh.FingerprintSHA256(other) + ", which is not the forge's known one"},
		{"evil.example:22", forge, "not among the forges' known hosts"},
	} {
		err := check(tc.hostport, nil, tc.key)
		if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("check(%s) = %v, want %q", tc.hostport, err, tc.want)
		}
	}
	if got := algs("github.com:22"); len(got) != 1 || got[0] != ssh.KeyAlgoED25519 {
		t.Errorf("algorithms for github.com: %q", got)
	}
	if got := algs("nowhere:22"); len(got) != 0 {
		t.Errorf("algorithms for an unknown host: %q", got)
	}
}

// FuzzHostKeyCheck: whatever the server answers as known hosts, nothing panics, and a key that no
// line holds is never accepted.
func FuzzHostKeyCheck(f *testing.F) {
	k := testKey(f)
	f.Add(line("github.com", k)+"\n", "github.com:22")
	f.Add("[h]:2 ssh-ed25519 AAAA\n#x\n@cert-authority * ssh-rsa AAAA", "h:2")
	f.Add("|1|abc|def ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl", "x:22")
	stranger := testKey(f)
	f.Fuzz(func(t *testing.T, known, hostport string) {
		check, algs := HostKeyCheck(known)
		_ = algs(hostport)
		if err := check(hostport, nil, stranger); err == nil {
			t.Fatalf("a key in no line was accepted for %q with %q", hostport, known)
		}
	})
}
