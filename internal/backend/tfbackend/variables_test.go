package tfbackend

import (
	"testing"

	"github.com/hangar-dev/hangar/internal/build"
	"github.com/hangar-dev/hangar/internal/workspace"
)

// A build's variables carry the owner's profile, which no parameter may set: the names are
// reserved.
func TestVariablesCarryTheOwnersProfile(t *testing.T) {
	w := workspace.Workspace{ID: "w1", Name: "dev", OwnerName: "ada", OwnerFullName: "Ada Lovelace", OwnerEmail: "ada@example.com",
		OwnerDotfilesRepo: "https://git.example.com/ada/dots.git", Parameters: []workspace.ParameterValue{{Name: "workspace_owner_email", Value: "forged@example.com"}}}
	got := Variables(w, build.Build{Transition: build.Start})
	for k, want := range map[string]string{"workspace_owner": "ada", "workspace_owner_full_name": "Ada Lovelace",
		"workspace_owner_email": "ada@example.com", "workspace_owner_dotfiles_repo": "https://git.example.com/ada/dots.git"} {
		if got[k] != want {
			t.Errorf("%s = %q, want %q", k, got[k], want)
		}
	}
	for _, k := range []string{"workspace_owner_full_name", "workspace_owner_email", "workspace_owner_dotfiles_repo"} {
		if !VariableNames()[k] {
			t.Errorf("%s is not reserved", k)
		}
	}
}
