package tfprovider

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/int64default"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/int64planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringdefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/types"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// podResource is hangar_kubernetes_pod: a machine for a Terraform workspace, made of one pod on a
// Kubernetes cluster that runs a hangar_agent init script as its only process. Hashicorp's
// Kubernetes provider cannot be installed here (no registry; its releases are not on the Go module
// proxy), so Hangar's own provider, which already links client-go for the agent, offers this one
// resource (docs/decisions.md, "A Terraform starter whose machine runs the helper"). The init
// script (it holds the helper's token) goes into a Secret the pod mounts, never into the pod's
// spec, which more people may read.
type podResource struct{}

// PodDefaultImage is the image hangar_kubernetes_pod runs by default: the local cluster's
// preloaded image with the hangar binary on PATH (scripts/kube-up).
const PodDefaultImage = "hangar.local/hangar:dev"

// podUID is the user the machine's process runs as (not root), as Kubernetes workspaces do.
const podUID = 5001

// podReadyTimeout bounds how long a create waits for the pod to run.
const podReadyTimeout = 3 * time.Minute

type podModel struct {
	ID         types.String `tfsdk:"id"`
	Kubeconfig types.String `tfsdk:"kubeconfig"`
	Namespace  types.String `tfsdk:"namespace"`
	Name       types.String `tfsdk:"name"`
	Image      types.String `tfsdk:"image"`
	InitScript types.String `tfsdk:"init_script"`
	RunAsUser  types.Int64  `tfsdk:"run_as_user"`
	UID        types.String `tfsdk:"uid"`
}

func (r *podResource) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_kubernetes_pod"
}

func (r *podResource) Schema(_ context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	replace := []planmodifier.String{stringplanmodifier.RequiresReplace()}
	keep := []planmodifier.String{stringplanmodifier.UseStateForUnknown()}
	resp.Schema = schema.Schema{
		Description: "A workspace's machine as one pod on a Kubernetes cluster: it runs init_script (a hangar_agent's) as its process, as run_as_user, with the script in a Secret. Create waits until the pod runs; delete waits until it is gone. Use count = start_count so that stopping the workspace removes it.",
		Attributes: map[string]schema.Attribute{
			"id":         schema.StringAttribute{Computed: true, PlanModifiers: keep, Description: "namespace/name."},
			"kubeconfig": schema.StringAttribute{Required: true, Sensitive: true, PlanModifiers: replace, Description: "The content of a kubeconfig (its current context) allowed to create pods and secrets in namespace, its credentials and certificates inline: exec and auth-provider plugins and file paths (tokenFile, client-key, ...) are refused, as the provider runs on the provisioner."},
			"namespace":  schema.StringAttribute{Required: true, PlanModifiers: replace, Description: "The namespace of the pod and its Secret (it must exist)."},
			"name":       schema.StringAttribute{Required: true, PlanModifiers: replace, Description: "The pod's name (a DNS label); the Secret is <name>-init."},
			"image": schema.StringAttribute{Optional: true, Computed: true, Default: stringdefault.StaticString(PodDefaultImage), PlanModifiers: replace,
				Description: "The container image; it must have /bin/sh and hangar on PATH (or set hangar_binary on the hangar_agent). Default " + PodDefaultImage + ", which the local cluster preloads."},
			"init_script": schema.StringAttribute{Required: true, Sensitive: true, PlanModifiers: replace, Description: "The script the pod runs: hangar_agent's init_script."},
			"run_as_user": schema.Int64Attribute{Optional: true, Computed: true, Default: int64default.StaticInt64(podUID),
				PlanModifiers: []planmodifier.Int64{int64planmodifier.RequiresReplace()}, Description: "The user (and group) id of the pod's process; not 0."},
			"uid": schema.StringAttribute{Computed: true, PlanModifiers: keep, Description: "The pod's Kubernetes uid."},
		},
	}
}

// podClient is the clientset for a kubeconfig's content.
func podClient(kubeconfig string) (kubernetes.Interface, error) {
	raw, err := clientcmd.Load([]byte(kubeconfig))
	if err != nil {
		return nil, fmt.Errorf("kubeconfig: %w", err)
	}
	if err := inlineOnly(raw); err != nil {
		return nil, fmt.Errorf("kubeconfig: %w", err)
	}
	cfg, err := clientcmd.NewDefaultClientConfig(*raw, &clientcmd.ConfigOverrides{}).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("kubeconfig: %w", err)
	}
	cfg.Timeout = 30 * time.Second
	return kubernetes.NewForConfig(cfg)
}

