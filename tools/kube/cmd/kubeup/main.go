// Command kubeup starts the test cluster for scripts/kube-up, which builds it next to the cluster's
// programs and runs it as
//
//	kubeup up -bin BINDIR -dir DIR -hangar HANGAR_BINARY [-timeout 120s] [-watch-pid PID]
//
// It creates a network namespace for the cluster and starts inside it, as background processes of
// their own (each in a new session, output in DIR/NAME.log, "PID NAME" in DIR/pids): etcd,
// kube-apiserver, kube-controller-manager, kube-scheduler, kwok (the simulated node kwok-node-0,
// tainted), containerd and a kubelet (the real node hangar-node-0, node.go), and a local-path
// provisioner (localpath.go). It loads the images the tests need into containerd (image.go), starts
// a forwarder from a loopback port of the host to the API server (forward.go), and returns once a
// Deployment runs on each node. With -watch-pid it first starts a watchdog (kubeup watch) that stops
// the cluster when that process exits. DIR must already hold pki/sa.key and pki/sa.pub
// (scripts/kube-up makes them with openssl).
//
//	kubeup stop -dir DIR
//
// stops every process listed in DIR/pids and removes what the real node left (stop.go), as
// scripts/kube-down does.
package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

const (
	nodeName     = "kwok-node-0"
	smokeNS      = "kube-up-smoke"
	serviceRange = "10.96.0.0/16"
	// The kwok node's pod IPs are only strings in pod status: kwok runs no containers and nothing
	// dials them. They stay clear of the real node's pod subnet.
	podCIDR = "10.244.128.0/17"
	// The kwok node's address: anything the API server would send to its kubelet (logs, exec) goes
	// to the namespace's loopback interface, where nothing listens on the kubelet port.
	nodeIP = "127.0.0.1"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: kubeup up|stop|watch [flags]")
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "up":
		err = cmdUp(os.Args[2:])
	case "stop":
		fs := flag.NewFlagSet("stop", flag.ExitOnError)
		dir := fs.String("dir", "", "cluster directory")
		_ = fs.Parse(os.Args[2:])
		err = stopCluster(*dir, -1, os.Stderr)
	case "watch":
		err = cmdWatch(os.Args[2:])
	case "forward":
		err = cmdForward(os.Args[2:])
	case "local-path":
		err = cmdLocalPath(os.Args[2:])
	default:
		err = fmt.Errorf("unknown command %q", os.Args[1])
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "kube-up: %v\n", err)
		os.Exit(1)
	}
}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "kube-up: "+format+"\n", args...)
}

// ---- up ----

type upConfig struct {
	bin, dir  string
	hangarBin string // the hangar binary for the hangar.local/hangar image
	timeout   time.Duration
	watchPID  int
}

func cmdUp(args []string) error {
	fs := flag.NewFlagSet("up", flag.ExitOnError)
	var c upConfig
	fs.StringVar(&c.bin, "bin", "", "directory holding the cluster's programs")
	fs.StringVar(&c.dir, "dir", "", "cluster directory")
	fs.DurationVar(&c.timeout, "timeout", 120*time.Second, "deadline of each wait")
	fs.IntVar(&c.watchPID, "watch-pid", 0, "stop the cluster when this process exits")
	fs.StringVar(&c.hangarBin, "hangar", "", "the hangar binary to put in the "+HangarImage+" image")
	_ = fs.Parse(args)
	if c.bin == "" || c.dir == "" || c.hangarBin == "" {
		return errors.New("up: -bin, -dir and -hangar are required")
	}
	if err := checkNodePrerequisites(); err != nil {
		return err
	}
	if err := ensureHostRoutes(); err != nil {
		return err
	}
	var err error
	if c.dir, err = filepath.Abs(c.dir); err != nil {
		return err
	}
	for _, f := range []string{"pki/sa.key", "pki/sa.pub"} {
		if _, err := os.Stat(filepath.Join(c.dir, f)); err != nil {
			return fmt.Errorf("up: %v (scripts/kube-up makes it)", err)
		}
	}
	if live := livePIDs(c.dir); len(live) > 0 {
		return fmt.Errorf("a cluster already runs in %s (pids %v): stop it first with scripts/kube-down %s",
			c.dir, live, c.dir)
	}

	// Interrupted while starting: stop what runs so far (the programs run in sessions of their
	// own, so a Ctrl-C does not reach them).
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	go func() {
		s := <-sigs
		logf("%v: stopping what was started in %s", s, c.dir)
		_ = stopCluster(c.dir, -1, io.Discard)
		os.Exit(1)
	}()

	start := time.Now()
	var lastErr error
	for attempt := 1; attempt <= 3; attempt++ {
		cl, err := up(c)
		if err == nil {
			cl.report(time.Since(start))
			return nil
		}
		lastErr = err
		_ = stopCluster(c.dir, -1, io.Discard)
		if !errors.Is(err, errPortTaken) {
			break
		}
		logf("a port was taken by someone else meanwhile; trying again with other ports")
	}
	return fmt.Errorf("%v\nthe logs are in %s", lastErr, c.dir)
}

