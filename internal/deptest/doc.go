// Package deptest holds the test that enforces Hangar's import rules (docs/architecture.md,
// "Import rules"), in the style of tailscale's tstest/deptest: it reads the packages' dependencies
// with `go list -deps -json` and fails naming the import chain that breaks a rule.
package deptest
