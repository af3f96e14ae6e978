//go:build linux

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

// The phases of a build, each the subcommand of `hangar image-build` one init container of the
// workspace's pod runs (Executor.Prepare, Run and Push); PhaseAll is the three in a row.
const (
	PhaseAll     = ""
	PhasePrepare = "prepare"
	PhaseRun     = "run"
	PhasePush    = "push"
)

// Invocation is one `hangar image-build`: its phase and flags.
type Invocation struct {
	Phase string
	Spec  string // --spec
	Image string // --image (PhaseAll, PhasePrepare, PhasePush)
	Dir   string // --dir, the work directory the phases share (not PhaseAll)
}

// Command is `hangar image-build`, hidden: a workspace's build init containers run its
// subcommands (prepare and push in the tools image, run in an image of the Spec's Base, whose
// hangar binary comes from the hangar-tools init container). Without a subcommand it runs the
// three in a row, for local use.
func Command() *cobra.Command {
	var inv Invocation
	var root string
	var insecure []string
	run := func(phase string) func(*cobra.Command, []string) {
		return func(cmd *cobra.Command, _ []string) {
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			x := &Executor{Root: root, Mountinfo: "/proc/self/mountinfo", Insecure: insecure, Out: cmd.OutOrStdout()}
			inv.Phase = phase
			os.Exit(Main(ctx, x, inv))
		}
	}
	flags := func(cmd *cobra.Command, image, dir, registry, rootDir bool) *cobra.Command {
		cmd.Flags().StringVar(&inv.Spec, "spec", "", "the build's spec: a JSON `FILE` (internal/imagebuild.Spec)")
		if image {
			cmd.Flags().StringVar(&inv.Image, "image", "", "where the image goes: `REF` is registry/repository:tag")
		}
		if dir {
			cmd.Flags().StringVar(&inv.Dir, "dir", "", "the work `DIR` the build's phases share (prepare writes it, run reads and writes it, push reads it)")
		}
		if registry {
			cmd.Flags().StringSliceVar(&insecure, "insecure-registry", nil, "a registry `HOST:PORT` reached over plain HTTP; repeatable")
		}
		if rootDir {
			cmd.Flags().StringVar(&root, "root", "/", "the filesystem to build in: a `DIR` holding the base image's files (RUN is chrooted into it unless it is /)")
		}
		return cmd
	}
	cmd := flags(&cobra.Command{
		Use:    "image-build --spec FILE --image REF [--insecure-registry HOST:PORT ...] [--root DIR]",
		Short:  "Build a workspace's image from a build spec and push it: prepare, run and push in a row",
		Hidden: true,
		Args:   cobra.NoArgs,
		Run:    run(PhaseAll),
	}, true, false, true, true)
	cmd.AddCommand(
		flags(&cobra.Command{
			Use:   "prepare --spec FILE --image REF --dir DIR [--insecure-registry HOST:PORT ...]",
			Short: "Look the image up (cached: done), else fetch the base's config and the features into DIR (with the registry credential; runs no user code)",
			Args:  cobra.NoArgs,
			Run:   run(PhasePrepare),
		}, true, true, true, false),
		flags(&cobra.Command{
			Use:   "run --spec FILE --dir DIR [--root DIR]",
			Short: "Run the steps and install the features from DIR, and write the layer and config into DIR (no credential, no registry)",
			Args:  cobra.NoArgs,
			Run:   run(PhaseRun),
		}, false, true, false, true),
		flags(&cobra.Command{
			Use:   "push --spec FILE --image REF --dir DIR [--insecure-registry HOST:PORT ...]",
			Short: "Push the base with the layer and config from DIR to REF (with the registry credential; DIR's content is treated as hostile)",
			Args:  cobra.NoArgs,
			Run:   run(PhasePush),
		}, true, true, true, false),
	)
	return cmd
}

// Main runs a build's phase and returns the exit code. A failure ends the output with one line
// that says what failed and why: the pod's termination message is the log's tail, and that is
// what the user sees.
func Main(ctx context.Context, x *Executor, inv Invocation) int {
	if err := mainErr(ctx, x, inv); err != nil {
		fmt.Fprintln(x.Out, oneLine(err))
		return 1
	}
	return 0
}

func mainErr(ctx context.Context, x *Executor, inv Invocation) error {
	if inv.Spec == "" {
		return fmt.Errorf("--spec: a file is required")
	}
	if inv.Image == "" && inv.Phase != PhaseRun {
		return fmt.Errorf("--image: a reference is required")
	}
	if inv.Phase != PhaseAll {
		if inv.Dir == "" {
			return fmt.Errorf("--dir: a directory is required")
		}
		if fi, err := os.Stat(inv.Dir); err != nil || !fi.IsDir() {
			return fmt.Errorf("--dir %s: not a directory", inv.Dir)
		}
	}
	spec, err := readSpec(inv.Spec)
	if err != nil {
		return err
	}
	if inv.Phase == PhaseAll || inv.Phase == PhaseRun {
		if fi, err := os.Stat(x.Root); err != nil || !fi.IsDir() {
			return fmt.Errorf("--root %s: not a directory", x.Root)
		}
		// Absolute, as the mount table's paths are.
		if x.Root, err = filepath.Abs(x.Root); err != nil {
			return fmt.Errorf("--root %s: %w", x.Root, err)
		}
		if inv.Dir != "" {
			if inv.Dir, err = filepath.Abs(inv.Dir); err != nil {
				return fmt.Errorf("--dir %s: %w", inv.Dir, err)
			}
		}
	}
	switch inv.Phase {
	case PhaseAll:
		return x.Build(ctx, spec, inv.Image)
	case PhasePrepare:
		return x.Prepare(ctx, spec, inv.Image, inv.Dir)
	case PhaseRun:
		return x.Run(ctx, spec, inv.Dir)
	case PhasePush:
		return x.Push(ctx, spec, inv.Image, inv.Dir)
	}
	return fmt.Errorf("unknown phase %q", inv.Phase)
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
