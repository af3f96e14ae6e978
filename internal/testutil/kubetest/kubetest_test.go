package kubetest_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/hangar-dev/hangar/internal/testutil/kubetest"
)

func TestMain(m *testing.M) { kubetest.Main(m) }

// kwokDeployment is a one-replica Deployment for the simulated node (it tolerates its taint and
// selects it).
func kwokDeployment(name string, podLabels map[string]string, progressDeadline int32) *appsv1.Deployment {
	d := deployment(name, podLabels, corev1.Container{Name: "main", Image: "registry.k8s.io/pause:3.10"})
	d.Spec.Template.Spec.NodeSelector = map[string]string{"type": "kwok"}
	d.Spec.Template.Spec.Tolerations = []corev1.Toleration{{Key: kubetest.KwokTaint, Operator: corev1.TolerationOpExists}}
	if progressDeadline > 0 {
		d.Spec.ProgressDeadlineSeconds = &progressDeadline
	}
	return d
}

func deployment(name string, podLabels map[string]string, c corev1.Container) *appsv1.Deployment {
	one := int32(1)
	selector := map[string]string{"app": name}
	labels := map[string]string{"app": name}
	for k, v := range podLabels {
		labels[k] = v
	}
	var zero int64
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: appsv1.DeploymentSpec{
			Replicas: &one,
			Selector: &metav1.LabelSelector{MatchLabels: selector},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{c}, TerminationGracePeriodSeconds: &zero},
			},
		},
	}
}

func condition(d *appsv1.Deployment, typ appsv1.DeploymentConditionType) *appsv1.DeploymentCondition {
	for i := range d.Status.Conditions {
		if d.Status.Conditions[i].Type == typ {
			return &d.Status.Conditions[i]
		}
	}
	return nil
}

