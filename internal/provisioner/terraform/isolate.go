package terraform

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/hangar-dev/hangar/internal/provisioner/sandbox"
)

// Ownership of a sandboxed build's work directory (Runner.Sandbox): the directory itself, the CLI
// config and the variables belong to the provisioner, readable by the build user's group only
// (the build cannot rewrite the files of the survival shim, such as the process group it kills);
// the module (where terraform writes its state) and the build's home belong to the build user.

// handOver gives the build user what it needs of jobDir once the module, the state and the CLI
// config are written.
func (r *Runner) handOver(jobDir string) error {
	u := r.Sandbox.User
	if err := os.Chown(jobDir, os.Getuid(), u.GID); err != nil {
		return fmt.Errorf("handing the work directory to the build user: %w", err)
	}
	if err := os.Chmod(jobDir, 0o750); err != nil {
		return fmt.Errorf("handing the work directory to the build user: %w", err)
	}
	if err := r.shareFile(filepath.Join(jobDir, "terraform.rc")); err != nil {
		return fmt.Errorf("handing the CLI config to the build user: %w", err)
	}
	for _, d := range []string{"module", "home"} {
		err := filepath.WalkDir(filepath.Join(jobDir, d), func(p string, _ fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			return os.Lchown(p, u.UID, u.GID)
		})
		if err != nil {
			return fmt.Errorf("handing the %s directory to the build user: %w", d, err)
		}
	}
	return nil
}

// shareFile makes a file of the provisioner's readable by the build user's group.
func (r *Runner) shareFile(p string) error {
	if err := os.Chown(p, os.Getuid(), r.Sandbox.User.GID); err != nil {
		return err
	}
	return os.Chmod(p, 0o640)
}

// killLeftovers kills whatever the build left running as the build user (a daemonized local-exec):
// it would see the next build of this provisioner. A workspace helper among them means the
// template ran hangar_agent's init script in the build instead of on its machine: the build log
// says so (HelperInBuildWarning), since nothing else would (Terraform hides the output of a
// command holding the sensitive script, and the helper dies here).
func (r *Runner) killLeftovers(log *logger, inGroup []sandbox.Process) {
	if r.Sandbox == nil {
		return
	}
	// What terraform's process group left was killed already (killGroup, at the command's end);
	// what left the group is killed here.
	for _, p := range append(inGroup, sandbox.KillUser(r.Sandbox.User.UID)...) {
		if p.IsHelper() {
			log.emit(LevelWarn, fmt.Sprintf(HelperInBuildWarning, p.PID, strings.Join(p.Args[:2], " ")))
			return
		}
	}
}

// HelperInBuildWarning is the build log's warning when a build left a workspace helper running
// (its pid and first arguments).
const HelperInBuildWarning = "This build started a workspace helper (pid %d, %s) and it was stopped with the build: every " +
	"process a build leaves is killed when it ends. hangar_agent's init_script must run ON the machine the template " +
	"creates (its startup script such as user_data, a container's command, or hangar_kubernetes_pod), not in the build " +
	"(a local-exec provisioner). See \"Terraform templates\" in the README, or start from 'hangar templates init terraform-kubernetes-pod'"
