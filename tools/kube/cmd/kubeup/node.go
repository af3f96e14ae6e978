package main

// The real node: the whole cluster runs inside a network namespace of its own, next to a kubelet
// that runs containers through Debian's containerd and runc, with the CNI bridge plugin for the pod
// network. Nothing the cluster does on the network leaves that namespace: pod IPs, the bridge, the
// iptables rules of the CNI plugins and every port of the control plane live there, and the host
// reaches the API server only through a forwarder on a loopback port (forward.go). Deleting the
// namespace takes all of it away (stop.go).

import (
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
)

const (
	// Inside the cluster's network namespace.
	realNodeName = "hangar-node-0"
	realNodeIP   = "10.99.0.2" // on the namespace's loopback interface
	realNodeNet  = "10.99.0.2/32"
	realPodCIDR  = "10.244.0.0/24" // the CNI bridge's subnet (host-local IPAM)
	kubeletPort  = 10250
	etcdPort     = 2379
	etcdPeerPort = 2380

	// Images every cluster has, loaded into containerd before the kubelet starts (image.go).
	PauseImage     = "hangar.local/pause:dev"
	WorkspaceImage = "hangar.local/workspace:dev"
	HangarImage    = "hangar.local/hangar:dev"

	// The kwok node carries this taint, so that workspaces land on the real node unless they
	// tolerate it (benchmarks do), and this label to select it.
	kwokTaintKey   = "kwok.x-k8s.io/node"
	kwokTaintValue = "fake"
	// The storage class the local-path provisioner serves (the default class).
	storageClass = "hangar-local"
	provisioner  = "hangar.dev/local-path"

	cniBinDir = "/usr/lib/cni"
)

// clusterID names what the cluster in dir owns outside dir: its network namespace and its cgroups.
func clusterID(dir string) string {
	h := sha256.Sum256([]byte(dir))
	return "hangar-kube-" + hex.EncodeToString(h[:])[:10]
}

func netnsPath(dir string) string { return "/run/netns/" + clusterID(dir) }

// cgroupControllers are the cgroup v1 hierarchies the kubelet and runc use (this machine has a
// hybrid layout: v1 controllers plus cgroup2 at /sys/fs/cgroup/unified).
func cgroupHierarchies() []string {
	var out []string
	entries, err := os.ReadDir("/sys/fs/cgroup")
	if err != nil {
		return nil
	}
	for _, e := range entries {
		p := filepath.Join("/sys/fs/cgroup", e.Name())
		if fi, err := os.Lstat(p); err == nil && fi.IsDir() {
			out = append(out, p)
		}
	}
	return out
}

