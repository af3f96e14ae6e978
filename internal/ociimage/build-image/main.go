// Command build-image writes the hangar OCI image (an index over linux/amd64 and linux/arm64, by
// default) from hangar binaries built beforehand: an OCI image layout in -layout and a tarball of
// it in -out. scripts/build-image builds the binaries and runs it.
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/hangar-dev/hangar/internal/ociimage"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "build-image:", err)
		os.Exit(1)
	}
}

func run() error {
	var (
		bins    = flag.String("binaries", "", "comma-separated os/arch=path of static hangar binaries, e.g. linux/amd64=bin/amd64/hangar")
		ca      = flag.String("ca-certs", "/etc/ssl/certs/ca-certificates.crt", "PEM bundle of CA certificates to put in the image (empty: none)")
		ref     = flag.String("ref", "hangar.local/hangar:dev", "the image's name in the layout (what `ctr images import` names it)")
		layoutD = flag.String("layout", "", "directory to write the OCI image layout to (replaced)")
		out     = flag.String("out", "", "file to write the layout's tarball to")
		version = flag.String("version", "dev", "the org.opencontainers.image.version label")
	)
	flag.Parse()
	if *bins == "" || *layoutD == "" || *out == "" {
		return fmt.Errorf("-binaries, -layout and -out are required")
	}
	spec := ociimage.Spec{CACerts: *ca, Labels: map[string]string{
		"org.opencontainers.image.title":   "hangar",
		"org.opencontainers.image.source":  "https://github.com/hangar-dev/hangar",
		"org.opencontainers.image.version": *version,
	}}
	for _, b := range strings.Split(*bins, ",") {
		plat, file, ok := strings.Cut(b, "=")
		osName, arch, ok2 := strings.Cut(plat, "/")
		if !ok || !ok2 || file == "" {
			return fmt.Errorf("-binaries: want os/arch=path, got %q", b)
		}
		spec.Platforms = append(spec.Platforms, ociimage.Platform{OS: osName, Arch: arch, Binary: file})
	}
	idx, err := ociimage.Index(spec)
	if err != nil {
		return err
	}
	if err := ociimage.WriteLayout(*layoutD, idx, *ref); err != nil {
		return fmt.Errorf("write layout: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(*out), 0o755); err != nil {
		return err
	}
	tmp := *out + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return err
	}
	if err := ociimage.TarDir(*layoutD, f); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp, *out); err != nil {
		return err
	}
	d, err := idx.Digest()
	if err != nil {
		return err
	}
	fmt.Printf("build-image: %s %s (%d platforms) -> %s\n", *ref, d, len(spec.Platforms), *out)
	return nil
}
