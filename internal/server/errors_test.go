package server

import (
	"errors"
	"fmt"
	"net/http"
	"slices"
	"testing"

	"github.com/hangar-dev/hangar/internal/backend"
	"github.com/hangar-dev/hangar/internal/backend/tfbackend"
	"github.com/hangar-dev/hangar/internal/build"
	"github.com/hangar-dev/hangar/internal/errs"
	"github.com/hangar-dev/hangar/internal/sdk"
	"github.com/hangar-dev/hangar/internal/store"
	"github.com/hangar-dev/hangar/internal/workspace"
)

// TestEveryCodeHasAStatus: the one table gives every code of the vocabulary a status, and the SDK
// names the same codes (clients match them).
func TestEveryCodeHasAStatus(t *testing.T) {
	for _, c := range errs.All {
		if httpStatus[c] == 0 {
			t.Errorf("code %q has no HTTP status in httpStatus", c)
		}
	}
	if len(httpStatus) != len(errs.All) {
		t.Errorf("httpStatus has %d codes, errs.All %d", len(httpStatus), len(errs.All))
	}
	var all []string
	for _, c := range errs.All {
		all = append(all, string(c))
	}
	if !slices.Equal(all, sdk.Codes) {
		t.Errorf("sdk.Codes = %v\nwant errs.All  %v", sdk.Codes, all)
	}
}

// TestStatusOfDomainErrors: each domain error, wrapped as its callers wrap it, is answered with its
// code, the status the table gives it, and the texts callers have always seen.
func TestStatusOfDomainErrors(t *testing.T) {
	ve := &workspace.ValidationError{}
	ve.Add("name", "is required")
	for _, c := range []struct {
		err     error
		code    errs.Code
		status  int
		message string
	}{
		{fmt.Errorf("workspace x: %w", store.ErrNotFound), errs.NotFound, 404, "not found"},
		{fmt.Errorf("name w: %w", store.ErrConflict), errs.Conflict, 409, "already exists"},
		{fmt.Errorf("agent a: %w", store.ErrQuota), errs.Conflict, 409, "workspace quota exceeded"},
		{fmt.Errorf("job j: %w", store.ErrNotOwner), errs.NotOwner, 409, store.ErrNotOwner.Error()},
		{fmt.Errorf("from Terminated: %w", workspace.ErrTerminated), errs.Conflict, 409, "illegal state change"},
		{fmt.Errorf("to Running: %w", workspace.ErrIllegalTransition), errs.Conflict, 409, "illegal state change"},
		{fmt.Errorf("create: %w", ve), errs.Invalid, 400, "invalid request"},
		{&http.MaxBytesError{Limit: 10}, errs.TooLarge, 413, "request body too large"},
		{errNotFound("workspace %q not found", "x"), errs.NotFound, 404, `workspace "x" not found`},
		{errForbidden("only an admin may do this"), errs.Forbidden, 403, "only an admin may do this"},
		{errUnauthorized("invalid token"), errs.Unauthorized, 401, "invalid token"},
		{errBadRequest("invalid request"), errs.Invalid, 400, "invalid request"},
		{errConflict("build conflict", ""), errs.Conflict, 409, "build conflict"},
		// Coded errors no case names: the code's status and general text, the error as detail.
		{fmt.Errorf("b: %w", build.ErrBuildActive), errs.Conflict, 409, "conflict"},
		{fmt.Errorf("w: %w", backend.ErrHidden), errs.NotFound, 404, "not found"},
		{fmt.Errorf("w: %w", tfbackend.ErrNotTerraform), errs.Conflict, 409, "conflict"},
		{&build.StateError{Field: "serial", Detail: "is behind", Behind: true}, errs.Conflict, 409, "conflict"},
		{&build.StateError{Field: "lineage", Detail: "is missing"}, errs.Invalid, 400, "invalid request"},
		// Anything else is the server's failure, and says nothing of it.
		{errors.New("pq: connection reset"), errs.Internal, 500, "internal error"},
	} {
		status, body := statusOf(c.err)
		if status != c.status || body.Code != string(c.code) || body.Message != c.message {
			t.Errorf("statusOf(%v) = %d %q %q, want %d %q %q", c.err, status, body.Code, body.Message, c.status, c.code, c.message)
		}
		if errs.CodeOf(c.err) != c.code && c.code != errs.Internal && c.code != errs.TooLarge {
			t.Errorf("CodeOf(%v) = %q, want %q", c.err, errs.CodeOf(c.err), c.code)
		}
	}
	if _, body := statusOf(errors.New("secret dsn")); body.Detail != "the server log has the details" {
		t.Errorf("an internal error's detail is %q", body.Detail)
	}
}