func run(name string, args ...string) error {
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %v: %s", name, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// checkNodePrerequisites names every program or file the real node needs that this machine lacks.
func checkNodePrerequisites() error {
	var missing []string
	for _, p := range []string{"containerd", "containerd-shim-runc-v2", "runc", "ctr", "ip", "nsenter", "iptables"} {
		if _, err := exec.LookPath(p); err != nil {
			missing = append(missing, p)
		}
	}
	for _, p := range []string{"bridge", "host-local", "loopback", "portmap"} {
		if _, err := os.Stat(filepath.Join(cniBinDir, p)); err != nil {
			missing = append(missing, filepath.Join(cniBinDir, p))
		}
	}
	if f, err := elf.Open("/bin/busybox"); err != nil {
		missing = append(missing, "/bin/busybox (static)")
	} else {
		if f.Section(".interp") != nil {
			missing = append(missing, "a static /bin/busybox (this one needs a dynamic loader the images lack)")
		}
		_ = f.Close()
	}
	if len(missing) > 0 {
		return fmt.Errorf("the real node needs %s (Debian: apt-get install containerd runc containernetworking-plugins iptables util-linux iproute2 busybox-static; .ci/run installs them)",
			strings.Join(missing, ", "))
	}
	if os.Geteuid() != 0 {
		return fmt.Errorf("the real node needs root (network namespace, mounts, cgroups)")
	}
	return nil
}

// setupNetns creates the cluster's network namespace with loopback up and the node's address.
func setupNetns(dir string) error {
	name := clusterID(dir)
	if _, err := os.Stat(netnsPath(dir)); err == nil {
		// Left by a cluster that was not stopped: nothing of ours can still use it (kube-up checked
		// that no process of DIR runs).
		if err := run("ip", "netns", "delete", name); err != nil {
			return err
		}
	}
	// Tests and people find the namespace's name here (ip netns exec NAME ...).
	if err := os.WriteFile(filepath.Join(dir, "netns"), []byte(name+"\n"), 0o644); err != nil {
		return err
	}
	for _, args := range [][]string{
		{"netns", "add", name},
		{"-n", name, "link", "set", "lo", "up"},
		// The node's address lives on the namespace's loopback interface (kernels without the
		// dummy module are common in VMs): pods reach it through the bridge's gateway.
		{"-n", name, "addr", "add", realNodeNet, "dev", "lo"},
	} {
		if err := run("ip", args...); err != nil {
			return fmt.Errorf("network namespace %s: %w", name, err)
		}
	}
	return nil
}

// setupCgroups makes the cgroup the kubelet puts its pods under (cgroupRoot), in every hierarchy.
func setupCgroups(dir string) error {
	id := clusterID(dir)
	for _, h := range cgroupHierarchies() {
		p := filepath.Join(h, id)
		if err := os.MkdirAll(p, 0o755); err != nil {
			return fmt.Errorf("cgroup %s: %w", p, err)
		}
		if filepath.Base(h) == "cpuset" {
			for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
				b, err := os.ReadFile(filepath.Join(h, f))
				if err != nil {
					return err
				}
				if err := os.WriteFile(filepath.Join(p, f), b, 0o644); err != nil {
					return fmt.Errorf("cgroup %s: %w", filepath.Join(p, f), err)
				}
			}
		}
	}
	return nil
}

func writeFile(path, text string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, []byte(text), 0o644)
}

func containerdSocket(dir string) string { return filepath.Join(dir, "containerd/containerd.sock") }

func containerdConfig(dir string) string {
	c := filepath.Join(dir, "containerd")
	return fmt.Sprintf(`# Written by scripts/kube-up: the real node's containerd, everything under %[1]s.
version = 2
root = %[2]q
state = %[3]q
disabled_plugins = [
  "io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs",
  "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.zfs",
  "io.containerd.tracing.processor.v1.otlp", "io.containerd.internal.v1.tracing",
]

[grpc]
  address = %[4]q

[plugins."io.containerd.internal.v1.opt"]
  path = %[5]q

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = %[6]q
  netns_mounts_under_state_dir = true
  disable_apparmor = true
  # The kubelet asks for -998 (sandboxes) and -997 (Guaranteed pods); lowering a score needs a
  # privilege a test machine or a nested container may not give: stay at containerd's own.
  restrict_oom_score_adj = true
  tolerate_missing_hugetlb_controller = true
  disable_hugetlb_controller = true
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  # No pull ever leaves the machine: every registry (the _default host directory) is an address of
  # the cluster's network namespace where nothing listens, so a pull of an image that is not
  # loaded fails at once, with no DNS lookup and no packet out (registryHostsTOML).
  [plugins."io.containerd.grpc.v1.cri".registry]
    config_path = %[10]q
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = %[7]q
    conf_dir = %[8]q
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        Root = %[9]q
        SystemdCgroup = false
`, dir, filepath.Join(c, "root"), filepath.Join(c, "state"), containerdSocket(dir), filepath.Join(c, "opt"),
		PauseImage, cniBinDir, filepath.Join(dir, "cni/net.d"), filepath.Join(c, "runc"), registryHostsDir(dir))
}

// NoRegistry is where the node's containerd sends every pull: the cluster namespace's loopback, on
// a port where nothing listens (containerd runs in that namespace). Pull errors name it, which is
// how the agent recognises a pull on a cluster without a registry (internal/agent).
const NoRegistry = "127.0.0.1:1"

func registryHostsDir(dir string) string { return filepath.Join(dir, "containerd/certs.d") }