// inlineOnly refuses a kubeconfig that would make the provider run a program or read a file:
// its content is a workspace parameter, which any user creating a workspace gives, while the
// provider runs on the provisioner. A credential plugin (exec, auth-provider) would run the
// user's command there, and a path (client-certificate, client-key, tokenFile,
// certificate-authority) would read a file of the provisioner's and, for a token, send it to the
// user's server. Credentials and certificates must be inline (…-data, token).
func inlineOnly(c *clientcmdapi.Config) error {
	for name, a := range c.AuthInfos {
		switch {
		case a.Exec != nil:
			return fmt.Errorf("user %q: exec credential plugins are not allowed (give a token or client-certificate-data)", name)
		case a.AuthProvider != nil:
			return fmt.Errorf("user %q: auth-provider plugins are not allowed (give a token or client-certificate-data)", name)
		case a.TokenFile != "":
			return fmt.Errorf("user %q: tokenFile is not allowed (give the token inline)", name)
		case a.ClientCertificate != "" || a.ClientKey != "":
			return fmt.Errorf("user %q: client-certificate and client-key paths are not allowed (give client-certificate-data and client-key-data)", name)
		}
	}
	for name, cl := range c.Clusters {
		if cl.CertificateAuthority != "" {
			return fmt.Errorf("cluster %q: a certificate-authority path is not allowed (give certificate-authority-data)", name)
		}
	}
	return nil
}

// checkPod names the first bad attribute of m.
func checkPod(m podModel) (string, error) {
	if errs := validation.IsDNS1123Label(m.Namespace.ValueString()); len(errs) > 0 {
		return "namespace", errors.New(strings.Join(errs, "; "))
	}
	// The Secret's name adds "-init" to the pod's: both must be labels.
	if errs := validation.IsDNS1123Label(m.Name.ValueString() + "-init"); len(errs) > 0 {
		return "name", fmt.Errorf("%q: %s", m.Name.ValueString(), strings.Join(errs, "; "))
	}
	if m.Image.ValueString() == "" {
		return "image", errors.New("must not be empty")
	}
	if m.InitScript.ValueString() == "" {
		return "init_script", errors.New("must not be empty (give hangar_agent.NAME.init_script)")
	}
	if u := m.RunAsUser.ValueInt64(); u <= 0 || u >= 1<<31 {
		return "run_as_user", fmt.Errorf("must be a user id above 0 (not root) and below 2^31, got %d", u)
	}
	return "", nil
}

// podLabel marks the objects hangar_kubernetes_pod creates.
const podLabel = "app.kubernetes.io/managed-by"

// podObjects are the Secret holding the init script and the pod running it.
func podObjects(m podModel) (*corev1.Secret, *corev1.Pod) {
	ns, name := m.Namespace.ValueString(), m.Name.ValueString()
	labels := map[string]string{podLabel: "hangar-terraform"}
	uid := m.RunAsUser.ValueInt64()
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: name + "-init", Namespace: ns, Labels: labels},
		Data:       map[string][]byte{"init.sh": []byte(m.InitScript.ValueString())},
	}
	mode, grace, no := int32(0o440), int64(5), false
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: labels},
		Spec: corev1.PodSpec{
			RestartPolicy:                 corev1.RestartPolicyAlways,
			TerminationGracePeriodSeconds: &grace,
			AutomountServiceAccountToken:  &no,
			SecurityContext:               &corev1.PodSecurityContext{RunAsUser: &uid, RunAsGroup: &uid, FSGroup: &uid, RunAsNonRoot: func() *bool { t := true; return &t }()},
			Containers: []corev1.Container{{
				Name: "dev", Image: m.Image.ValueString(), ImagePullPolicy: corev1.PullIfNotPresent,
				Command:    []string{"/bin/sh", "/hangar/init.sh"},
				Env:        []corev1.EnvVar{{Name: "HOME", Value: "/home/dev"}},
				WorkingDir: "/home/dev",
				VolumeMounts: []corev1.VolumeMount{
					{Name: "init", MountPath: "/hangar", ReadOnly: true},
					{Name: "home", MountPath: "/home/dev"},
				},
			}},
			Volumes: []corev1.Volume{
				{Name: "init", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: secret.Name, DefaultMode: &mode}}},
				{Name: "home", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
			},
		},
	}
	return secret, pod
}

func (r *podResource) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	var m podModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	if field, err := checkPod(m); err != nil {
		resp.Diagnostics.AddAttributeError(path.Root(field), "bad "+field, field+": "+err.Error())
		return
	}
	c, err := podClient(m.Kubeconfig.ValueString())
	if err != nil {
		resp.Diagnostics.AddAttributeError(path.Root("kubeconfig"), "bad kubeconfig", err.Error())
		return
	}
	uid, err := createPod(ctx, c, m)
	if err != nil {
		resp.Diagnostics.AddError("hangar_kubernetes_pod "+m.Namespace.ValueString()+"/"+m.Name.ValueString(), err.Error())
		return
	}
	m.ID = types.StringValue(m.Namespace.ValueString() + "/" + m.Name.ValueString())
	m.UID = types.StringValue(uid)
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
}

