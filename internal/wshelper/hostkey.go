//go:build unix

package wshelper

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"

	"golang.org/x/crypto/ssh"
)

// HostKeyName is the file under the state directory that keeps a generated host key; its public
// half is next to it, with ".pub".
const HostKeyName = "ssh_host_ed25519_key"

// LoadHostKey returns the helper's host key: the private key in file when file is set (it must
// exist), else the one kept in stateDir, generated (ed25519, mode 0600) the first time. Keeping it on
// the workspace's data volume keeps it across container restarts and stop/start, so that a client
// pinning it (the proxy, or known_hosts) is not told it changed.
func LoadHostKey(file, stateDir string, log *slog.Logger) (ssh.Signer, error) {
	if file != "" {
		b, err := os.ReadFile(file)
		if err != nil {
			return nil, fmt.Errorf("read host key: %w", err)
		}
		s, err := ssh.ParsePrivateKey(b)
		if err != nil {
			return nil, fmt.Errorf("host key %s: %w", file, err)
		}
		return s, nil
	}
	if stateDir == "" {
		return nil, errors.New("host key: neither a host key file nor a state directory is set")
	}
	path := filepath.Join(stateDir, HostKeyName)
	b, err := os.ReadFile(path)
	if err == nil {
		s, err := ssh.ParsePrivateKey(b)
		if err != nil {
			return nil, fmt.Errorf("host key %s: %w (remove it to have a new one generated)", path, err)
		}
		if fi, err := os.Stat(path); err == nil && fi.Mode().Perm()&0o077 != 0 {
			if err := os.Chmod(path, 0o600); err != nil {
				return nil, fmt.Errorf("host key %s: make it private: %w", path, err)
			}
		}
		return s, nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("read host key: %w", err)
	}
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generate host key: %w", err)
	}
	block, err := ssh.MarshalPrivateKey(priv, "hangar workspace helper")
	if err != nil {
		return nil, fmt.Errorf("encode host key: %w", err)
	}
	signer, err := ssh.NewSignerFromKey(priv)
	if err != nil {
		return nil, fmt.Errorf("host key: %w", err)
	}
	if err := os.MkdirAll(stateDir, 0o700); err != nil {
		return nil, fmt.Errorf("state directory: %w", err)
	}
	if err := writeFileAtomic(path, pem.EncodeToMemory(block), 0o600); err != nil {
		return nil, fmt.Errorf("write host key: %w", err)
	}
	if err := writeFileAtomic(path+".pub", ssh.MarshalAuthorizedKey(signer.PublicKey()), 0o644); err != nil {
		return nil, fmt.Errorf("write host key: %w", err)
	}
	log.Info("generated a host key", "file", path, "fingerprint", ssh.FingerprintSHA256(signer.PublicKey()))
	return signer, nil
}

// writeFileAtomic writes b to path through a temporary file in the same directory, so that a crash
// leaves either the old file or the new one, never half of one.
func writeFileAtomic(path string, b []byte, mode os.FileMode) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	if err := f.Chmod(mode); err != nil {
		f.Close()
		return err
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(f.Name(), path)
}