// registryHostsTOML is the hosts.toml of the _default host directory, which containerd (Debian
// 12's 1.6.20 included) reads for every registry without a directory of its own
// (TestMissingImageFailsAtOnce checks that a pull fails at once).
const registryHostsTOML = `# Written by scripts/kube-up: the test cluster has no registry. Images come from
# scripts/kube-load-image DIR ARCHIVE; a pull of anything else fails at once here.
server = "http://` + NoRegistry + `"

[host."http://` + NoRegistry + `"]
  capabilities = ["pull", "resolve"]
`

// The pod network: one bridge in the cluster's namespace, host-local addresses, loopback in every
// pod, and portmap for hostPort. The addresses handed out are recorded under the cluster's
// directory, not in host-local's default /var/lib/cni/networks: every cluster on the host has the
// same range in a namespace of its own, and with one shared record, clusters side by side (test
// packages run in parallel) and clusters removed without their pods being deleted used up each
// other's 254 addresses ("no IP addresses available in range set").
func cniConfig(dir string) string {
	return `{
  "cniVersion": "0.4.0",
  "name": "hangar-pods",
  "plugins": [
    {
      "type": "bridge",
      "bridge": "cni0",
      "isGateway": true,
      "ipMasq": false,
      "hairpinMode": true,
      "ipam": {
        "type": "host-local",
        "ranges": [[{"subnet": "` + realPodCIDR + `"}]],
        "routes": [{"dst": "0.0.0.0/0"}],
        "dataDir": ` + strconv.Quote(filepath.Join(dir, "cni/ipam")) + `
      }
    },
    {"type": "portmap", "capabilities": {"portMappings": true}}
  ]
}
`
}

func kubeletConfig(dir string) string {
	return fmt.Sprintf(`# Written by scripts/kube-up: the real node's kubelet.
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: %[1]s
port: %[2]d
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: 10248
authentication:
  anonymous: {enabled: true}
  webhook: {enabled: false}
authorization:
  mode: AlwaysAllow
cgroupDriver: cgroupfs
cgroupRoot: /%[3]s
cgroupsPerQOS: true
failCgroupV1: false
failSwapOn: false
containerRuntimeEndpoint: unix://%[4]s
# Preloaded images are all there is (no registry): never collect them.
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
imageMinimumGCAge: 876000h
evictionHard:
  memory.available: "100Mi"
  nodefs.available: "1%%"
  imagefs.available: "1%%"
  nodefs.inodesFree: "1%%"
serializeImagePulls: false
maxPods: 110
# A crash loop shows within seconds in tests.
nodeStatusUpdateFrequency: 2s
syncFrequency: 10s
fileCheckFrequency: 10s
resolvConf: %[5]q
# Its own pods' logs, not the host's /var/log/pods: every kubelet's garbage collection removes the
# log directories of pods it does not know, so two clusters on one machine (test packages run in
# parallel) would remove each other's logs.
podLogsDir: %[6]q
tlsCertFile: ""
rotateCertificates: false
serverTLSBootstrap: false
`, realNodeIP, kubeletPort, clusterID(dir), containerdSocket(dir), filepath.Join(dir, "kubelet/resolv.conf"), filepath.Join(dir, "kubelet/pod-logs"))
}

// kubeletArgs are the kubelet's flags (most settings are in its config file).
func kubeletArgs(dir, kubeconfig string) []string {
	return []string{
		"--config", filepath.Join(dir, "kubelet/config.yaml"),
		"--kubeconfig", kubeconfig,
		"--root-dir", filepath.Join(dir, "kubelet/root"),
		"--cert-dir", filepath.Join(dir, "kubelet/pki"),
		"--hostname-override", realNodeName,
		"--node-ip", realNodeIP,
		"--node-labels", "type=real",
		"--v", "1",
	}
}