// The simulated node runs Deployments at once and shows crash loops for pods that ask for one.
func TestKwokNodeRunsDeploymentsAndCrashLoops(t *testing.T) {
	c := kubetest.Start(t)
	ctx := context.Background()
	ns := c.Namespace(t, "kubetest")
	deployments := c.Client.AppsV1().Deployments(ns)

	// A healthy Deployment becomes available.
	start := time.Now()
	if _, err := deployments.Create(ctx, kwokDeployment("web", nil, 0), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	kubetest.Eventually(t, 60*time.Second, "web to have availableReplicas 1", func(ctx context.Context) error {
		d, err := deployments.Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if d.Status.AvailableReplicas != 1 {
			return fmt.Errorf("availableReplicas %d, conditions %+v", d.Status.AvailableReplicas, d.Status.Conditions)
		}
		return nil
	})
	t.Logf("web available %v after creation", time.Since(start).Round(time.Millisecond))

	// A crash-looping one: its pod shows CrashLoopBackOff, and the Deployment passes its
	// progress deadline.
	start = time.Now()
	crash := kwokDeployment("crash", map[string]string{kubetest.CrashLoopLabel: "true"}, 5)
	if _, err := deployments.Create(ctx, crash, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	kubetest.Eventually(t, 60*time.Second, "crash's pod to show CrashLoopBackOff", func(ctx context.Context) error {
		pods, err := c.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=crash"})
		if err != nil {
			return err
		}
		if len(pods.Items) != 1 {
			return fmt.Errorf("%d pods", len(pods.Items))
		}
		p := pods.Items[0]
		if len(p.Status.ContainerStatuses) != 1 {
			return fmt.Errorf("pod %s: phase %s, container statuses %+v", p.Name, p.Status.Phase, p.Status.ContainerStatuses)
		}
		cs := p.Status.ContainerStatuses[0]
		if cs.State.Waiting == nil || cs.State.Waiting.Reason != "CrashLoopBackOff" {
			return fmt.Errorf("pod %s: container state %+v", p.Name, cs.State)
		}
		if p.Status.Phase != corev1.PodRunning || cs.Ready {
			return fmt.Errorf("pod %s: phase %s, ready %v; want Running and not ready", p.Name, p.Status.Phase, cs.Ready)
		}
		return nil
	})
	t.Logf("crash's pod in CrashLoopBackOff %v after creation", time.Since(start).Round(time.Millisecond))
	kubetest.Eventually(t, 60*time.Second, "crash to report ProgressDeadlineExceeded", func(ctx context.Context) error {
		d, err := deployments.Get(ctx, "crash", metav1.GetOptions{})
		if err != nil {
			return err
		}
		p := condition(d, appsv1.DeploymentProgressing)
		if p == nil || p.Status != corev1.ConditionFalse || p.Reason != "ProgressDeadlineExceeded" {
			return fmt.Errorf("conditions %+v", d.Status.Conditions)
		}
		if a := condition(d, appsv1.DeploymentAvailable); a == nil || a.Status != corev1.ConditionFalse {
			return fmt.Errorf("Available condition %+v, want False", a)
		}
		if d.Status.AvailableReplicas != 0 {
			return fmt.Errorf("availableReplicas %d, want 0", d.Status.AvailableReplicas)
		}
		return nil
	})
	t.Logf("crash ProgressDeadlineExceeded %v after creation", time.Since(start).Round(time.Millisecond))
}

func TestStartIsOncePerBinary(t *testing.T) {
	if a, b := kubetest.Start(t), kubetest.Start(t); a != b {
		t.Fatalf("Start returned two clusters: %s and %s", a.Kubeconfig, b.Kubeconfig)
	}
}

// The real node runs containers of the preloaded images: a pod's process answers kubectl exec, pods
// reach each other over the pod network, a volume of the default storage class keeps data and goes
// with its claim, a crashing container shows CrashLoopBackOff, and a missing image fails to pull.
func TestRealNode(t *testing.T) {
	c := kubetest.Start(t)
	ctx := context.Background()
	ns := c.Namespace(t, "realnode")
	pods := c.Client.CoreV1().Pods(ns)

	claim := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "data"},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
		},
	}
	if _, err := c.Client.CoreV1().PersistentVolumeClaims(ns).Create(ctx, claim, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	web := deployment("web", nil, corev1.Container{
		Name: "web", Image: kubetest.WorkspaceImage, ImagePullPolicy: corev1.PullIfNotPresent,
		Command: []string{"/bin/sh", "-c", "echo hello from $HOSTNAME > /data/index.html && exec httpd -f -p 8080 -h /data"},
		SecurityContext: &corev1.SecurityContext{
			RunAsUser: ptr(int64(5001)), RunAsNonRoot: ptr(true), AllowPrivilegeEscalation: ptr(false),
		},
		VolumeMounts: []corev1.VolumeMount{{Name: "data", MountPath: "/data"}},
		ReadinessProbe: &corev1.Probe{
			ProbeHandler:  corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(8080)}},
			PeriodSeconds: 1,
		},
	})
	web.Spec.Template.Spec.Volumes = []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{
		PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data"},
	}}}
	crash := deployment("crash", nil, corev1.Container{
		Name: "main", Image: kubetest.WorkspaceImage, ImagePullPolicy: corev1.PullIfNotPresent,
		Command: []string{"/bin/sh", "-c", "echo bye; exit 3"},
	})
	missing := deployment("missing", nil, corev1.Container{
		Name: "main", Image: "hangar.local/no-such-image:dev", ImagePullPolicy: corev1.PullIfNotPresent,
	})
	for _, d := range []*appsv1.Deployment{web, crash, missing} {
		if _, err := c.Client.AppsV1().Deployments(ns).Create(ctx, d, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	webPod := waitPod(t, c, ns, "web", func(p *corev1.Pod) error {
		if p.Spec.NodeName != kubetest.RealNode {
			return fmt.Errorf("on node %q, want %s", p.Spec.NodeName, kubetest.RealNode)
		}
		for _, cond := range p.Status.Conditions {
			if cond.Type == corev1.PodReady && cond.Status == corev1.ConditionTrue {
				return nil
			}
		}
		return fmt.Errorf("phase %s, not ready: %+v", p.Status.Phase, p.Status.ContainerStatuses)
	})
	if ip := net.ParseIP(webPod.Status.PodIP); ip == nil || !podNet.Contains(ip) {
		t.Errorf("pod IP %q is not in the node's pod network %v", webPod.Status.PodIP, podNet)
	}

	// kubectl exec reaches the container: its main process is httpd, running as the user asked.
	out, errOut, err := c.Exec(ctx, ns, webPod.Name, "web", "sh", "-c", "id -u; cat /proc/1/cmdline | tr '\\0' ' '")
	if err != nil {
		t.Fatalf("exec: %v (stderr %q)", err, errOut)
	}
	if want := "5001\nhttpd -f -p 8080 -h /data "; out != want {
		t.Errorf("exec printed %q, want %q", out, want)
	}

	// Another pod fetches the page over the pod network.
	fetch := fmt.Sprintf("wget -q -O - http://%s:8080/index.html", webPod.Status.PodIP)
	client := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "client"},
		Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever,
			Containers: []corev1.Container{{
				Name: "client", Image: kubetest.WorkspaceImage, ImagePullPolicy: corev1.PullIfNotPresent,
				Command: []string{"/bin/sh", "-c", fetch},
			}},
		},
	}
	if _, err := pods.Create(ctx, client, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	kubetest.Eventually(t, 60*time.Second, "the client pod to succeed", func(ctx context.Context) error {
		p, err := pods.Get(ctx, "client", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if p.Status.Phase != corev1.PodSucceeded {
			return fmt.Errorf("phase %s: %+v", p.Status.Phase, p.Status.ContainerStatuses)
		}
		return nil
	})
	logs, err := pods.GetLogs("client", &corev1.PodLogOptions{}).DoRaw(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if want := "hello from " + webPod.Name + "\n"; string(logs) != want {
		t.Errorf("client fetched %q, want %q", logs, want)
	}

	// The volume is a folder on the node, under the cluster's directory.
	pvc, err := c.Client.CoreV1().PersistentVolumeClaims(ns).Get(ctx, "data", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pv, err := c.Client.CoreV1().PersistentVolumes().Get(ctx, pvc.Spec.VolumeName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	folder := pv.Spec.HostPath.Path
	if b, err := os.ReadFile(filepath.Join(folder, "index.html")); err != nil || string(b) != "hello from "+webPod.Name+"\n" {
		t.Errorf("the volume's folder %s holds %q (%v)", folder, b, err)
	}

	waitPod(t, c, ns, "crash", func(p *corev1.Pod) error {
		for _, cs := range p.Status.ContainerStatuses {
			if w := cs.State.Waiting; w != nil && w.Reason == "CrashLoopBackOff" && cs.LastTerminationState.Terminated != nil &&
				cs.LastTerminationState.Terminated.ExitCode == 3 {
				return nil
			}
		}
		return fmt.Errorf("container statuses %+v", p.Status.ContainerStatuses)
	})
	waitPod(t, c, ns, "missing", func(p *corev1.Pod) error {
		for _, cs := range p.Status.ContainerStatuses {
			if w := cs.State.Waiting; w != nil && (w.Reason == "ErrImagePull" || w.Reason == "ImagePullBackOff") {
				return nil
			}
		}
		return fmt.Errorf("container statuses %+v", p.Status.ContainerStatuses)
	})

	// Deleting the claim deletes its volume and the folder.
	if err := c.Client.AppsV1().Deployments(ns).Delete(ctx, "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := c.Client.CoreV1().PersistentVolumeClaims(ns).Delete(ctx, "data", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	kubetest.Eventually(t, 60*time.Second, "volume "+pv.Name+" and its folder to be gone", func(ctx context.Context) error {
		_, err := c.Client.CoreV1().PersistentVolumes().Get(ctx, pv.Name, metav1.GetOptions{})
		if !apierrors.IsNotFound(err) {
			return fmt.Errorf("volume still there (%v)", err)
		}
		if _, err := os.Stat(folder); !os.IsNotExist(err) {
			return fmt.Errorf("folder %s still there (%v)", folder, err)
		}
		return nil
	})
}

var podNet = &net.IPNet{IP: net.IPv4(10, 244, 0, 0), Mask: net.CIDRMask(24, 32)}

func ptr[T any](v T) *T { return &v }

// waitPod waits for the one pod of a Deployment (label app=NAME) to pass check, and returns it.
func waitPod(t *testing.T, c *kubetest.Cluster, ns, app string, check func(*corev1.Pod) error) *corev1.Pod {
	t.Helper()
	var got *corev1.Pod
	kubetest.Eventually(t, 90*time.Second, "pod of "+app, func(ctx context.Context) error {
		pods, err := c.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=" + app})
		if err != nil {
			return err
		}
		if len(pods.Items) != 1 {
			return fmt.Errorf("%d pods", len(pods.Items))
		}
		got = &pods.Items[0]
		return check(got)
	})
	return got
}

// scripts/kube-down leaves nothing of a cluster with a real node behind: no process, mount,
// network namespace, cgroup or iptables rule; only the host's unreachable routes for the cluster's
// ranges stay, and nothing dialed from the host to the stopped cluster's addresses leaves the
// machine. The test runs a cluster of its own for that.
func TestKubeDownLeavesNothing(t *testing.T) {
	root, err := filepath.Abs("../../..")
	if err != nil {
		t.Fatal(err)
	}
	rulesBefore := iptablesRules(t)
	dir := t.TempDir()
	up := exec.Command(filepath.Join(root, "scripts/kube-up"), dir)
	up.Env = append(os.Environ(), "KUBE_UP_WATCH_PID="+strconv.Itoa(os.Getpid()))
	if out, err := up.CombinedOutput(); err != nil {
		t.Fatalf("kube-up: %v\n%s", err, out)
	}
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			_ = exec.Command(filepath.Join(root, "scripts/kube-down"), dir).Run()
		}
	})
	cfg, err := clientcmd.BuildConfigFromFlags("", filepath.Join(dir, "kubeconfig"))
	if err != nil {
		t.Fatal(err)
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	c := &kubetest.Cluster{Kubeconfig: filepath.Join(dir, "kubeconfig"), Client: client, Config: cfg, Dir: dir}
	ctx := context.Background()
	if _, err := client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "left"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	d := deployment("sleeper", nil, corev1.Container{
		Name: "main", Image: kubetest.WorkspaceImage, Command: []string{"sleep", "3600"},
		VolumeMounts: []corev1.VolumeMount{{Name: "scratch", MountPath: "/scratch"}},
	})
	d.Spec.Template.Spec.Volumes = []corev1.Volume{{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory}}}}
	if _, err := client.AppsV1().Deployments("left").Create(ctx, d, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitPod(t, c, "left", "sleeper", func(p *corev1.Pod) error {
		if p.Status.Phase != corev1.PodRunning {
			return fmt.Errorf("phase %s", p.Status.Phase)
		}
		return nil
	})
	pods, err := client.CoreV1().Pods("left").List(ctx, metav1.ListOptions{LabelSelector: "app=sleeper"})
	if err != nil || len(pods.Items) != 1 || pods.Items[0].Status.PodIP == "" {
		t.Fatalf("the sleeper's pod IP: %v %+v", err, pods)
	}
	podIP := pods.Items[0].Status.PodIP
	b, err := os.ReadFile(filepath.Join(dir, "netns"))
	if err != nil {
		t.Fatalf("kube-up wrote no %s/netns: %v", dir, err)
	}
	id := strings.TrimSpace(string(b))
	if _, err := os.Stat(filepath.Join("/run/netns", id)); err != nil {
		t.Fatalf("the cluster's network namespace: %v", err)
	}
	if len(mountsUnder(t, dir)) == 0 {
		t.Fatalf("a running pod made no mount under %s: the check below would prove nothing", dir)
	}

	out, err := exec.Command(filepath.Join(root, "scripts/kube-down"), dir).CombinedOutput()
	stopped = true
	if err != nil {
		t.Fatalf("kube-down: %v\n%s", err, out)
	}
	if m := mountsUnder(t, dir); len(m) > 0 {
		t.Errorf("mounts left under %s: %v", dir, m)
	}
	if p := processesNaming(t, dir); len(p) > 0 {
		t.Errorf("processes left: %v", p)
	}
	if _, err := os.Stat(filepath.Join("/run/netns", id)); !os.IsNotExist(err) {
		t.Errorf("network namespace %s left (%v)", id, err)
	}
	for _, h := range []string{"memory", "cpu", "pids", "unified"} {
		if _, err := os.Stat(filepath.Join("/sys/fs/cgroup", h, id)); !os.IsNotExist(err) {
			t.Errorf("cgroup %s/%s left (%v)", h, id, err)
		}
	}
	if after := iptablesRules(t); after != rulesBefore {
		t.Errorf("the host's iptables rules changed:\nbefore:\n%s\nafter:\n%s", rulesBefore, after)
	}
	// What stays on purpose: the host's unreachable routes for the cluster's ranges, so that the
	// stopped cluster's pod address, one that never existed, a Service and the node address fail
	// at once from the host, and no packet to them reaches the host's default interface.
	neverLeaves(t, net.JoinHostPort(podIP, "80"), "10.244.0.250:80", "10.244.200.1:80", "10.96.0.1:443", kubetest.NodeIP+":10250")
}

