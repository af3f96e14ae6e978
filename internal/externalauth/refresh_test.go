package externalauth

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"
)

func TestDecide(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	at := func(d time.Duration) *time.Time { v := now.Add(d); return &v }
	const m = 5 * time.Minute
	for _, tc := range []struct {
		name   string
		s      TokenState
		want   Decision
		reason string
	}{
		{"never expires", TokenState{}, Use, ""},
		{"well before expiry", TokenState{ExpiresAt: at(time.Hour), CanRefresh: true}, Use, ""},
		{"just outside the margin", TokenState{ExpiresAt: at(m + time.Second), CanRefresh: true}, Use, ""},
		{"within the margin", TokenState{ExpiresAt: at(m), CanRefresh: true}, Refresh, ""},
		{"expired, refreshable", TokenState{ExpiresAt: at(-time.Hour), CanRefresh: true}, Refresh, ""},
		{"within the margin, no refresh token: used while it lives", TokenState{ExpiresAt: at(time.Minute)}, Use, ""},
		{"expired, no refresh token", TokenState{ExpiresAt: at(-time.Second)}, Relink, "expired at 2026-01-01T11:59:59Z and the forge gave no refresh token"},
		{"refused before", TokenState{ExpiresAt: at(time.Hour), CanRefresh: true, RelinkReason: "invalid_grant"}, Relink, "invalid_grant"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, reason := Decide(tc.s, now, m)
			if d != tc.want || !strings.Contains(reason, tc.reason) || (tc.reason == "") != (reason == "") {
				t.Fatalf("Decide = %v %q, want %v %q", d, reason, tc.want, tc.reason)
			}
		})
	}
}

const testKey = "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=" // base64 of 32 bytes

func TestSealRoundTripAndTamper(t *testing.T) {
	k, err := ParseKeys([]byte("# current first\n" + testKey + "\n"))
	if err != nil {
		t.Fatal(err)
	}
	aad := tokenAAD("u1", "gh", "access")
	id, sealed := k.Seal([]byte("gho_secret"), aad)
	if id != k.KeyID() || bytes.Contains(sealed, []byte("gho_secret")) {
		t.Fatalf("Seal: id %q, sealed %q", id, sealed)
	}
	if _, again := k.Seal([]byte("gho_secret"), aad); bytes.Equal(again, sealed) {
		t.Fatal("two seals of one token are equal: the nonce is not random")
	}
	if plain, err := k.Open(id, sealed, aad); err != nil || string(plain) != "gho_secret" {
		t.Fatalf("Open = %q, %v", plain, err)
	}
	for name, open := range map[string]func() ([]byte, error){
		"a flipped bit":  func() ([]byte, error) { b := bytes.Clone(sealed); b[len(b)-1] ^= 1; return k.Open(id, b, aad) },
		"another row":    func() ([]byte, error) { return k.Open(id, sealed, tokenAAD("u2", "gh", "access")) },
		"another field":  func() ([]byte, error) { return k.Open(id, sealed, tokenAAD("u1", "gh", "refresh")) },
		"an unknown key": func() ([]byte, error) { return k.Open("other", sealed, aad) },
		"truncated":      func() ([]byte, error) { return k.Open(id, sealed[:10], aad) },
	} {
		if _, err := open(); !errors.Is(err, ErrUnsealable) {
			t.Errorf("%s: Open = %v, want ErrUnsealable", name, err)
		}
	}
	// A rotation: a new key first, the old one kept: old rows open, new ones are sealed anew.
	k2, err := ParseKeys([]byte("new:" + strings.Repeat("ab", 32) + "\n" + testKey + "\n"))
	if err != nil {
		t.Fatal(err)
	}
	if plain, err := k2.Open(id, sealed, aad); err != nil || string(plain) != "gho_secret" {
		t.Fatalf("Open after rotation = %q, %v", plain, err)
	}
	if id2, _ := k2.Seal([]byte("x"), aad); id2 != "new" {
		t.Fatalf("after rotation, sealed under %q, want new", id2)
	}
}

func TestParseKeysErrors(t *testing.T) {
	for in, want := range map[string]string{
		"":                       "no key",
		"# only a comment\n":     "no key",
		"c2hvcnQ=":               "line 1: the key is 5 bytes, want 32",
		"!!!":                    "line 1: the key is neither base64 nor hex",
		testKey + "\n" + testKey: `line 2: key id`,
		"Bad_Id:" + testKey:      `line 1: key id "Bad_Id"`,
	} {
		if _, err := ParseKeys([]byte(in)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseKeys(%q) = %v, want %q", in, err, want)
		}
	}
}

func FuzzParseKeys(f *testing.F) {
	f.Add([]byte(testKey))
	f.Add([]byte("a:" + strings.Repeat("0", 64) + "\n#x\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		k, err := ParseKeys(data)
		if err != nil {
			return
		}
		id, sealed := k.Seal([]byte("t"), "aad")
		if p, err := k.Open(id, sealed, "aad"); err != nil || string(p) != "t" {
			t.Fatalf("round trip under a parsed key: %q, %v", p, err)
		}
	})
}