var errPortTaken = errors.New("address already in use")

type cluster struct {
	c        upConfig
	procs    []*proc
	apiPort  int
	phases   []string
	client   kubernetes.Interface
	phaseT   time.Time
	readyDur time.Duration
}

func (cl *cluster) phase(name string) {
	now := time.Now()
	cl.phases = append(cl.phases, fmt.Sprintf("%s %.1fs", name, now.Sub(cl.phaseT).Seconds()))
	cl.phaseT = now
}

func up(c upConfig) (*cluster, error) {
	cl := &cluster{c: c, phaseT: time.Now()}
	dir := c.dir
	// A fresh cluster every time: new data, new logs, new token. What a previous cluster in DIR
	// left (mounts, namespace, cgroups) goes first.
	if err := cleanupNode(dir, io.Discard); err != nil {
		return nil, err
	}
	for _, f := range []string{"etcd", "pids", "kubeconfig", "pki/apiserver", "containerd", "kubelet", "cni", "volumes", "images"} {
		if err := os.RemoveAll(filepath.Join(dir, f)); err != nil {
			return nil, err
		}
	}
	if matches, _ := filepath.Glob(filepath.Join(dir, "*.log")); len(matches) > 0 {
		for _, m := range matches {
			_ = os.Remove(m)
		}
	}
	if err := os.MkdirAll(filepath.Join(dir, "pki"), 0o700); err != nil {
		return nil, err
	}
	if c.watchPID > 0 {
		if _, err := cl.start("watchdog", filepath.Join(c.bin, "kubeup"), "watch", "-dir", dir,
			"-pid", strconv.Itoa(c.watchPID), "-pid-start", procStartTime(c.watchPID)); err != nil {
			return nil, err
		}
	}
	if err := setupNetns(dir); err != nil {
		return nil, err
	}
	if err := setupCgroups(dir); err != nil {
		return nil, err
	}
	if err := writeNodeFiles(dir); err != nil {
		return nil, err
	}

	// The one port on the host: the API server's forwarder. Inside the namespace the API server
	// listens on the same port number, so one kubeconfig serves both sides.
	hostListener, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("listen on a loopback port for the API server: %v", err)
	}
	apiPort := hostListener.Addr().(*net.TCPAddr).Port
	cl.apiPort = apiPort
	lf, err := hostListener.(*net.TCPListener).File()
	_ = hostListener.Close() // the forwarder holds its own copy
	if err != nil {
		return nil, err
	}
	fwd, err := cl.startIn("forward", []*os.File{lf}, filepath.Join(c.bin, "kubeup"),
		"forward", "-dir", dir, "-fd", "3", "-to", fmt.Sprintf("127.0.0.1:%d", apiPort))
	_ = lf.Close()
	if err != nil {
		return nil, err
	}

	token := randomHex(24)
	if err := os.WriteFile(filepath.Join(dir, "pki/tokens.csv"),
		[]byte(token+",hangar-admin,hangar-admin,system:masters\n"), 0o600); err != nil {
		return nil, err
	}
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := writeKubeconfig(kubeconfig, apiPort, token); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, "kwok-stages.yaml"), []byte(kwokStages), 0o644); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, "scheduler-config.yaml"),
		[]byte(schedulerConfig(kubeconfig)), 0o644); err != nil {
		return nil, err
	}

	// containerd, with the images loaded before the kubelet asks for them.
	ctrd, err := cl.startIn("containerd", nil, "containerd", "--config", filepath.Join(dir, "containerd/config.toml"))
	if err != nil {
		return nil, err
	}

	// etcd
	etcdURL := fmt.Sprintf("http://127.0.0.1:%d", etcdPort)
	peerURL := fmt.Sprintf("http://127.0.0.1:%d", etcdPeerPort)
	etcd, err := cl.startIn("etcd", nil, filepath.Join(c.bin, "etcd"),
		"--name", "hangar-test",
		"--data-dir", filepath.Join(dir, "etcd"),
		"--listen-client-urls", etcdURL, "--advertise-client-urls", etcdURL,
		"--listen-peer-urls", peerURL, "--initial-advertise-peer-urls", peerURL,
		"--initial-cluster", "hangar-test="+peerURL,
		"--unsafe-no-fsync", "--log-level", "warn")
	if err != nil {
		return nil, err
	}

	// kube-apiserver, on every address of the namespace: the host's forwarder comes in on loopback,
	// pods on the node's address.
	apiURL := fmt.Sprintf("https://127.0.0.1:%d", apiPort)
	api, err := cl.startIn("kube-apiserver", nil, filepath.Join(c.bin, "kube-apiserver"),
		"--etcd-servers", etcdURL,
		"--bind-address", "0.0.0.0", "--advertise-address", realNodeIP,
		"--secure-port", strconv.Itoa(apiPort),
		"--cert-dir", filepath.Join(dir, "pki/apiserver"),
		"--token-auth-file", filepath.Join(dir, "pki/tokens.csv"),
		"--authorization-mode", "RBAC",
		"--service-account-issuer", "https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file", filepath.Join(dir, "pki/sa.pub"),
		"--service-account-signing-key-file", filepath.Join(dir, "pki/sa.key"),
		"--service-cluster-ip-range", serviceRange,
		"--allow-privileged=true",
		// Node host names resolve nowhere here: reach kubelets (logs, exec) by address.
		"--kubelet-preferred-address-types", "InternalIP",
		"--profiling=false")
	if err != nil {
		return nil, err
	}
	if err := cl.waitFor("kube-apiserver's /readyz at "+apiURL, api, func(ctx context.Context) error {
		body, err := httpGet(ctx, apiURL+"/readyz", token)
		if err == nil && strings.TrimSpace(body) != "ok" {
			err = fmt.Errorf("readyz: %s", body)
		}
		return err
	}, etcd, fwd); err != nil {
		return nil, err
	}
	cl.phase("etcd and kube-apiserver")

	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, err
	}
	cfg.QPS, cfg.Burst = 50, 100
	if cl.client, err = kubernetes.NewForConfig(cfg); err != nil {
		return nil, err
	}

	kcm, err := cl.startIn("kube-controller-manager", nil, filepath.Join(c.bin, "kube-controller-manager"),
		"--kubeconfig", kubeconfig,
		"--leader-elect=false", "--secure-port", "0",
		"--service-account-private-key-file", filepath.Join(dir, "pki/sa.key"),
		// The API server signs its own serving certificate: it is the CA pods trust
		// (kube-root-ca.crt in every namespace, which service account token volumes mount).
		"--root-ca-file", filepath.Join(dir, "pki/apiserver/apiserver.crt"),
		"--controllers", strings.Join([]string{
			"deployment-controller", "replicaset-controller", "namespace-controller",
			"garbage-collector-controller", "serviceaccount-controller", "node-lifecycle-controller",
			// PVCs and PVs get protection finalizers on creation; without these two they are never
			// deleted, and neither is a namespace holding one.
			"persistentvolumeclaim-protection-controller", "persistentvolume-protection-controller",
			// binds claims to the volumes the local-path provisioner makes
			"persistentvolume-binder-controller",
			// fills in the aggregated ClusterRoles admin, edit and view
			"clusterrole-aggregation-controller",
			"endpointslice-controller", "service-cidr-controller",
			"root-ca-certificate-publisher-controller",
		}, ","),
		"--node-monitor-grace-period", "60s",
		// The default 20 requests/s (burst 30) made the controllers, not Hangar, the limit of every
		// benchmark: 1,000 Deployments reached Running at about 3 a second, and the pods of 100
		// stopped ones took 28 s to go. A cluster sized for a thousand workspaces raises these too.
		"--kube-api-qps", "400", "--kube-api-burst", "800",
		"--concurrent-deployment-syncs", "20", "--concurrent-replicaset-syncs", "20",
		"--profiling=false")
	if err != nil {
		return nil, err
	}
	sched, err := cl.startIn("kube-scheduler", nil, filepath.Join(c.bin, "kube-scheduler"),
		"--config", filepath.Join(dir, "scheduler-config.yaml"), "--secure-port", "0")
	if err != nil {
		return nil, err
	}
	kwok, err := cl.startIn("kwok", nil, filepath.Join(c.bin, "kwok"),
		"--kubeconfig", kubeconfig,
		"--config", filepath.Join(dir, "kwok-stages.yaml"),
		"--manage-nodes-with-annotation-selector", "kwok.x-k8s.io/node=fake",
		"--node-ip", nodeIP, "--cidr", podCIDR)
	if err != nil {
		return nil, err
	}
	lpath, err := cl.startIn("local-path", nil, filepath.Join(c.bin, "kubeup"),
		"local-path", "-dir", dir, "-kubeconfig", kubeconfig)
	if err != nil {
		return nil, err
	}

	if err := cl.waitFor("containerd to answer on "+containerdSocket(dir), ctrd, func(ctx context.Context) error {
		return run("ctr", "--address", containerdSocket(dir), "version")
	}); err != nil {
		return nil, err
	}
	if err := loadImages(dir, nodeImages(c.bin, c.hangarBin)); err != nil {
		return nil, err
	}
	cl.phase("containerd and images")
	kubelet, err := cl.startIn("kubelet", nil, filepath.Join(c.bin, "kubelet"), kubeletArgs(dir, kubeconfig)...)
	if err != nil {
		return nil, err
	}

	if err := cl.createNode(); err != nil {
		return nil, err
	}
	if _, err := cl.client.StorageV1().StorageClasses().Create(context.Background(), storageClassObject(), metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, fmt.Errorf("create storage class %s: %v", storageClass, err)
	}
	for _, n := range []struct {
		name  string
		owner *proc
	}{{nodeName, kwok}, {realNodeName, kubelet}} {
		if err := cl.waitFor("node "+n.name+" to be Ready", n.owner, func(ctx context.Context) error {
			return nodeReady(ctx, cl.client, n.name)
		}, kcm, ctrd); err != nil {
			return nil, err
		}
	}
	cl.phase("nodes")
	if err := cl.startKubeProxy(kubeconfig); err != nil {
		return nil, err
	}
	cl.phase("kube-proxy")

	if err := cl.smoke(kcm, sched, kwok, kubelet, ctrd, lpath); err != nil {
		return nil, err
	}
	cl.phase("smoke deployments")
	for _, p := range cl.procs {
		if !p.alive() {
			return nil, p.failure(fmt.Sprintf("%s exited after start-up", p.name))
		}
	}
	return cl, nil
}

