package tfprovider

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/types"
)

func goodPod() podModel {
	return podModel{
		Kubeconfig: types.StringValue("k"), Namespace: types.StringValue("ns"), Name: types.StringValue("hangar-ws"),
		Image: types.StringValue(PodDefaultImage), InitScript: types.StringValue(InitScript("", "http://h:1", "hwa_secret", "")), RunAsUser: types.Int64Value(podUID),
	}
}

// The init script (it holds the helper's token) is in the Secret only; the pod runs it, not as
// root, with a writable home.
func TestPodObjectsKeepTheTokenInTheSecret(t *testing.T) {
	secret, pod := podObjects(goodPod())
	if string(secret.Data["init.sh"]) != goodPod().InitScript.ValueString() || secret.Name != "hangar-ws-init" || secret.Namespace != "ns" {
		t.Fatalf("secret %s/%s holds %q", secret.Namespace, secret.Name, secret.Data["init.sh"])
	}
	b, err := json.Marshal(pod)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), "hwa_secret") {
		t.Fatalf("the pod's spec holds the token: %s", b)
	}
	c := pod.Spec.Containers[0]
	if strings.Join(c.Command, " ") != "/bin/sh /hangar/init.sh" || *pod.Spec.SecurityContext.RunAsUser != podUID || c.Env[0].Value != "/home/dev" || pod.Spec.Volumes[0].Secret.SecretName != secret.Name {
		t.Fatalf("pod: %s", b)
	}
}

func TestCheckPodNamesTheField(t *testing.T) {
	for _, tc := range []struct {
		edit  func(*podModel)
		field string
	}{
		{func(m *podModel) { m.Namespace = types.StringValue("Bad_NS") }, "namespace"},
		{func(m *podModel) { m.Name = types.StringValue("x." + strings.Repeat("a", 10)) }, "name"},
		{func(m *podModel) { m.Name = types.StringValue(strings.Repeat("a", 60)) }, "name"}, // + "-init" is over 63
		{func(m *podModel) { m.Image = types.StringValue("") }, "image"},
		{func(m *podModel) { m.InitScript = types.StringValue("") }, "init_script"},
		{func(m *podModel) { m.RunAsUser = types.Int64Value(0) }, "run_as_user"},
	} {
		m := goodPod()
		tc.edit(&m)
		if field, err := checkPod(m); field != tc.field || err == nil {
			t.Errorf("want an error on %s, got %q %v", tc.field, field, err)
		}
	}
	if field, err := checkPod(goodPod()); err != nil {
		t.Errorf("a good pod: %s %v", field, err)
	}
}