// neverLeaves dials each address from the host and checks that the dial fails at once with "no
// route to host" and that no packet to 10.0.0.0/8 went out of the default route's interface
// meanwhile, counted by an iptables rule of the host's OUTPUT chain (which drops what it counts:
// were the routes missing, the dials would still not leave), removed after.
func neverLeaves(t *testing.T, addrs ...string) {
	t.Helper()
	for _, r := range []string{"10.244.0.0/16", "10.96.0.0/16", "10.99.0.0/16"} {
		out, err := exec.Command("ip", "-4", "route", "show", "type", "unreachable", "root", r).Output()
		if err != nil || !strings.Contains(string(out), r) {
			t.Errorf("the host has no unreachable route for %s: %q %v", r, out, err)
		}
	}
	out, err := exec.Command("ip", "-4", "route", "show", "default").Output()
	f := strings.Fields(string(out))
	dev := ""
	for i := range f {
		if f[i] == "dev" && i+1 < len(f) {
			dev = f[i+1]
		}
	}
	if err != nil || dev == "" {
		t.Fatalf("the host's default route: %q %v", out, err)
	}
	comment := "hangar-test-" + strconv.Itoa(os.Getpid())
	rule := []string{"OUTPUT", "-o", dev, "-d", "10.0.0.0/8", "-m", "comment", "--comment", comment, "-j", "DROP"}
	if out, err := exec.Command("iptables", append([]string{"-I"}, rule...)...).CombinedOutput(); err != nil {
		t.Fatalf("iptables -I %v: %v\n%s", rule, err, out)
	}
	defer func() {
		if out, err := exec.Command("iptables", append([]string{"-D"}, rule...)...).CombinedOutput(); err != nil {
			t.Errorf("iptables -D %v: %v\n%s", rule, err, out)
		}
	}()
	for _, addr := range addrs {
		start := time.Now()
		conn, err := net.DialTimeout("tcp", addr, 3*time.Second)
		took := time.Since(start)
		if err == nil {
			conn.Close()
			t.Errorf("dial %s from the host: connected", addr)
			continue
		}
		if !errors.Is(err, syscall.EHOSTUNREACH) || took > time.Second {
			t.Errorf("dial %s from the host: %v after %v, want no route to host at once", addr, err, took)
		}
	}
	list, err := exec.Command("iptables", "-L", "OUTPUT", "-v", "-x", "-n").Output()
	if err != nil {
		t.Fatalf("iptables -L OUTPUT: %v", err)
	}
	found := false
	for _, line := range strings.Split(string(list), "\n") {
		if strings.Contains(line, comment) {
			found = true
			if f := strings.Fields(line); len(f) == 0 || f[0] != "0" {
				t.Errorf("packets to 10.0.0.0/8 went out of %s while the test dialed: %s", dev, line)
			}
		}
	}
	if !found {
		t.Errorf("the counting rule is not in OUTPUT:\n%s", list)
	}
}

