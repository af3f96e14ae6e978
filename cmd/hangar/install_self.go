package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"
)

// installSelfCommand is the init container that puts the hangar binary into a workspace pod (the
// shared emptyDir the main container runs `hangar workspace-helper` from); hidden, as people do not
// run it.
func installSelfCommand() *cobra.Command {
	return &cobra.Command{
		Use:    "install-self DEST",
		Short:  "Copy this hangar binary to DEST atomically (a workspace's init container)",
		Hidden: true,
		Args:   cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			exe, err := os.Executable()
			if err != nil {
				return fmt.Errorf("install-self: %w", err)
			}
			if err := installSelf(exe, args[0]); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "installed %s\n", args[0])
			return nil
		},
	}
}

// installSelf copies src to dest atomically: a temporary file in dest's directory, written,
// synced, made executable (0755) and renamed over dest, so that dest is either absent, the old file
// or the whole new one — never a partial binary a concurrent exec could start.
func installSelf(src, dest string) (err error) {
	in, err := os.Open(src)
	if err != nil {
		return fmt.Errorf("install-self: %w", err)
	}
	defer in.Close()
	tmp, err := os.CreateTemp(filepath.Dir(dest), "."+filepath.Base(dest)+".tmp-*")
	if err != nil {
		return fmt.Errorf("install-self: %w", err)
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	if _, err = io.Copy(tmp, in); err != nil {
		return fmt.Errorf("install-self: copy %s to %s: %w", src, tmp.Name(), err)
	}
	if err = tmp.Chmod(0o755); err != nil {
		return fmt.Errorf("install-self: %w", err)
	}
	if err = tmp.Sync(); err != nil {
		return fmt.Errorf("install-self: %w", err)
	}
	if err = tmp.Close(); err != nil {
		return fmt.Errorf("install-self: %w", err)
	}
	if err = os.Rename(tmp.Name(), dest); err != nil {
		return fmt.Errorf("install-self: %w", err)
	}
	// The rename is durable once the directory is synced too.
	if d, derr := os.Open(filepath.Dir(dest)); derr == nil {
		d.Sync()
		d.Close()
	}
	return nil
}
