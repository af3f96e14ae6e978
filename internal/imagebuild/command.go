package imagebuild

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/spf13/cobra"
)

// maxSpecFile bounds the spec file (COPY's files are in it).
const maxSpecFile = 256 << 20

// Command is `hangar image-build`, hidden: a workspace's build init container runs it (its image
// is the Spec's Base, the hangar binary comes from the hangar-tools init container).
func Command() *cobra.Command {
	var specFile, image, root string
	var insecure []string
	cmd := &cobra.Command{
		Use:    "image-build --spec FILE --image REF [--insecure-registry HOST:PORT ...] [--root DIR]",
		Short:  "Build a workspace's image from a build spec and push it (a workspace's build init container runs it)",
		Hidden: true,
		Args:   cobra.NoArgs,
		Run: func(cmd *cobra.Command, _ []string) {
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			x := &Executor{Root: root, Mountinfo: "/proc/self/mountinfo", Insecure: insecure, Out: cmd.OutOrStdout()}
			os.Exit(Main(ctx, x, specFile, image))
		},
	}
	cmd.Flags().StringVar(&specFile, "spec", "", "the build's spec: a JSON `FILE` (internal/imagebuild.Spec)")
	cmd.Flags().StringVar(&image, "image", "", "where to push the image: `REF` is registry/repository:tag")
	cmd.Flags().StringSliceVar(&insecure, "insecure-registry", nil, "a registry `HOST:PORT` reached over plain HTTP; repeatable")
	cmd.Flags().StringVar(&root, "root", "/", "the filesystem to build in: a `DIR` holding the base image's files (RUN is chrooted into it unless it is /)")
	return cmd
}

// Main runs a build and returns the exit code. A failure ends the output with one line that says
// what failed and why: the pod's termination message is the log's tail, and that is what the
// user sees.
func Main(ctx context.Context, x *Executor, specFile, image string) int {
	if err := mainErr(ctx, x, specFile, image); err != nil {
		fmt.Fprintln(x.Out, oneLine(err))
		return 1
	}
	return 0
}

func mainErr(ctx context.Context, x *Executor, specFile, image string) error {
	if specFile == "" {
		return fmt.Errorf("--spec: a file is required")
	}
	if image == "" {
		return fmt.Errorf("--image: a reference is required")
	}
	spec, err := readSpec(specFile)
	if err != nil {
		return err
	}
	if fi, err := os.Stat(x.Root); err != nil || !fi.IsDir() {
		return fmt.Errorf("--root %s: not a directory", x.Root)
	}
	// Absolute, as the mount table's paths are.
	if x.Root, err = filepath.Abs(x.Root); err != nil {
		return fmt.Errorf("--root %s: %w", x.Root, err)
	}
	return x.Build(ctx, spec, image)
}

// readSpec reads and decodes a spec file; unknown fields are errors (a newer writer's spec is
// not half-built).
func readSpec(file string) (Spec, error) {
	f, err := os.Open(file)
	if err != nil {
		return Spec{}, fmt.Errorf("--spec: %w", err)
	}
	defer f.Close()
	return decodeSpec(io.LimitReader(f, maxSpecFile+1))
}

func decodeSpec(r io.Reader) (Spec, error) {
	b, err := io.ReadAll(r)
	if err != nil {
		return Spec{}, fmt.Errorf("--spec: %w", err)
	}
	if len(b) > maxSpecFile {
		return Spec{}, fmt.Errorf("--spec: more than %d bytes", maxSpecFile)
	}
	var s Spec
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&s); err != nil {
		return Spec{}, fmt.Errorf("--spec: %w", err)
	}
	if err := s.validate(); err != nil {
		return Spec{}, err
	}
	return s, nil
}