// The node pulls from no registry: an image that is not loaded fails at once, with no DNS lookup
// and nothing sent out, and its error names the address every registry points to.
func TestMissingImageFailsAtOnce(t *testing.T) {
	c := kubetest.Start(t)
	ctx := context.Background()
	ns := c.Namespace(t, "missing")
	d := deployment("missing", nil, corev1.Container{Name: "main", Image: "registry.example.com/team/nothing:1", Command: []string{"sleep", "3600"}})
	start := time.Now()
	if _, err := c.Client.AppsV1().Deployments(ns).Create(ctx, d, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var msg string
	waitPod(t, c, ns, "missing", func(p *corev1.Pod) error {
		for _, cs := range p.Status.ContainerStatuses {
			if w := cs.State.Waiting; w != nil && (w.Reason == "ErrImagePull" || w.Reason == "ImagePullBackOff") && w.Message != "" {
				msg = w.Message
				return nil
			}
		}
		return fmt.Errorf("phase %s: %+v", p.Status.Phase, p.Status.ContainerStatuses)
	})
	took := time.Since(start)
	t.Logf("the pull failed %v after the Deployment was created: %s", took.Round(time.Millisecond), msg)
	if !strings.Contains(msg, kubetest.NoRegistry) || strings.Contains(msg, "lookup") {
		t.Errorf("pull error %q, want one naming %s and no DNS lookup", msg, kubetest.NoRegistry)
	}
	if took > 10*time.Second {
		t.Errorf("the pull took %v to fail, want seconds at most", took)
	}
}

func mountsUnder(t *testing.T, dir string) []string {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) > 4 && strings.HasPrefix(f[4], dir+"/") {
			out = append(out, f[4])
		}
	}
	return out
}

