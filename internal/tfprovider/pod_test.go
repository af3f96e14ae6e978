package tfprovider

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/types"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func goodPod() podModel {
	return podModel{
		Kubeconfig: types.StringValue("k"), Namespace: types.StringValue("ns"), Name: types.StringValue("hangar-ws"),
		Image: types.StringValue(PodDefaultImage), InitScript: types.StringValue(InitScript(Helper{ConnectURL: "http://h:1", Token: "hwa_secret"})), RunAsUser: types.Int64Value(podUID),
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

// The kubeconfig is a workspace parameter (any user's), and the provider runs on the provisioner:
// a credential plugin must not run the user's command there, and a path must not read a file of
// the provisioner's and send it to the user's server. Inline credentials are fine.
func TestPodClientRefusesPluginsAndPaths(t *testing.T) {
	dir := t.TempDir()
	secretFile := filepath.Join(dir, "provisioner-secret")
	if err := os.WriteFile(secretFile, []byte("provisioner-secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	marker := filepath.Join(dir, "ran")
	var mu sync.Mutex
	var seen []string
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.Header.Get("Authorization"))
		mu.Unlock()
		http.NotFound(w, r)
	}))
	defer srv.Close()
	kubeconfig := func(cluster, user string) string {
		return "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: " + srv.URL + "\n" + cluster +
			"users:\n- name: u\n  user:\n" + user +
			"contexts:\n- name: x\n  context: {cluster: c, user: u}\ncurrent-context: x\n"
	}
	const tls = "    insecure-skip-tls-verify: true\n"
	for _, tc := range []struct{ name, cluster, user, want string }{
		{"exec", tls, "    exec:\n      apiVersion: client.authentication.k8s.io/v1\n      interactiveMode: Never\n      command: /bin/sh\n      args: [-c, 'touch " + marker + "; echo {\"apiVersion\":\"client.authentication.k8s.io/v1\",\"kind\":\"ExecCredential\",\"status\":{\"token\":\"x\"}}']\n", "exec credential plugins are not allowed"},
		{"tokenFile", tls, "    tokenFile: " + secretFile + "\n", "tokenFile is not allowed"},
		{"client-key", tls, "    client-certificate: " + secretFile + "\n    client-key: " + secretFile + "\n", "client-key paths are not allowed"},
		{"certificate-authority", "    certificate-authority: " + secretFile + "\n", "    token: t\n", "certificate-authority path is not allowed"},
		{"auth-provider", tls, "    auth-provider:\n      name: oidc\n      config: {idp-issuer-url: " + srv.URL + "}\n", "auth-provider plugins are not allowed"},
	} {
		c, err := podClient(kubeconfig(tc.cluster, tc.user))
		if err == nil {
			_, _ = c.CoreV1().Pods("ns").Get(context.Background(), "p", metav1.GetOptions{})
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: want an error saying %q, got %v", tc.name, tc.want, err)
		}
	}
	if _, err := os.Stat(marker); err == nil {
		t.Errorf("the kubeconfig's exec plugin ran on the provisioner")
	}
	mu.Lock()
	for _, a := range seen {
		if strings.Contains(a, "provisioner-secret") {
			t.Errorf("the provisioner's file was sent to the kubeconfig's server: %q", a)
		}
	}
	mu.Unlock()
	// An inline token (what scripts/kube-up writes) is fine.
	if _, err := podClient(kubeconfig(tls, "    token: t\n")); err != nil {
		t.Errorf("an inline token: %v", err)
	}
}
