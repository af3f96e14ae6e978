package server

import "github.com/hangar-dev/hangar/internal/errs"

// StatusOfCode is the HTTP status the one table gives an error code (0: no such code), for the
// tests of package server_test that check answers carry the code of their status.
func StatusOfCode(code string) int { return httpStatus[errs.Code(code)] }
