package reconcile

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/hangar-dev/hangar/internal/protocol"
)

// A huge value an agent sent is not echoed whole in the error (it would reach the 400 answer and
// the logs): at most 64 bytes of it, and its length.
func TestValidateClipsEchoedValues(t *testing.T) {
	huge := strings.Repeat("é", 1<<20) // 2 MiB, cut on a rune boundary
	err := Validate(protocol.ReconcileRequest{UpdateType: protocol.UpdateType(huge), WorkspaceAgentInfos: []protocol.WorkspaceAgentInfo{{Name: huge, Namespace: "ns"}}})
	if err == nil {
		t.Fatal("a huge update type and name were accepted")
	}
	msg := err.Error()
	if len(msg) > 2048 || !strings.Contains(msg, "(2097152 bytes)") || !utf8.ValidString(msg) {
		t.Fatalf("error of %d bytes, want a short one naming the length: %.300s", len(msg), msg)
	}
}
