//go:build !windows

package quickstart

import (
	"bytes"
	"testing"

	"github.com/hangar-dev/hangar/internal/tfmodule"
)

// TestTerraformModule: the Terraform starter as the quick start pushes it declares the kubeconfig
// variable with the local cluster's kubeconfig as its default, taken literally (quotes, newlines,
// backslashes and Terraform's template sequences stay as they are), still sensitive; the other
// variables are the starter's; the same kubeconfig gives the same archive (a second run pushes
// nothing).
func TestTerraformModule(t *testing.T) {
	kc := "apiVersion: v1\nclusters:\n- cluster:\n    server: \"https://127.0.0.1:6443\"\n  name: ${not.a.reference} %{ if x } \\ <&> \t\n"
	archive, err := terraformModule([]byte(kc))
	if err != nil {
		t.Fatal(err)
	}
	m, err := tfmodule.Inspect(archive)
	if err != nil {
		t.Fatalf("the pushed module does not inspect: %v", err)
	}
	seen := map[string]bool{}
	for _, v := range m.Declared {
		seen[v.Name] = true
		if v.Name != "kubeconfig" {
			continue
		}
		if !v.HasDefault || v.Default != kc {
			t.Errorf("kubeconfig's default: has %v, %q; want the kubeconfig %q", v.HasDefault, v.Default, kc)
		}
		if !v.Sensitive {
			t.Error("kubeconfig is no longer sensitive")
		}
	}
	for _, n := range []string{"kubeconfig", "namespace", "image"} {
		if !seen[n] {
			t.Errorf("the module lacks the starter's variable %s (it has %v)", n, seen)
		}
	}
	again, err := terraformModule([]byte(kc))
	if err != nil || !bytes.Equal(again, archive) {
		t.Errorf("the same kubeconfig packs differently (%v): a second run would push a new version", err)
	}
	other, err := terraformModule([]byte(kc + "# another cluster\n"))
	if err != nil || bytes.Equal(other, archive) {
		t.Errorf("another kubeconfig packs the same (%v): a cluster started again would keep the old one", err)
	}
}
