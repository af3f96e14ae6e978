package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/hangar-dev/hangar/internal/backend/kube"
	"github.com/hangar-dev/hangar/internal/externalauth"
	"github.com/hangar-dev/hangar/internal/repodef"
	"github.com/hangar-dev/hangar/internal/sdk"
	"github.com/hangar-dev/hangar/internal/store"
	"github.com/hangar-dev/hangar/internal/workspace"
)

// repositoryReadTimeout bounds reading a repository's definition (a few requests to the forge).
const repositoryReadTimeout = 30 * time.Second

// readRepository finds the definition of a workspace created from a repository (docs/decisions.md,
// "A workspace from a repository"): through the API of the configured forge that serves the
// repository's host, with u's linked account there (anonymously when u has none, for a public
// repository). A host no configured forge serves gets the agent's default definition, with a
// warning saying why. fallback says what is used when the repository has no definition.
func (s *Server) readRepository(ctx context.Context, u workspace.User, req sdk.RepositorySource, fallback string) (*kube.Repository, []string, error) {
	raw := req.URL
	if req.Ref != "" {
		raw += "#" + req.Ref
	}
	src, err := repodef.ParseSource("repository.url", raw)
	if err != nil {
		return nil, nil, errBadRequest("invalid request", sdk.Validation{Field: "repository", Detail: err.Error()})
	}
	if strings.Contains(req.URL, "#") {
		return nil, nil, errBadRequest("invalid request", sdk.Validation{Field: "repository.url", Detail: "give the ref in repository.ref, not after '#'"})
	}
	if req.DevcontainerPath != "" {
		if _, err := repodef.CleanPath("repository.devcontainer_path", req.DevcontainerPath); err != nil {
			return nil, nil, errBadRequest("invalid request", sdk.Validation{Field: "repository.devcontainer_path", Detail: err.Error()})
		}
	}
	host, repoPath, _ := repodef.RepoHostPath(src.URL)
	scheme, _, ok := strings.Cut(src.URL, "://")
	if !ok {
		scheme = "ssh" // scp-like user@host:path
	}
	repo := &kube.Repository{URL: src.URL, Ref: src.Ref, DevcontainerPath: req.DevcontainerPath}
	var provider externalauth.Provider
	found := false
	if s.extAuth != nil {
		provider, found = externalauth.Match(s.extAuth.Providers(), externalauth.CredentialRequest{Protocol: scheme, Host: host, Path: repoPath})
	}
	if !found && scheme == "ssh" {
		// The clone at the start signs with the user's git SSH key and checks the host's key
		// against a forge's ssh_known_hosts: with no forge for the host it could do neither.
		return nil, nil, errBadRequest("invalid request", sdk.Validation{Field: "repository.url",
			Detail: fmt.Sprintf("no forge configured in Hangar serves the SSH host %s (an admin lists ssh://%s in a forge's hosts, with its ssh_known_hosts): give the repository's https:// URL, or ask an admin", host, host)})
	}
	if !found {
		return repo, []string{fmt.Sprintf("the repository's own definition was not read: no forge configured in Hangar serves %s (an admin adds it with --external-auth-config); %s is used, and the repository is cloned at the start", host, fallback)}, nil
	}
	token := ""
	tok, err := s.extAuth.Token(ctx, u, provider.ID)
	switch {
	case err == nil:
		token = tok.AccessToken
	case errors.Is(err, externalauth.ErrNotLinked):
		// Anonymous: a public repository reads; a private one is refused below, saying to link.
	default:
		return nil, nil, err
	}
	reqCtx := ctx
	ctx, cancel := context.WithTimeout(ctx, repositoryReadTimeout)
	defer cancel()
	reader := &repodef.ForgeReader{Type: string(provider.Type), APIBase: provider.APIURL, Repo: repoPath, Ref: src.Ref, Token: token,
		HTTP: &http.Client{Timeout: repositoryReadTimeout}}
	def, err := repodef.Find(ctx, reader, req.DevcontainerPath)
	// The files the definition names (a Dockerfile and its build context), read as the translation
	// asks for them, during this request, each read bounded by the client's timeout.
	repo.Files = repodef.FS(reqCtx, reader)
	var refused *repodef.RefusedError
	var choice *repodef.ChoiceError
	var pathErr *repodef.PathError
	var refErr *repodef.RefError
	switch {
	case errors.As(err, &refused) && token == "":
		return nil, nil, errConflict(fmt.Sprintf("%s cannot read %s without your account there: link it with `hangar external-auth link %s`, then create the workspace again", provider.Name, repoPath, provider.ID), "")
	case errors.As(err, &refused):
		return nil, nil, errConflict(fmt.Sprintf("%s refused to read %s with your linked account (HTTP %d): it is private and your account may not read it, or it does not exist", provider.Name, repoPath, refused.Status), "")
	case errors.As(err, &choice):
		return nil, nil, errBadRequest("invalid request", sdk.Validation{Field: "repository.devcontainer_path", Detail: err.Error(), Choices: choice.Paths})
	case errors.As(err, &refErr) && req.Ref != "":
		return nil, nil, errBadRequest("invalid request", sdk.Validation{Field: "repository.ref", Detail: refErr.Error()})
	case errors.As(err, &refErr):
		return nil, nil, errBadRequest("invalid request", sdk.Validation{Field: "repository", Detail: refErr.Error() + " (its default branch): is it empty?"})
	case errors.As(err, &pathErr):
		return nil, nil, errBadRequest("invalid request", sdk.Validation{Field: "repository.devcontainer_path", Detail: pathErr.Detail})
	case err != nil:
		return nil, nil, fmt.Errorf("read the definition of %s: %w", src.URL, err)
	}
	repo.Definition = def
	var warnings []string
	if def.Kind == "" {
		warnings = append(warnings, fmt.Sprintf("%s has no devfile or devcontainer.json at %s: %s is used", repoPath, refName(src.Ref), fallback))
	}
	return repo, warnings, nil
}

