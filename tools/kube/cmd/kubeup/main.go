// Command kubeup starts the test cluster for scripts/kube-up, which builds it next to the cluster's
// programs and runs it as
//
//	kubeup up -bin BINDIR -dir DIR [-timeout 120s] [-watch-pid PID]
//
// It starts etcd, kube-apiserver, kube-controller-manager, kube-scheduler and kwok from BINDIR as
// background processes of their own (each in a new session, output in DIR/NAME.log, "PID NAME" in
// DIR/pids), creates the fake node and returns once the cluster runs a Deployment. With -watch-pid
// it first starts a watchdog (kubeup watch) that stops the cluster when that process exits. DIR must
// already hold pki/sa.key and pki/sa.pub (scripts/kube-up makes them with openssl).
//
//	kubeup stop -dir DIR
//
// stops every process listed in DIR/pids, as scripts/kube-down does.
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
	// Pod IPs are only strings in pod status: kwok runs no containers and nothing dials them.
	podCIDR = "10.244.0.0/16"
	// The node's address: anything the API server would send to a kubelet (logs, exec) goes to
	// the loopback interface, where nothing listens on the kubelet port.
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
		err = stopAll(*dir, -1, os.Stderr)
	case "watch":
		err = cmdWatch(os.Args[2:])
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
	bin, dir string
	timeout  time.Duration
	watchPID int
}

