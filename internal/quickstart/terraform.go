//go:build !windows

package quickstart

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/hangar-dev/hangar/internal/sdk"
	"github.com/hangar-dev/hangar/internal/starters"
	"github.com/hangar-dev/hangar/internal/tfmodule"
)

// terraformStarter is the starter the quick start's Terraform template is made from.
const terraformStarter = "terraform-kubernetes-pod"

// kubeconfigVariable is the starter's variable declaration the quick start gives a default.
const kubeconfigVariable = "variable \"kubeconfig\" {\n"

// terraformModule is the Terraform starter as the quick start pushes it: its kubeconfig variable
// defaults to the local cluster's kubeconfig, so that `hangar create NAME --template
// terraform-pod` needs no parameter. The kubeconfig is the local cluster's admin one, readable by
// whoever may pull the template: the quick start is one machine and its admin. The archive is
// tfmodule.Pack's, the same for the same files, so that a second run finds it pushed already.
func terraformModule(kubeconfig []byte) ([]byte, error) {
	s, err := starters.Get(terraformStarter)
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "hangar-quickstart-module-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	if _, err := s.Write(dir); err != nil {
		return nil, err
	}
	main := filepath.Join(dir, "main.tf")
	src, err := os.ReadFile(main)
	if err != nil {
		return nil, err
	}
	if bytes.Count(src, []byte(kubeconfigVariable)) != 1 {
		return nil, fmt.Errorf("the starter %s declares no %q at the start of a line", terraformStarter, strings.TrimSpace(kubeconfigVariable))
	}
	withDefault := bytes.Replace(src, []byte(kubeconfigVariable), []byte(kubeconfigVariable+"  default     = "+hclString(string(kubeconfig))+"\n"), 1)
	if err := os.WriteFile(main, withDefault, 0o644); err != nil {
		return nil, err
	}
	return tfmodule.Pack(dir)
}

// hclString is s as an HCL quoted string: JSON's escapes (HCL has the same), and the template
// sequences ${ and %{ escaped as $${ and %%{ so that s is taken literally.
func hclString(s string) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s) // a string always encodes
	q := strings.TrimSuffix(b.String(), "\n")
	q = strings.ReplaceAll(q, "${", "$${")
	return strings.ReplaceAll(q, "%{", "%%{")
}

// ensureTerraformTemplate pushes the Terraform starter with the cluster's kubeconfig as the
// template terraform-pod, unless its active version is that already (a cluster started again
// may have a new kubeconfig: then a new version is pushed and made active).
func ensureTerraformTemplate(ctx context.Context, admin *sdk.Client, kubeconfigFile string) error {
	kc, err := os.ReadFile(kubeconfigFile)
	if err != nil {
		return fmt.Errorf("the local cluster's kubeconfig: %w", err)
	}
	archive, err := terraformModule(kc)
	if err != nil {
		return err
	}
	if _, err := admin.Template(ctx, TerraformTemplateName); err == nil {
		b, _, err := admin.PullTemplateVersion(ctx, TerraformTemplateName, 0)
		if err == nil && bytes.Equal(b, archive) {
			return nil
		}
	} else if !isNotFound(err) {
		return fmt.Errorf("template %s: %w", TerraformTemplateName, err)
	}
	if _, err := admin.PushTemplateVersion(ctx, TerraformTemplateName, sdk.CreateTemplateVersionRequest{Kind: "terraform", Archive: archive}); err != nil {
		return fmt.Errorf("push the Terraform starter as the template %s: %w", TerraformTemplateName, err)
	}
	return nil
}