func processesNaming(t *testing.T, dir string) []string {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && strings.Contains(string(b), dir) {
			out = append(out, e.Name()+": "+strings.ReplaceAll(string(b), "\x00", " "))
		}
	}
	return out
}

// iptablesRules lists the host's rules (those of the test's own network namespace, which is the
// host's), without counters.
func iptablesRules(t *testing.T) string {
	out, err := exec.Command("iptables-save").Output()
	if err != nil {
		t.Fatalf("iptables-save: %v", err)
	}
	var keep []string
	for _, line := range strings.Split(string(out), "\n") {
		if strings.HasPrefix(line, "#") || line == "" {
			continue
		}
		if strings.HasPrefix(line, ":") { // chain policy with counters
			if f := strings.Fields(line); len(f) >= 2 {
				line = f[0] + " " + f[1]
			}
		}
		keep = append(keep, line)
	}
	return strings.Join(keep, "\n")
}

// scripts/kube-load-image loads an image archive (here an OCI archive exported from the node
// itself under a new name) into the real node, and a pod runs it with imagePullPolicy Never.
func TestKubeLoadImage(t *testing.T) {
	c := kubetest.Start(t)
	root, err := filepath.Abs("../../..")
	if err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(c.Dir, "containerd/containerd.sock")
	name := "hangar.local/loaded-" + strconv.Itoa(os.Getpid()) + ":dev"
	archive := filepath.Join(t.TempDir(), "image.tar")
	ctr := func(args ...string) {
		t.Helper()
		out, err := exec.Command("ctr", append([]string{"--address", sock, "--namespace", "k8s.io"}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("ctr %v: %v\n%s", args, err, out)
		}
	}
	ctr("images", "tag", kubetest.WorkspaceImage, name)
	ctr("images", "export", archive, name)
	ctr("images", "rm", "--sync", name)

	out, err := exec.Command(filepath.Join(root, "scripts/kube-load-image"), c.Dir, archive).CombinedOutput()
	if err != nil {
		t.Fatalf("kube-load-image: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), name) {
		t.Errorf("kube-load-image did not list %s among the node's images:\n%s", name, out)
	}

	ctx := context.Background()
	ns := c.Namespace(t, "loaded")
	d := deployment("loaded", nil, corev1.Container{
		Name: "main", Image: name, ImagePullPolicy: corev1.PullNever, Command: []string{"sleep", "3600"},
	})
	if _, err := c.Client.AppsV1().Deployments(ns).Create(ctx, d, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitPod(t, c, ns, "loaded", func(p *corev1.Pod) error {
		for _, cs := range p.Status.ContainerStatuses {
			if cs.State.Running != nil {
				return nil
			}
		}
		return fmt.Errorf("phase %s: %+v", p.Status.Phase, p.Status.ContainerStatuses)
	})

	// A file that is no image is refused with ctr's reason, and nothing is loaded.
	bad := filepath.Join(t.TempDir(), "bad.tar")
	if err := os.WriteFile(bad, []byte("not an archive"), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(filepath.Join(root, "scripts/kube-load-image"), c.Dir, bad).CombinedOutput(); err == nil {
		t.Errorf("kube-load-image took a file that is no image:\n%s", out)
	}
}
