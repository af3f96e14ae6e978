package workspace

import (
	"strings"
	"testing"
)

func TestKubeHelperToken(t *testing.T) {
	key := []byte("0123456789abcdef0123456789abcdef")
	id := "5b0c3f0e-4d8a-4c1e-9a51-2f7f1c6b9e10"
	tok := KubeHelperToken(key, id)
	if !strings.HasPrefix(tok, "hwa_k1_"+id+".") {
		t.Fatalf("token %q", tok)
	}
	if got, ok := VerifyKubeHelperToken(key, tok); !ok || got != id {
		t.Fatalf("VerifyKubeHelperToken(own token) = %q, %v", got, ok)
	}
	other := KubeHelperToken(key, "6b0c3f0e-4d8a-4c1e-9a51-2f7f1c6b9e10")
	for name, bad := range map[string]string{
		"another key":                 KubeHelperToken([]byte("another key, another server....."), id),
		"another workspace's MAC":     "hwa_k1_" + id + other[strings.LastIndexByte(other, '.'):],
		"no MAC":                      "hwa_k1_" + id,
		"a Terraform helper's token":  "hwa_" + strings.Repeat("a", 43),
		"the MAC cut":                 tok[:len(tok)-2],
		"padding added":               tok + "=",
		"empty":                       "",
		"over 128 bytes after prefix": "hwa_k1_" + strings.Repeat("a", 200) + ".x",
	} {
		if got, ok := VerifyKubeHelperToken(key, bad); ok {
			t.Errorf("%s: %q verified as workspace %q", name, bad, got)
		}
	}
	if _, ok := VerifyKubeHelperToken(nil, tok); ok {
		t.Error("a token verified without a key")
	}
}

// FuzzVerifyKubeHelperToken: whatever a client sends, only a token made under the key verifies, and
// it names the workspace it was made for.
func FuzzVerifyKubeHelperToken(f *testing.F) {
	key := []byte("0123456789abcdef0123456789abcdef")
	f.Add(KubeHelperToken(key, "w1"))
	f.Add("hwa_k1_w1.")
	f.Add("hwa_k1_.AAAA")
	f.Fuzz(func(t *testing.T, tok string) {
		id, ok := VerifyKubeHelperToken(key, tok)
		if ok && KubeHelperToken(key, id) != tok {
			t.Fatalf("%q verified as %q, whose token is %q", tok, id, KubeHelperToken(key, id))
		}
	})
}
