//go:build unix

package wshelper

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"sync"

	"golang.org/x/crypto/ssh"
)

// authorizedKeys checks client keys against an authorized_keys file. It reads the file at every
// authentication: connections are few (the proxy opens one per user connection) and the file is
// small, and so a change — Kubernetes updates a mounted Secret by swapping a symlink — is seen at the
// next attempt, with no watcher to miss it. It fails closed: a missing, unreadable or empty file,
// or one with no usable key, lets nobody in.
type authorizedKeys struct {
	path string
	log  *slog.Logger

	mu   sync.Mutex
	last [sha256.Size]byte // the content last read, to log once per change
	seen bool
}

// errNoKeys is what authentication returns when the file lets nobody in.
var errNoKeys = errors.New("no authorized keys: refusing every client")

// keys reads the file and returns the keys it allows, by their wire encoding.
func (a *authorizedKeys) keys() (map[string]bool, error) {
	if a.path == "" {
		a.logOnce([]byte("\x00unset"), func() {
			a.log.Error("no authorized_keys file is configured (--authorized-keys-file): refusing every SSH client")
		})
		return nil, errNoKeys
	}
	b, err := os.ReadFile(a.path)
	if err != nil {
		a.logOnce([]byte("\x00"+err.Error()), func() {
			if errors.Is(err, fs.ErrNotExist) {
				a.log.Error("authorized_keys file is missing: refusing every SSH client", "file", a.path)
			} else {
				a.log.Error("cannot read authorized_keys: refusing every SSH client", "file", a.path, "err", err)
			}
		})
		return nil, errNoKeys
	}
	keys, problems := parseAuthorizedKeys(b)
	a.logOnce(b, func() {
		for _, p := range problems {
			a.log.Warn("authorized_keys: line ignored", "file", a.path, "problem", p)
		}
		if len(keys) == 0 {
			a.log.Error("authorized_keys holds no usable key: refusing every SSH client", "file", a.path)
		} else {
			a.log.Info("authorized_keys read", "file", a.path, "keys", len(keys))
		}
	})
	if len(keys) == 0 {
		return nil, errNoKeys
	}
	return keys, nil
}

// logOnce runs log when content differs from what the last call saw.
func (a *authorizedKeys) logOnce(content []byte, log func()) {
	sum := sha256.Sum256(content)
	a.mu.Lock()
	changed := !a.seen || sum != a.last
	a.last, a.seen = sum, true
	a.mu.Unlock()
	if changed {
		log()
	}
}

// parseAuthorizedKeys returns the keys of an authorized_keys file and a problem per line it
// ignores. Lines with options (from=, command=, restrict, ...) are ignored rather than honoured
// partly: the helper implements none of them, and a key meant to be restricted must not get in
// unrestricted. Certificates are ignored too.
func parseAuthorizedKeys(b []byte) (map[string]bool, []string) {
	keys := map[string]bool{}
	var problems []string
	for n, line := range bytes.Split(b, []byte("\n")) {
		line = bytes.TrimSpace(line)
		if len(line) == 0 || line[0] == '#' {
			continue
		}
		pk, _, opts, rest, err := ssh.ParseAuthorizedKey(line)
		switch {
		case err != nil:
			problems = append(problems, fmt.Sprintf("line %d: %v", n+1, err))
		case len(opts) > 0:
			problems = append(problems, fmt.Sprintf("line %d: options are not supported (%q)", n+1, opts))
		case len(bytes.TrimSpace(rest)) > 0:
			problems = append(problems, fmt.Sprintf("line %d: unexpected text after the key", n+1))
		default:
			if _, ok := pk.(*ssh.Certificate); ok {
				problems = append(problems, fmt.Sprintf("line %d: certificates are not supported", n+1))
				continue
			}
			keys[string(pk.Marshal())] = true
		}
	}
	return keys, problems
}

// check is the server's PublicKeyCallback.
func (a *authorizedKeys) check(meta ssh.ConnMetadata, key ssh.PublicKey) (*ssh.Permissions, error) {
	keys, err := a.keys()
	if err != nil {
		return nil, err
	}
	if !keys[string(key.Marshal())] {
		return nil, fmt.Errorf("key %s is not authorized", ssh.FingerprintSHA256(key))
	}
	return &ssh.Permissions{Extensions: map[string]string{"pubkey-fp": ssh.FingerprintSHA256(key)}}, nil
}
