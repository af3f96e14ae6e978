package terraform

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/hashicorp/hcl/v2/hclwrite"
	"github.com/zclconf/go-cty/cty"

	"github.com/hangar-dev/hangar/internal/tfprovider"
)

// Hangar's provider comes from a filesystem mirror, which carries no signed checksums: terraform
// init computes the package's checksum itself, records it in the dependency lock file and warns,
// at every build, "Incomplete lock file information for providers". A lock file that already
// records that checksum for the version offered is what terraform expects of a mirror (it is what
// `terraform providers lock` writes), and init then installs the package quietly. So the runner
// writes the provider's entry into the module's lock file before init, replacing any entry the
// template's author recorded against another Hangar executable (which would fail init with a
// checksum mismatch).

const lockFileName = ".terraform.lock.hcl"

// lockProvider records Hangar's provider with its checksum in dir's lock file when the module
// refers to the provider. pkgFile is the provider's executable as terraform installs it.
func lockProvider(dir, pkgFile string) error {
	uses, err := refersTo(dir, tfprovider.Address)
	if err != nil || !uses {
		return err
	}
	h1, err := packageHash(pkgFile)
	if err != nil {
		return fmt.Errorf("the checksum of Hangar's provider: %w", err)
	}
	path := filepath.Join(dir, lockFileName)
	src, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		return fmt.Errorf("reading the module's lock file: %w", err)
	}
	f, diags := hclwrite.ParseConfig(src, lockFileName, hcl.InitialPos)
	if diags.HasErrors() {
		return nil // terraform reports the broken lock file itself, naming the line
	}
	body := f.Body()
	for _, b := range body.Blocks() {
		if b.Type() == "provider" && slices.Equal(b.Labels(), []string{tfprovider.Address}) {
			body.RemoveBlock(b)
		}
	}
	if len(src) == 0 {
		body.AppendUnstructuredTokens(hclwrite.Tokens{{Type: hclsyntax.TokenComment,
			Bytes: []byte("# This file is maintained automatically by \"terraform init\".\n# Manual edits may be lost in future updates.\n")}})
	}
	body.AppendNewline()
	p := body.AppendNewBlock("provider", []string{tfprovider.Address}).Body()
	p.SetAttributeValue("version", cty.StringVal(tfprovider.Version))
	p.SetAttributeValue("hashes", cty.ListVal([]cty.Value{cty.StringVal(h1)}))
	if err := os.WriteFile(path, f.Bytes(), 0o644); err != nil {
		return fmt.Errorf("writing the module's lock file: %w", err)
	}
	return nil
}

// refersTo reports whether a configuration file (*.tf, *.tf.json) under dir names address.
func refersTo(dir, address string) (bool, error) {
	found := false
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || found {
			return err
		}
		if d.IsDir() {
			if d.Name() == ".terraform" {
				return filepath.SkipDir
			}
			return nil
		}
		if !d.Type().IsRegular() || !(strings.HasSuffix(d.Name(), ".tf") || strings.HasSuffix(d.Name(), ".tf.json")) {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		found = bytes.Contains(b, []byte(address))
		return nil
	})
	return found, err
}

// packageHashes caches the checksums of provider executables by path, size and time: the hangar
// executable is large, and every build needs its checksum.
var packageHashes sync.Map

type packageKey struct {
	path string
	size int64
	mod  time.Time
}

// packageHash is terraform's "h1:" checksum of an unpacked provider package holding only exe,
// under the name terraform gives it in the mirror (golang.org/x/mod's dirhash Hash1: the SHA-256 of
// the lines "<sha256 hex>  <name>\n" of the package's files, base64).
func packageHash(exe string) (string, error) {
	fi, err := os.Stat(exe)
	if err != nil {
		return "", err
	}
	key := packageKey{exe, fi.Size(), fi.ModTime()}
	if h, ok := packageHashes.Load(key); ok {
		return h.(string), nil
	}
	f, err := os.Open(exe)
	if err != nil {
		return "", err
	}
	defer f.Close()
	sum := sha256.New()
	if _, err := io.Copy(sum, f); err != nil {
		return "", err
	}
	line := fmt.Sprintf("%s  %s\n", hex.EncodeToString(sum.Sum(nil)), providerFileName())
	h := sha256.Sum256([]byte(line))
	out := "h1:" + base64.StdEncoding.EncodeToString(h[:])
	packageHashes.Store(key, out)
	return out, nil
}

// providerFileName is the provider executable's name in its package.
func providerFileName() string {
	return "terraform-provider-hangar_v" + tfprovider.Version
}

// mirrorPackage is the provider's executable in the filesystem mirror dir (tfprovider.Mirror's
// layout) for this platform.
func mirrorPackage(dir string) string {
	return filepath.Join(dir, tfprovider.Address, tfprovider.Version, runtime.GOOS+"_"+runtime.GOARCH, providerFileName())
}