// nodeReady checks that a node is Ready and carries no taint but the kwok node's own.
func nodeReady(ctx context.Context, client kubernetes.Interface, name string) error {
	n, err := client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	for _, cond := range n.Status.Conditions {
		if cond.Type == corev1.NodeReady && cond.Status == corev1.ConditionTrue {
			for _, t := range n.Spec.Taints {
				if t.Key != kwokTaintKey {
					return fmt.Errorf("node is Ready but still has taint %v (node-lifecycle-controller removes it)", t)
				}
			}
			return nil
		}
	}
	return fmt.Errorf("node is not Ready: %v", n.Status.Conditions)
}

func (cl *cluster) report(total time.Duration) {
	var mem []string
	var sum int
	for _, p := range cl.procs {
		kb := rssKB(p.cmd.Process.Pid)
		sum += kb
		mem = append(mem, fmt.Sprintf("%s %d MB", p.name, kb/1024))
	}
	logf("phases: %s", strings.Join(cl.phases, ", "))
	logf("memory (RSS): %s; total %d MB", strings.Join(mem, ", "), sum/1024)
	logf("cluster ready in %.1fs: https://127.0.0.1:%d; KUBECONFIG=%s; stop it with scripts/kube-down %s",
		total.Seconds(), cl.apiPort, filepath.Join(cl.c.dir, "kubeconfig"), cl.c.dir)
}

