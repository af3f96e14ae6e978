package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/hangar-dev/hangar/internal/testutil/kubetest"
)

// denyDeploymentsOf installs a ValidatingAdmissionPolicy that refuses the Deployment of the named
// workspace with message, and waits until the API server enforces it.
func denyDeploymentsOf(t *testing.T, c *kubetest.Cluster, workspace, message string) {
	t.Helper()
	ctx := context.Background()
	name := "deny-" + workspace
	fail := admissionv1.Fail
	policy := &admissionv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: &fail,
			MatchConstraints: &admissionv1.MatchResources{ResourceRules: []admissionv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionv1.RuleWithOperations{
					Operations: []admissionv1.OperationType{admissionv1.Create, admissionv1.Update},
					Rule:       admissionv1.Rule{APIGroups: []string{"apps"}, APIVersions: []string{"v1"}, Resources: []string{"deployments"}},
				},
			}}},
			Validations: []admissionv1.Validation{{
				// The label holds the cluster name: the workspace name, or (for a workspace created
				// since names are per owner) the name, '-' and the id in base 36.
				Expression: fmt.Sprintf(`!has(object.metadata.labels) || !('hangar.dev/workspace-name' in object.metadata.labels) || (object.metadata.labels['hangar.dev/workspace-name'] != %q && !object.metadata.labels['hangar.dev/workspace-name'].startsWith(%q))`, workspace, workspace+"-"),
				Message:    message,
			}},
		},
	}
	if _, err := c.Client.AdmissionregistrationV1().ValidatingAdmissionPolicies().Create(ctx, policy, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	binding := &admissionv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       admissionv1.ValidatingAdmissionPolicyBindingSpec{PolicyName: name, ValidationActions: []admissionv1.ValidationAction{admissionv1.Deny}},
	}
	if _, err := c.Client.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = c.Client.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Delete(context.Background(), name, metav1.DeleteOptions{})
		_ = c.Client.AdmissionregistrationV1().ValidatingAdmissionPolicies().Delete(context.Background(), name, metav1.DeleteOptions{})
	})
	ns := c.Namespace(t, "policy-probe")
	one := int32(1)
	probe := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "probe", Labels: map[string]string{"hangar.dev/workspace-name": workspace}},
		Spec: appsv1.DeploymentSpec{
			Replicas: &one,
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "probe"}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "probe"}},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "x"}}},
			},
		},
	}
	kubetest.Eventually(t, 30*time.Second, "the admission policy to be enforced", func(ctx context.Context) error {
		_, err := c.Client.AppsV1().Deployments(ns).Create(ctx, probe, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if err != nil && strings.Contains(err.Error(), message) {
			return nil
		}
		return fmt.Errorf("a probe Deployment was not refused (%v)", err)
	})
}
