package servercmd

import (
	"errors"
	"fmt"
	"os"

	"github.com/hangar-dev/hangar/internal/externalauth"
)

// ExternalAuthConfig is the server's options for the forges users link (docs/decisions.md,
// "Forge identities: external auth (issue 22)"); both empty: none.
type ExternalAuthConfig struct {
	// ConfigFile is the forges' YAML or JSON file (--external-auth-config).
	ConfigFile string
	// KeyFile holds the key that seals the tokens at rest (--external-auth-key-file).
	KeyFile string
}

// ExternalAuthOptions reads the forges and the key (nil, nil when no forge is configured). Forges
// without a key are refused: their tokens would be kept in the clear.
func ExternalAuthOptions(c ExternalAuthConfig) ([]externalauth.Provider, *externalauth.Keyring, error) {
	if c.ConfigFile == "" {
		if c.KeyFile != "" {
			return nil, nil, errors.New("--external-auth-key-file: given without --external-auth-config (the forges users link)")
		}
		return nil, nil, nil
	}
	data, err := os.ReadFile(c.ConfigFile)
	if err != nil {
		return nil, nil, fmt.Errorf("--external-auth-config: %w", err)
	}
	providers, err := externalauth.Decode(data, os.LookupEnv, os.ReadFile)
	if err != nil {
		return nil, nil, fmt.Errorf("--external-auth-config %s: %w", c.ConfigFile, err)
	}
	if c.KeyFile == "" {
		return nil, nil, errors.New("--external-auth-key-file: required with --external-auth-config: the forges' tokens are kept encrypted under it (a file holding base64 of 32 random bytes: openssl rand -base64 32)")
	}
	keyData, err := os.ReadFile(c.KeyFile)
	if err != nil {
		return nil, nil, fmt.Errorf("--external-auth-key-file: %w", err)
	}
	keys, err := externalauth.ParseKeys(keyData)
	if err != nil {
		return nil, nil, fmt.Errorf("--external-auth-key-file %s: %w", c.KeyFile, err)
	}
	return providers, keys, nil
}