func (cl *cluster) createNode() error {
	rl := corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse("32"),
		corev1.ResourceMemory: resource.MustParse("256Gi"),
		corev1.ResourcePods:   resource.MustParse("110"),
	}
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name:        nodeName,
			Annotations: map[string]string{"kwok.x-k8s.io/node": "fake"},
			Labels: map[string]string{
				"kubernetes.io/hostname": nodeName, "kubernetes.io/os": "linux",
				"kubernetes.io/arch": "amd64", "type": "kwok",
			},
		},
		// Workspaces land on the real node unless they tolerate this (benchmarks do).
		Spec:   corev1.NodeSpec{Taints: []corev1.Taint{{Key: kwokTaintKey, Value: kwokTaintValue, Effect: corev1.TaintEffectNoSchedule}}},
		Status: corev1.NodeStatus{Allocatable: rl, Capacity: rl},
	}
	ctx, cancel := context.WithTimeout(context.Background(), cl.c.timeout)
	defer cancel()
	var err error
	for {
		_, err = cl.client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{})
		if err == nil || apierrors.IsAlreadyExists(err) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("create node %s: %v", nodeName, err)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// smoke runs two one-replica Deployments to availability, one on each node, then deletes their
// namespace. The real node's pod runs a container of the workspace image that writes to a volume
// of the local-path provisioner and is ready only once it has.
func (cl *cluster) smoke(procs ...*proc) error {
	ctx, cancel := context.WithTimeout(context.Background(), cl.c.timeout)
	defer cancel()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: smokeNS}}
	if _, err := cl.client.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create namespace %s: %v", smokeNS, err)
	}
	claim := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "smoke-data"},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Mi")}},
		},
	}
	if _, err := cl.client.CoreV1().PersistentVolumeClaims(smokeNS).Create(ctx, claim, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create claim %s/smoke-data: %v", smokeNS, err)
	}
	one := int32(1)
	deployment := func(name string, spec corev1.PodSpec) *appsv1.Deployment {
		labels := map[string]string{"app": name}
		return &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: appsv1.DeploymentSpec{
				Replicas: &one,
				Selector: &metav1.LabelSelector{MatchLabels: labels},
				Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: spec},
			},
		}
	}
	real := deployment("smoke-real", corev1.PodSpec{
		Containers: []corev1.Container{{
			Name: "smoke", Image: WorkspaceImage, ImagePullPolicy: corev1.PullNever,
			Command:      []string{"/bin/sh", "-c", "echo ok > /data/smoke && exec sleep 3600"},
			VolumeMounts: []corev1.VolumeMount{{Name: "data", MountPath: "/data"}},
			ReadinessProbe: &corev1.Probe{
				ProbeHandler:  corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"cat", "/data/smoke"}}},
				PeriodSeconds: 1,
			},
		}},
		Volumes: []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "smoke-data"},
		}}},
		TerminationGracePeriodSeconds: ptrTo(int64(0)),
	})
	fake := deployment("smoke-kwok", corev1.PodSpec{
		Containers:   []corev1.Container{{Name: "smoke", Image: "registry.k8s.io/pause:3.10"}},
		NodeSelector: map[string]string{"type": "kwok"},
		Tolerations:  []corev1.Toleration{{Key: kwokTaintKey, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}},
	})
	for _, d := range []*appsv1.Deployment{real, fake} {
		if _, err := cl.client.AppsV1().Deployments(smokeNS).Create(ctx, d, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("create deployment %s/%s: %v", smokeNS, d.Name, err)
		}
	}
	for _, d := range []*appsv1.Deployment{real, fake} {
		err := cl.waitFor("smoke deployment "+smokeNS+"/"+d.Name+" to have availableReplicas 1", procs[0], func(ctx context.Context) error {
			return deploymentAvailable(ctx, cl.client, smokeNS, d.Name)
		}, procs[1:]...)
		if err != nil {
			return err
		}
	}
	bg := metav1.DeletePropagationBackground
	if err := cl.client.CoreV1().Namespaces().Delete(ctx, smokeNS,
		metav1.DeleteOptions{PropagationPolicy: &bg}); err != nil {
		return fmt.Errorf("delete namespace %s: %v", smokeNS, err)
	}
	return nil
}

