package terraform

import (
	"os"
	"testing"

	"github.com/hangar-dev/hangar/internal/tfprovider"
)

// TestMain serves Hangar's provider when terraform runs this test binary as the provider (the
// tests' mirror offers it, as the hangar executable is offered in production).
func TestMain(m *testing.M) {
	if tfprovider.IsPlugin() {
		os.Exit(tfprovider.Serve())
	}
	os.Exit(m.Run())
}
