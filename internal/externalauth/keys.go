package externalauth

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
)

// Keyring seals tokens with AES-256-GCM. Its first key seals; every key opens what it sealed, by
// the key id stored beside each ciphertext: a rotation puts a new key first and keeps the old ones
// until no row names them.
type Keyring struct {
	current string
	aeads   map[string]cipher.AEAD
	raw     [][]byte // the keys in the file's order (the current one first), for DerivedKeys
}

// ParseKeys reads a key file: one key a line, base64 or hex of 32 random bytes (such as the output
// of `openssl rand -base64 32`), optionally "ID:KEY"; the first line's key seals. Without an ID, a
// key's id is the start of its SHA-256. Blank lines and lines starting with # are skipped.
func ParseKeys(data []byte) (*Keyring, error) {
	k := &Keyring{aeads: map[string]cipher.AEAD{}}
	for n, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		id, enc, named := strings.Cut(line, ":")
		if !named {
			id, enc = "", line
		}
		key, err := decodeKey(enc)
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", n+1, err)
		}
		if id == "" {
			sum := sha256.Sum256(key)
			id = hex.EncodeToString(sum[:6])
		}
		if !idPattern.MatchString(id) {
			return nil, fmt.Errorf("line %d: key id %q: want lower-case letters, digits and dashes", n+1, id)
		}
		if _, dup := k.aeads[id]; dup {
			return nil, fmt.Errorf("line %d: key id %q is used twice", n+1, id)
		}
		block, err := aes.NewCipher(key)
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", n+1, err)
		}
		aead, err := cipher.NewGCM(block)
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", n+1, err)
		}
		k.aeads[id] = aead
		k.raw = append(k.raw, key)
		if k.current == "" {
			k.current = id
		}
	}
	if k.current == "" {
		return nil, errors.New("no key: want a line of base64 (or hex) of 32 random bytes, such as the output of openssl rand -base64 32")
	}
	return k, nil
}

func decodeKey(s string) ([]byte, error) {
	if b, err := hex.DecodeString(s); err == nil && len(b) == 32 {
		return b, nil
	}
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		if b, err := enc.DecodeString(s); err == nil {
			if len(b) != 32 {
				return nil, fmt.Errorf("the key is %d bytes, want 32 (AES-256)", len(b))
			}
			return b, nil
		}
	}
	return nil, errors.New("the key is neither base64 nor hex of 32 bytes")
}

// KeyID is the id of the key that seals.
func (k *Keyring) KeyID() string { return k.current }

// DerivedKeys returns a key for purpose derived from each key of the file (HMAC-SHA256), the
// current one's first: what the first makes, every one of them checks, so that a rotation keeps
// what the older keys made working until they leave the file.
func (k *Keyring) DerivedKeys(purpose string) [][]byte {
	out := make([][]byte, 0, len(k.raw))
	for _, key := range k.raw {
		m := hmac.New(sha256.New, key)
		m.Write([]byte(purpose))
		out = append(out, m.Sum(nil))
	}
	return out
}

// Seal encrypts plain under the current key, bound to what it is (aad: a token of one user at one
// forge, so that a ciphertext copied into another row does not open there); the nonce leads the
// result.
func (k *Keyring) Seal(plain []byte, aad string) (keyID string, sealed []byte) {
	aead := k.aeads[k.current]
	nonce := make([]byte, aead.NonceSize(), aead.NonceSize()+len(plain)+aead.Overhead())
	if _, err := rand.Read(nonce); err != nil {
		panic(err) // crypto/rand does not fail (Go 1.24)
	}
	return k.current, aead.Seal(nonce, nonce, plain, []byte(aad))
}

// ErrUnsealable is a ciphertext that does not open: tampered with, bound to another row, or
// sealed under a key the server was not given.
var ErrUnsealable = errors.New("a sealed token does not open")

// Open decrypts what Seal returned.
func (k *Keyring) Open(keyID string, sealed []byte, aad string) ([]byte, error) {
	aead, ok := k.aeads[keyID]
	if !ok {
		return nil, fmt.Errorf("%w: key %q is not in the key file", ErrUnsealable, keyID)
	}
	if len(sealed) < aead.NonceSize()+aead.Overhead() {
		return nil, fmt.Errorf("%w: too short", ErrUnsealable)
	}
	plain, err := aead.Open(nil, sealed[:aead.NonceSize()], sealed[aead.NonceSize():], []byte(aad))
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrUnsealable, err)
	}
	return plain, nil
}

// tokenAAD binds a sealed token to its row and field.
func tokenAAD(userID, providerID, field string) string {
	return "hangar external-auth token\x00" + userID + "\x00" + providerID + "\x00" + field
}