func cmdUp(args []string) error {
	fs := flag.NewFlagSet("up", flag.ExitOnError)
	var c upConfig
	fs.StringVar(&c.bin, "bin", "", "directory holding the cluster's programs")
	fs.StringVar(&c.dir, "dir", "", "cluster directory")
	fs.DurationVar(&c.timeout, "timeout", 120*time.Second, "deadline of each wait")
	fs.IntVar(&c.watchPID, "watch-pid", 0, "stop the cluster when this process exits")
	_ = fs.Parse(args)
	if c.bin == "" || c.dir == "" {
		return errors.New("up: -bin and -dir are required")
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
		_ = stopAll(c.dir, -1, io.Discard)
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
		_ = stopAll(c.dir, -1, io.Discard)
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
	// A fresh cluster every time: new data, new logs, new token.
	for _, f := range []string{"etcd", "pids", "kubeconfig", "pki/apiserver"} {
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

	ports, err := freePorts(3)
	if err != nil {
		return nil, err
	}
	etcdPort, peerPort, apiPort := ports[0], ports[1], ports[2]
	cl.apiPort = apiPort
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

	// etcd
	etcdURL := fmt.Sprintf("http://127.0.0.1:%d", etcdPort)
	peerURL := fmt.Sprintf("http://127.0.0.1:%d", peerPort)
	etcd, err := cl.start("etcd", filepath.Join(c.bin, "etcd"),
		"--name", "hangar-test",
		"--data-dir", filepath.Join(dir, "etcd"),
		"--listen-client-urls", etcdURL, "--advertise-client-urls", etcdURL,
		"--listen-peer-urls", peerURL, "--initial-advertise-peer-urls", peerURL,
		"--initial-cluster", "hangar-test="+peerURL,
		"--unsafe-no-fsync", "--log-level", "warn")
	if err != nil {
		return nil, err
	}
	if err := cl.waitFor("etcd to answer on "+etcdURL+"/health", etcd, func(ctx context.Context) error {
		body, err := httpGet(ctx, etcdURL+"/health", "")
		if err == nil && !strings.Contains(body, `"health":"true"`) {
			err = fmt.Errorf("health: %s", body)
		}
		return err
	}); err != nil {
		return nil, err
	}
	cl.phase("etcd")

	// kube-apiserver
	apiURL := fmt.Sprintf("https://127.0.0.1:%d", apiPort)
	api, err := cl.start("kube-apiserver", filepath.Join(c.bin, "kube-apiserver"),
		"--etcd-servers", etcdURL,
		"--bind-address", "127.0.0.1", "--advertise-address", "127.0.0.1",
		"--secure-port", strconv.Itoa(apiPort),
		"--cert-dir", filepath.Join(dir, "pki/apiserver"),
		"--token-auth-file", filepath.Join(dir, "pki/tokens.csv"),
		"--authorization-mode", "RBAC",
		"--service-account-issuer", "https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file", filepath.Join(dir, "pki/sa.pub"),
		"--service-account-signing-key-file", filepath.Join(dir, "pki/sa.key"),
		"--service-cluster-ip-range", serviceRange,
		"--allow-privileged=true",
		// With the API server on 127.0.0.1 the "kubernetes" Endpoints cannot be written (loopback
		// addresses are invalid there); nothing in the tests needs them.
		"--endpoint-reconciler-type", "none",
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
	}); err != nil {
		return nil, err
	}
	cl.phase("kube-apiserver")

	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, err
	}
	cfg.QPS, cfg.Burst = 50, 100
	if cl.client, err = kubernetes.NewForConfig(cfg); err != nil {
		return nil, err
	}

	kcm, err := cl.start("kube-controller-manager", filepath.Join(c.bin, "kube-controller-manager"),
		"--kubeconfig", kubeconfig,
		"--leader-elect=false", "--secure-port", "0",
		"--service-account-private-key-file", filepath.Join(dir, "pki/sa.key"),
		"--controllers", strings.Join([]string{
			"deployment-controller", "replicaset-controller", "namespace-controller",
			"garbage-collector-controller", "serviceaccount-controller", "node-lifecycle-controller",
			// PVCs and PVs get protection finalizers on creation; without these two they are never
			// deleted, and neither is a namespace holding one.
			"persistentvolumeclaim-protection-controller", "persistentvolume-protection-controller",
			// fills in the aggregated ClusterRoles admin, edit and view
			"clusterrole-aggregation-controller",
			"endpointslice-controller", "service-cidr-controller",
		}, ","),
		"--node-monitor-grace-period", "60s",
		"--profiling=false")
	if err != nil {
		return nil, err
	}
	sched, err := cl.start("kube-scheduler", filepath.Join(c.bin, "kube-scheduler"),
		"--config", filepath.Join(dir, "scheduler-config.yaml"), "--secure-port", "0")
	if err != nil {
		return nil, err
	}
	kwok, err := cl.start("kwok", filepath.Join(c.bin, "kwok"),
		"--kubeconfig", kubeconfig,
		"--config", filepath.Join(dir, "kwok-stages.yaml"),
		"--manage-nodes-with-annotation-selector", "kwok.x-k8s.io/node=fake",
		"--node-ip", nodeIP, "--cidr", podCIDR)
	if err != nil {
		return nil, err
	}

	if err := cl.createNode(); err != nil {
		return nil, err
	}
	if err := cl.waitFor("node "+nodeName+" to be Ready (kwok)", kwok, func(ctx context.Context) error {
		n, err := cl.client.CoreV1().Nodes().Get(ctx, nodeName, metav1.GetOptions{})
		if err != nil {
			return err
		}
		for _, cond := range n.Status.Conditions {
			if cond.Type == corev1.NodeReady && cond.Status == corev1.ConditionTrue {
				if len(n.Spec.Taints) > 0 {
					return fmt.Errorf("node is Ready but still has taints %v (node-lifecycle-controller removes them)", n.Spec.Taints)
				}
				return nil
			}
		}
		return fmt.Errorf("node is not Ready: %v", n.Status.Conditions)
	}, kcm); err != nil {
		return nil, err
	}
	cl.phase("node")

	if err := cl.smoke(kcm, sched, kwok); err != nil {
		return nil, err
	}
	cl.phase("smoke deployment")
	for _, p := range cl.procs {
		if !p.alive() {
			return nil, p.failure(fmt.Sprintf("%s exited after start-up", p.name))
		}
	}
	return cl, nil
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

// smoke runs a one-replica Deployment to availability, then deletes its namespace.
func (cl *cluster) smoke(kcm, sched, kwok *proc) error {
	ctx, cancel := context.WithTimeout(context.Background(), cl.c.timeout)
	defer cancel()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: smokeNS}}
	if _, err := cl.client.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create namespace %s: %v", smokeNS, err)
	}
	one := int32(1)
	labels := map[string]string{"app": "smoke"}
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "smoke"},
		Spec: appsv1.DeploymentSpec{
			Replicas: &one,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{
					Name: "smoke", Image: "registry.k8s.io/pause:3.10",
				}}},
			},
		},
	}
	if _, err := cl.client.AppsV1().Deployments(smokeNS).Create(ctx, d, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create deployment %s/smoke: %v", smokeNS, err)
	}
	err := cl.waitFor("smoke deployment "+smokeNS+"/smoke to have availableReplicas 1", kcm, func(ctx context.Context) error {
		got, err := cl.client.AppsV1().Deployments(smokeNS).Get(ctx, "smoke", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if got.Status.AvailableReplicas == 1 {
			return nil
		}
		pods, err := cl.client.CoreV1().Pods(smokeNS).List(ctx, metav1.ListOptions{})
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
			ps = append(ps, s)
		}
		return fmt.Errorf("availableReplicas %d; conditions %v; pods %v",
			got.Status.AvailableReplicas, got.Status.Conditions, ps)
	}, sched, kwok)
	if err != nil {
		return err
	}
	bg := metav1.DeletePropagationBackground
	if err := cl.client.CoreV1().Namespaces().Delete(ctx, smokeNS,
		metav1.DeleteOptions{PropagationPolicy: &bg}); err != nil {
		return fmt.Errorf("delete namespace %s: %v", smokeNS, err)
	}
	return nil
}

func schedulerConfig(kubeconfig string) string {
	// The fake node has no volumes: with the volume plugins on, a pod using a PersistentVolumeClaim
	// that nothing provisions would stay Pending, so they are off.
	return `# Written by scripts/kube-up.
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
clientConnection:
  kubeconfig: ` + strconv.Quote(kubeconfig) + `
leaderElection:
  leaderElect: false
profiles:
- schedulerName: default-scheduler
  plugins:
    multiPoint:
      disabled:
      - name: VolumeBinding
      - name: VolumeZone
      - name: VolumeRestrictions
      - name: NodeVolumeLimits
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

func freePorts(n int) ([]int, error) {
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			_ = l.Close()
		}
	}()
	var ports []int
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("pick a free port: %v", err)
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
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
func stopAll(dir string, skip int, out io.Writer) error {
	if dir == "" {
		return errors.New("stop: -dir is required")
	}
	dir, _ = filepath.Abs(dir)
	var pending []pidEntry
	for _, e := range readPIDs(dir) {
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
	return nil
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
	return stopAll(*dir, os.Getpid(), os.Stderr)
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
