package servercmd

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
)

// adminTokenNotice is what the server prints about the admin token at start, and what the "Next:
// hangar login" line passes as --token. Only the replica that set up the store wrote the token,
// in its own data directory: another replica (Postgres), or one started with a new data directory,
// has no such file and must not point at one.
func adminTokenNotice(tokenFile string, created bool) (notice, loginToken string) {
	if created {
		return fmt.Sprintf("Created user admin; its token is in %s (shown nowhere else).", tokenFile), fmt.Sprintf(`"$(cat %s)"`, tokenFile)
	}
	if _, err := os.Stat(tokenFile); err == nil {
		return fmt.Sprintf("The admin token was written to %s when this store was first set up.", tokenFile), fmt.Sprintf(`"$(cat %s)"`, tokenFile)
	} else if !errors.Is(err, fs.ErrNotExist) {
		return fmt.Sprintf("The admin token file %s cannot be read: %v.", tokenFile, err), "TOKEN"
	}
	return fmt.Sprintf("This store was set up by another server (or with another data directory): the admin token was written "+
		"to the admin-token file of that server's data directory, not to %s. An admin can make new tokens "+
		"(hangar tokens create, hangar users rotate-token).", tokenFile), "TOKEN"
}