func refName(ref string) string {
	if ref == "" {
		return "its default branch"
	}
	return ref
}

// updateDefinition is hangar update of a Kubernetes workspace (docs/decisions.md, "A team's
// repository: the definition follows the repository"): its repository's definition is read again
// as at create (with the owner's forge account, the same order, errors and fallback to the
// agent's default) at the newest commit of the ref, and becomes the workspace's when it differs.
// A workspace not made from a repository has nothing to read again: 409.
func (s *Server) updateDefinition(w http.ResponseWriter, r *http.Request, u workspace.User, ws workspace.Workspace, req sdk.UpdateWorkspaceVersionRequest) error {
	if len(req.Parameters) > 0 {
		return errBadRequest("invalid request", sdk.Validation{Field: "parameters", Detail: "are for terraform templates: a Kubernetes workspace has none"})
	}
	if ws.Repository == nil {
		return errConflict("not created from a repository", fmt.Sprintf(
			"workspace %q is a Kubernetes workspace defined by the devfile it was created with: update reads the definition again only for a workspace created from a repository (hangar create --repo)", ws.Name))
	}
	src := *ws.Repository
	// The repository is read with the owner's forge account, as at create and as the clone at the
	// start does, whoever asks: an admin's update of another's workspace must not put what the
	// admin's account may read (a private definition, its build context) into a workspace of a
	// user who may not read it.
	reader := u
	if ws.OwnerID != u.ID {
		owner, err := s.store.UserByUsername(r.Context(), ws.OwnerName)
		switch {
		case err == nil && owner.ID == ws.OwnerID:
			reader = owner
		case err == nil || isNotFound(err):
			// A system owner (the prebuilt workspaces'): no forge account, a public repository only.
			reader = workspace.User{ID: ws.OwnerID, Username: ws.OwnerName}
		default:
			return err
		}
	}
	repo, warnings, err := s.readRepository(r.Context(), reader, sdk.RepositorySource{URL: src.URL, Ref: src.Ref, DevcontainerPath: src.DevcontainerPath}, fallbackName(ws.TemplateName))
	if err != nil {
		return err
	}
	nw, df, result, err := s.kube.UpdateDefinition(r.Context(), u, store.WorkspaceRef{ID: ws.ID}, *repo)
	if err != nil {
		return err
	}
	out := s.toWorkspace(nw)
	out.Warnings, out.Definition = append(warnings, df.Warnings()...), df.Definition()
	writeJSON(w, http.StatusOK, sdk.UpdateWorkspaceVersionResponse{Result: result, Workspace: out})
	return nil
}

// fallbackName says what defines a workspace from a repository that has no definition: the
// template's devfile (a template whose devfile says the repository defines the workspace), else the
// agent's default.
func fallbackName(template string) string {
	if template != "" {
		return fmt.Sprintf("the template %s's devfile", template)
	}
	return "the agent's default definition"
}