// writeNodeFiles writes containerd's, the CNI's and the kubelet's configuration under dir.
func writeNodeFiles(dir string) error {
	for path, text := range map[string]string{
		filepath.Join(dir, "containerd/config.toml"):                containerdConfig(dir),
		filepath.Join(registryHostsDir(dir), "_default/hosts.toml"): registryHostsTOML,
		filepath.Join(dir, "cni/net.d/10-hangar.conflist"):          cniConfig(dir),
		filepath.Join(dir, "kubelet/config.yaml"):                   kubeletConfig(dir),
		// Pods resolve nothing: there is no DNS server here, and none outside may be asked.
		filepath.Join(dir, "kubelet/resolv.conf"): "# no DNS in the test cluster\noptions ndots:1\n",
	} {
		if err := writeFile(path, text); err != nil {
			return err
		}
	}
	for _, d := range []string{"kubelet/root", "kubelet/pki", "kubelet/pod-logs", "volumes", "images"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			return err
		}
	}
	return nil
}

// nodeImages are the images loaded before the kubelet starts.
func nodeImages(bin, hangarBin string) []imageSpec {
	applets := busyboxApplets()
	links := func() map[string]string {
		m := map[string]string{}
		for _, a := range applets {
			m["/bin/"+a] = "busybox"
		}
		return m
	}
	passwd := "root:x:0:0:root:/root:/bin/sh\nuser:x:5001:5001:workspace user:/home/user:/bin/sh\nnonroot:x:65532:65532:nonroot:/home/nonroot:/bin/sh\n"
	group := "root:x:0:\nuser:x:5001:\nnonroot:x:65532:\n"
	dirs := map[string]int64{"/tmp": 0o1777, "/home/user": 0o777, "/home/nonroot": 0o755, "/root": 0o700, "/projects": 0o777}
	base := func(tag string) imageSpec {
		return imageSpec{
			tag:      tag,
			files:    map[string]string{"/bin/busybox": "/bin/busybox"},
			symlinks: links(),
			dirs:     dirs,
			contents: map[string]string{"/etc/passwd": passwd, "/etc/group": group},
			user:     "65532",
			env:      []string{"HOME=/home/nonroot"},
			// Like the universal developer images real devfiles name, a container given no
			// command keeps running (and stops at once on TERM).
			cmd: []string{"/bin/sh", "-c", "trap 'exit 0' TERM INT; sleep infinity & wait"},
		}
	}
	ws := base(WorkspaceImage)
	// Workspaces run as the workspace user (uid 5001, internal/devfile's runAsUser), whose home is
	// /home/user: a HOME of another user's is not writable to it (`touch ~/x`, the editor's state).
	ws.env = []string{"HOME=/home/user"}
	hangar := base(HangarImage)
	hangar.files["/usr/local/bin/hangar"] = hangarBin
	hangar.entrypoint = []string{"/usr/local/bin/hangar"}
	hangar.cmd = []string{"--help"}
	pause := imageSpec{
		tag:        PauseImage,
		files:      map[string]string{"/pause": filepath.Join(bin, "pause")},
		user:       "65535",
		entrypoint: []string{"/pause"},
	}
	return []imageSpec{pause, ws, hangar}
}

// busyboxApplets lists the applets of this machine's static busybox ("sh", "sleep", ...).
func busyboxApplets() []string {
	out, err := exec.Command("/bin/busybox", "--list").Output()
	if err != nil {
		return []string{"sh"}
	}
	var as []string
	for _, a := range strings.Fields(string(out)) {
		if a != "busybox" && !strings.Contains(a, "/") {
			as = append(as, a)
		}
	}
	return as
}

// loadImages writes each image under dir/images and imports it into the node's containerd.
func loadImages(dir string, images []imageSpec) error {
	for _, img := range images {
		name := strings.NewReplacer("/", "_", ":", "_").Replace(img.tag) + ".tar"
		path := filepath.Join(dir, "images", name)
		f, err := os.Create(path)
		if err != nil {
			return err
		}
		err = img.writeDockerArchive(f)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return fmt.Errorf("image %s: %w", img.tag, err)
		}
		if err := importImage(dir, path); err != nil {
			return err
		}
	}
	return nil
}

// importImage loads an OCI or docker-archive tarball into the node's containerd, in the namespace
// the kubelet uses (scripts/kube-load-image does the same for anyone's image).
func importImage(dir, archive string) error {
	return run("ctr", "--address", containerdSocket(dir), "--namespace", "k8s.io",
		"images", "import", archive)
}

func itoa(i int) string { return strconv.Itoa(i) }