// deploymentAvailable is nil once the Deployment has one available replica; else it says what its
// pods are waiting for.
func deploymentAvailable(ctx context.Context, client kubernetes.Interface, ns, name string) error {
	got, err := client.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	if got.Status.AvailableReplicas == 1 {
		return nil
	}
	pods, err := client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=" + name})
	if err != nil {
		return err
	}
	var ps []string
	for _, p := range pods.Items {
		s := fmt.Sprintf("%s phase=%s node=%q", p.Name, p.Status.Phase, p.Spec.NodeName)
		for _, c := range p.Status.Conditions {
			if c.Status != corev1.ConditionTrue && c.Message != "" {
				s += fmt.Sprintf(" %s=%s (%s)", c.Type, c.Status, c.Message)
			}
		}
		for _, c := range append(p.Status.InitContainerStatuses, p.Status.ContainerStatuses...) {
			if w := c.State.Waiting; w != nil {
				s += fmt.Sprintf(" container %s waiting: %s %s", c.Name, w.Reason, w.Message)
			}
			if t := c.State.Terminated; t != nil {
				s += fmt.Sprintf(" container %s terminated: %s (exit %d) %s", c.Name, t.Reason, t.ExitCode, t.Message)
			}
		}
		ps = append(ps, s)
	}
	return fmt.Errorf("availableReplicas %d; conditions %v; pods %v", got.Status.AvailableReplicas, got.Status.Conditions, ps)
}