// createPod creates the Secret and the pod, and waits until the pod runs. On failure it removes
// what it created, so that nothing is left that the state does not hold.
func createPod(ctx context.Context, c kubernetes.Interface, m podModel) (string, error) {
	secret, pod := podObjects(m)
	if _, err := c.CoreV1().Secrets(secret.Namespace).Create(ctx, secret, metav1.CreateOptions{}); err != nil {
		return "", fmt.Errorf("create the secret %s: %w", secret.Name, err)
	}
	created, err := c.CoreV1().Pods(pod.Namespace).Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		_ = c.CoreV1().Secrets(secret.Namespace).Delete(context.WithoutCancel(ctx), secret.Name, metav1.DeleteOptions{})
		return "", fmt.Errorf("create the pod: %w", err)
	}
	if err := waitRunning(ctx, c, pod.Namespace, pod.Name); err != nil {
		_ = deletePod(context.WithoutCancel(ctx), c, pod.Namespace, pod.Name)
		return "", err
	}
	return string(created.UID), nil
}

// waitRunning waits until the pod's container runs, and fails at once when it cannot (an image
// that is not on the node, a container that keeps exiting).
func waitRunning(ctx context.Context, c kubernetes.Interface, ns, name string) error {
	ctx, cancel := context.WithTimeout(ctx, podReadyTimeout)
	defer cancel()
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	last := "not scheduled yet"
	for {
		p, err := c.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err == nil {
			if p.Status.Phase == corev1.PodRunning {
				return nil
			}
			last = string(p.Status.Phase)
			for _, s := range p.Status.ContainerStatuses {
				if w := s.State.Waiting; w != nil && w.Reason != "" && w.Reason != "ContainerCreating" {
					switch w.Reason {
					case "ErrImagePull", "ImagePullBackOff", "ErrImageNeverPull", "InvalidImageName", "CrashLoopBackOff", "CreateContainerConfigError":
						return fmt.Errorf("the pod cannot run: %s: %s", w.Reason, w.Message)
					}
					last = w.Reason + ": " + w.Message
				}
			}
		} else if !apierrors.IsNotFound(err) && ctx.Err() == nil {
			last = err.Error()
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("the pod did not run within %s (last: %s)", podReadyTimeout, last)
		case <-tick.C:
		}
	}
}

// Read forgets the pod when it is gone (deleted by hand, its namespace removed): the next apply
// creates it again.
func (r *podResource) Read(ctx context.Context, req resource.ReadRequest, resp *resource.ReadResponse) {
	var m podModel
	resp.Diagnostics.Append(req.State.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	c, err := podClient(m.Kubeconfig.ValueString())
	if err != nil {
		resp.Diagnostics.AddAttributeError(path.Root("kubeconfig"), "bad kubeconfig", err.Error())
		return
	}
	p, err := c.CoreV1().Pods(m.Namespace.ValueString()).Get(ctx, m.Name.ValueString(), metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err) || (err == nil && string(p.UID) != m.UID.ValueString()):
		resp.State.RemoveResource(ctx)
	case err != nil:
		resp.Diagnostics.AddError("read the pod "+m.ID.ValueString(), err.Error())
	}
}

// Update is never called: every attribute replaces the pod.
func (r *podResource) Update(ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	var m podModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &m)...)
	if !resp.Diagnostics.HasError() {
		resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
	}
}

func (r *podResource) Delete(ctx context.Context, req resource.DeleteRequest, resp *resource.DeleteResponse) {
	var m podModel
	resp.Diagnostics.Append(req.State.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	c, err := podClient(m.Kubeconfig.ValueString())
	if err != nil {
		resp.Diagnostics.AddAttributeError(path.Root("kubeconfig"), "bad kubeconfig", err.Error())
		return
	}
	if err := deletePod(ctx, c, m.Namespace.ValueString(), m.Name.ValueString()); err != nil {
		resp.Diagnostics.AddError("delete the pod "+m.ID.ValueString(), err.Error())
	}
}

// deletePod deletes the pod and its Secret and waits until the pod is gone (its process ended).
func deletePod(ctx context.Context, c kubernetes.Interface, ns, name string) error {
	if err := c.CoreV1().Pods(ns).Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	if err := c.CoreV1().Secrets(ns).Delete(ctx, name+"-init", metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, podReadyTimeout)
	defer cancel()
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	for {
		_, err := c.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("the pod %s/%s is still there after %s", ns, name, podReadyTimeout)
		case <-tick.C:
		}
	}
}