func ptrTo[T any](v T) *T { return &v }

func schedulerConfig(kubeconfig string) string {
	return `# Written by scripts/kube-up.
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
clientConnection:
  kubeconfig: ` + strconv.Quote(kubeconfig) + `
  qps: 200
  burst: 400
leaderElection:
  leaderElect: false
`
}

func writeKubeconfig(path string, port int, token string) error {
	text := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: hangar-test
  cluster:
    server: https://127.0.0.1:%d
    insecure-skip-tls-verify: true
users:
- name: hangar-admin
  user:
    token: %s
contexts:
- name: hangar-test
  context:
    cluster: hangar-test
    user: hangar-admin
    namespace: default
current-context: hangar-test
`, port, token)
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(text), 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// ---- processes ----

type proc struct {
	name, log string
	cmd       *exec.Cmd
	done      chan struct{}
	waitErr   error
}

func (p *proc) alive() bool {
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// failure describes why p's part did not come up, with the tail of its log.
func (p *proc) failure(what string) error {
	tail := tailFile(p.log, 40)
	err := fmt.Errorf("%s\n---- last lines of %s ----\n%s", what, p.log, tail)
	if strings.Contains(tail, "address already in use") {
		return fmt.Errorf("%w: %w", errPortTaken, err)
	}
	return err
}

// start runs a program in a session of its own, with its output in DIR/NAME.log, and records it in
// DIR/pids. The process outlives kubeup.
func (cl *cluster) start(name, path string, args ...string) (*proc, error) {
	return cl.startCmd(name, nil, path, args...)
}

// startIn starts a program like start, inside the cluster's network namespace (nsenter joins that
// namespace only, then executes the program, so the pid is the program's), with extra inherited
// files from fd 3 on.
func (cl *cluster) startIn(name string, extra []*os.File, path string, args ...string) (*proc, error) {
	return cl.startCmd(name, extra, "nsenter", append([]string{"--net=" + netnsPath(cl.c.dir), "--", path}, args...)...)
}

func (cl *cluster) startCmd(name string, extra []*os.File, path string, args ...string) (*proc, error) {
	logPath := filepath.Join(cl.c.dir, name+".log")
	f, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fmt.Fprintf(f, "# %s %s\n", path, strings.Join(args, " "))
	cmd := exec.Command(path, args...)
	cmd.Dir = cl.c.dir
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	cmd.ExtraFiles = extra
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %v", name, err)
	}
	pf, err := os.OpenFile(filepath.Join(cl.c.dir, "pids"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err == nil {
		_, err = fmt.Fprintf(pf, "%d %s\n", cmd.Process.Pid, name)
		if cerr := pf.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		_ = cmd.Process.Kill()
		return nil, err
	}
	p := &proc{name: name, log: logPath, cmd: cmd, done: make(chan struct{})}
	go func() {
		p.waitErr = cmd.Wait()
		close(p.done)
	}()
	cl.procs = append(cl.procs, p)
	return p, nil
}

// waitFor polls check until it succeeds, failing early if owner (or one of also) exits, and at
// the deadline with the last error and the tail of owner's log.
func (cl *cluster) waitFor(what string, owner *proc, check func(context.Context) error, also ...*proc) error {
	deadline := time.Now().Add(cl.c.timeout)
	interval := 50 * time.Millisecond
	var last error
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		last = check(ctx)
		cancel()
		if last == nil {
			return nil
		}
		for _, p := range append([]*proc{owner}, also...) {
			if !p.alive() {
				return p.failure(fmt.Sprintf("%s exited (%v) while waiting for %s", p.name, p.waitErr, what))
			}
		}
		if time.Now().After(deadline) {
			return owner.failure(fmt.Sprintf("timed out after %v waiting for %s: %v", cl.c.timeout, what, last))
		}
		time.Sleep(interval)
		if interval < 500*time.Millisecond {
			interval *= 2
		}
	}
}

func httpGet(ctx context.Context, url, token string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "", err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	client := &http.Client{Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // self-signed test cluster
		Proxy:           nil,
	}}
	resp, err := client.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("%s: %s: %s", url, resp.Status, strings.TrimSpace(string(b)))
	}
	return string(b), nil
}

func randomHex(n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic(err)
	}
	return hex.EncodeToString(b)
}

func tailFile(path string, lines int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("(cannot read %s: %v)", path, err)
	}
	all := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(all) > lines {
		all = all[len(all)-lines:]
	}
	return strings.Join(all, "\n")
}

func rssKB(pid int) int {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			f := strings.Fields(rest)
			if len(f) > 0 {
				kb, _ := strconv.Atoi(f[0])
				return kb
			}
		}
	}
	return 0
}

// ---- stopping ----

type pidEntry struct {
	pid  int
	name string
}

func readPIDs(dir string) []pidEntry {
	b, err := os.ReadFile(filepath.Join(dir, "pids"))
	if err != nil {
		return nil
	}
	var out []pidEntry
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		pid, err := strconv.Atoi(f[0])
		if err != nil || pid <= 1 {
			continue
		}
		out = append(out, pidEntry{pid, f[1]})
	}
	return out
}

func zombie(pid int) bool {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	i := bytes.LastIndexByte(stat, ')')
	return i > 0 && i+2 < len(stat) && stat[i+2] == 'Z'
}

// ours reports whether pid runs and is one of DIR's processes: one of its arguments is DIR or a
// path under it, so a pid reused by an unrelated process is left alone. Zombies count as gone.
func ours(pid int, dir string) bool {
	if _, err := os.Stat(fmt.Sprintf("/proc/%d", pid)); err != nil {
		return false
	}
	if zombie(pid) {
		return false
	}
	cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		return false
	}
	for _, arg := range strings.Split(string(cmdline), "\x00") {
		if arg == dir || strings.HasPrefix(arg, dir+"/") {
			return true
		}
	}
	return false
}

func livePIDs(dir string) []int {
	var live []int
	for _, e := range readPIDs(dir) {
		if ours(e.pid, dir) {
			live = append(live, e.pid)
		}
	}
	return live
}

// stopAll sends TERM to every live process of DIR (but skip), waits up to 10 s, then KILLs the rest.
// etcd goes last: an API server whose storage went first takes long to shut down.
func stopAll(dir string, skip int, out io.Writer) error {
	if dir == "" {
		return errors.New("stop: -dir is required")
	}
	dir, _ = filepath.Abs(dir)
	var first, last []pidEntry
	for _, e := range readPIDs(dir) {
		if e.name == "etcd" {
			last = append(last, e)
		} else {
			first = append(first, e)
		}
	}
	stopGroup(dir, skip, first, out)
	stopGroup(dir, skip, last, out)
	return nil
}

func stopGroup(dir string, skip int, group []pidEntry, out io.Writer) {
	var pending []pidEntry
	for _, e := range group {
		if e.pid == skip || !ours(e.pid, dir) {
			continue
		}
		_ = syscall.Kill(e.pid, syscall.SIGTERM)
		pending = append(pending, e)
	}
	deadline := time.Now().Add(10 * time.Second)
	for len(pending) > 0 {
		var still []pidEntry
		for _, e := range pending {
			if ours(e.pid, dir) {
				still = append(still, e)
			} else {
				fmt.Fprintf(out, "kube-down: stopped %s (pid %d)\n", e.name, e.pid)
			}
		}
		pending = still
		if len(pending) == 0 {
			break
		}
		if time.Now().After(deadline) {
			for _, e := range pending {
				fmt.Fprintf(out, "kube-down: killing %s (pid %d): still running 10s after TERM\n", e.name, e.pid)
				_ = syscall.Kill(e.pid, syscall.SIGKILL)
			}
			deadline = time.Now().Add(time.Hour)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// ---- watchdog ----

func cmdWatch(args []string) error {
	fs := flag.NewFlagSet("watch", flag.ExitOnError)
	dir := fs.String("dir", "", "cluster directory")
	pid := fs.Int("pid", 0, "process to watch")
	pidStart := fs.String("pid-start", "", "start time of that process (from /proc/PID/stat)")
	_ = fs.Parse(args)
	if *dir == "" || *pid <= 0 {
		return errors.New("watch: -dir and -pid are required")
	}
	for {
		if syscall.Kill(*pid, 0) != nil || zombie(*pid) || (*pidStart != "" && procStartTime(*pid) != *pidStart) {
			break
		}
		time.Sleep(time.Second)
	}
	fmt.Fprintf(os.Stderr, "kube-up watchdog: process %d exited: stopping the cluster in %s\n", *pid, *dir)
	return stopCluster(*dir, os.Getpid(), os.Stderr)
}

// stopCluster stops the programs of DIR, then removes what the real node left (stop.go).
func stopCluster(dir string, skip int, out io.Writer) error {
	if err := stopAll(dir, skip, out); err != nil {
		return err
	}
	dir, _ = filepath.Abs(dir)
	return cleanupNode(dir, out)
}

// procStartTime returns field 22 of /proc/PID/stat (start time in clock ticks), "" if unknown.
func procStartTime(pid int) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return ""
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return ""
	}
	f := strings.Fields(string(b[i+1:]))
	// f[0] is field 3 (state), so field 22 is f[19].
	if len(f) < 20 {
		return ""
	}
	return f[19]
}
