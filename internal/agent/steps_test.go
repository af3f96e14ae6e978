package agent

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/hangar-dev/hangar/internal/imagebuild"
	"github.com/hangar-dev/hangar/internal/protocol"
	"github.com/hangar-dev/hangar/internal/testutil/kubetest"
)

func TestStartupStepsFromPodStatus(t *testing.T) {
	t0 := time.Date(2026, 11, 27, 9, 0, 0, 0, time.UTC)
	at := func(s int) metav1.Time { return metav1.NewTime(t0.Add(time.Duration(s) * time.Second)) }
	pod := func(created int, statuses ...corev1.ContainerStatus) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprint("p", created), UID: types.UID(fmt.Sprint("uid", created)), CreationTimestamp: at(created)}}
		for _, n := range []string{"hangar-tools", protocol.ImagePrepareContainerName, protocol.ImageBuildContainerName, protocol.ImagePushContainerName, "hangar-project-clone"} {
			p.Spec.InitContainers = append(p.Spec.InitContainers, corev1.Container{Name: n})
		}
		p.Status.InitContainerStatuses = statuses
		return p
	}
	done := func(name string, from, to int, msg string) corev1.ContainerStatus {
		return corev1.ContainerStatus{Name: name, State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
			ExitCode: 0, StartedAt: at(from), FinishedAt: at(to), Message: msg, ContainerID: "containerd://" + name}}}
	}
	running := func(name string, from int) corev1.ContainerStatus {
		return corev1.ContainerStatus{Name: name, ContainerID: "containerd://run-" + name, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: at(from)}}}
	}
	waiting := corev1.ContainerStatus{Name: protocol.ImagePushContainerName, State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "PodInitializing"}}}
	followed := map[string]stepLog{
		"containerd://run-" + protocol.ImageBuildContainerName: {log: "step 1/2: RUN a\nhello\nstep 2/2: RUN b\n", detail: "step 2/2: RUN b"},
	}
	logs := func(_ types.UID, id string) (stepLog, bool) { l, ok := followed[id]; return l, ok }

	building := pod(0, done("hangar-tools", 0, 1, ""), done(protocol.ImagePrepareContainerName, 1, 3, "building r:1 from b:1: 2 steps, 0 features\n"),
		running(protocol.ImageBuildContainerName, 3), waiting)
	got := StartupSteps([]*corev1.Pod{building}, logs)
	if len(got) != 4 || got[0].Name != protocol.StepImagePrepare || got[1].Name != protocol.StepImageBuild || got[2].Name != protocol.StepImagePush ||
		got[3].Name != protocol.StepProjectClone || got[3].State != protocol.StepPending {
		t.Fatalf("steps %+v: want prepare, build, push and the project clone to come", got)
	}
	if g := got[0]; g.State != protocol.StepDone || !g.StartedAt.Equal(t0.Add(time.Second)) || !g.EndedAt.Equal(t0.Add(3*time.Second)) ||
		g.Detail != "building r:1 from b:1: 2 steps, 0 features" || g.Log != "building r:1 from b:1: 2 steps, 0 features\n" {
		t.Errorf("prepare %+v: want done 1s to 3s, its termination message as its log and progress", g)
	}
	if g := got[1]; g.State != protocol.StepRunning || !g.StartedAt.Equal(t0.Add(3*time.Second)) || g.EndedAt != nil || g.Detail != "step 2/2: RUN b" || !strings.Contains(g.Log, "hello\n") {
		t.Errorf("build %+v: want running since 3s, with the followed log and its latest progress line", g)
	}
	if g := got[2]; g.State != protocol.StepPending || g.StartedAt != nil || g.Log != "" {
		t.Errorf("push %+v: want pending", g)
	}

	// A failed build waiting in back-off is failed, with its termination message; a newer pod's
	// steps win over an older one's, and a pod being deleted has none.
	backOff := corev1.ContainerStatus{Name: protocol.ImageBuildContainerName, State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}},
		LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1, StartedAt: at(20), FinishedAt: at(25),
			Message: "step 1/1: RUN false\nimage build: step 1/1 exited with code 1\n", ContainerID: "containerd://old"}}}
	newer := pod(10, done(protocol.ImagePrepareContainerName, 11, 12, ""), backOff)
	gone := pod(30)
	now := metav1.NewTime(t0)
	gone.DeletionTimestamp = &now
	got = StartupSteps([]*corev1.Pod{building, newer, gone}, logs)
	if len(got) != 4 || got[1].State != protocol.StepFailed || got[1].Detail != "step 1/1: RUN false" || !strings.HasSuffix(got[1].Log, "exited with code 1\n") ||
		!got[1].EndedAt.Equal(t0.Add(25*time.Second)) || got[2].State != protocol.StepPending {
		t.Fatalf("after a failure: %+v", got)
	}
	if StartupSteps([]*corev1.Pod{gone}, logs) != nil || StartupSteps(nil, logs) != nil {
		t.Error("a pod being deleted, or none, has steps")
	}
	// A pod without an image build or projects has no steps; the clone's progress is its own.
	plain := &corev1.Pod{Spec: corev1.PodSpec{InitContainers: []corev1.Container{{Name: "hangar-tools"}}}}
	if s := StartupSteps([]*corev1.Pod{plain}, logs); s != nil {
		t.Errorf("a pod without a build: %+v", s)
	}
	cloned := &corev1.Pod{Spec: corev1.PodSpec{InitContainers: []corev1.Container{{Name: "hangar-tools"}, {Name: protocol.ProjectCloneContainerName}}},
		Status: corev1.PodStatus{InitContainerStatuses: []corev1.ContainerStatus{done(protocol.ProjectCloneContainerName, 4, 6,
			"project app: cloning https://git.example.com/a/app.git (remote origin) into /projects/app\nproject app: done\nstep 1/2: not the clone's\n")}}}
	if s := StartupSteps([]*corev1.Pod{cloned}, logs); len(s) != 1 || s[0].Name != protocol.StepProjectClone || s[0].State != protocol.StepDone || s[0].Detail != "project app: done" {
		t.Errorf("a pod with a project: %+v", s)
	}
	if stepsKey(got) == stepsKey(StartupSteps([]*corev1.Pod{building}, logs)) {
		t.Error("two different reports have the same key")
	}
}

// A followed log keeps its last protocol.MaxStepLogBytes and its latest progress line, cuts a
// line without end at maxLogLine, makes bytes that are not UTF-8 valid, and says when the
// progress changes.
func TestStepLogBounds(t *testing.T) {
	changes := 0
	s := newStepLogs(context.Background(), slog.Default(), nil, func() { changes++ })
	k := logKey{"uid", "containerd://1"}
	f := &followed{progress: imagebuild.IsProgress}
	s.logs[k] = f
	var in strings.Builder
	in.WriteString("building r:1 from b:1: 1 steps, 0 features\nstep 1/1: RUN make\n")
	for i := 0; i < 5000; i++ {
		fmt.Fprintf(&in, "cc -c file%d.c\n", i)
	}
	in.WriteString(strings.Repeat("x", 3*maxLogLine) + "\n")
	in.WriteString("bad \xff byte\nlast line without newline")
	s.read(k, f, strings.NewReader(in.String()))
	l, ok := s.get("uid", "containerd://1")
	if !ok {
		t.Fatal("no log")
	}
	if len(l.log) > protocol.MaxStepLogBytes || !strings.HasPrefix(l.log, protocol.TruncatedPrefix) {
		t.Errorf("log of %d bytes, want at most %d, beginning with the cut's mark", len(l.log), protocol.MaxStepLogBytes)
	}
	if !strings.HasSuffix(l.log, "cc -c file4999.c\n"+strings.Repeat("x", maxLogLine-len(protocol.TruncatedSuffix))+protocol.TruncatedSuffix+"\nbad \uFFFD byte\nlast line without newline\n") {
		t.Errorf("log ends %q", l.log[len(l.log)-200:])
	}
	if l.detail != "step 1/1: RUN make" || changes != 2 {
		t.Errorf("detail %q after %d changes, want the step's line after 2", l.detail, changes)
	}
	// The same progress line again changes nothing: no wake-up for a build that repeats it.
	s.read(k, f, strings.NewReader("step 1/1: RUN make\nstep 1/1: RUN make\n"))
	if changes != 2 {
		t.Errorf("%d changes after the same progress line again, want 2", changes)
	}
	if _, ok := s.get("uid", "containerd://2"); ok {
		t.Error("another run of the container has this log")
	}
}

// TestStartupStepsFollowedOnTheRealNode: the agent follows the logs of a running image build's
// init containers on the real node: while the build step runs, its step is running with the
// latest progress line and the output so far; once the pod runs, every step is done with its
// whole log, and a pod that is gone is forgotten.
func TestStartupStepsFollowedOnTheRealNode(t *testing.T) {
	c := kubetest.Start(t)
	ns := unique("steps")
	deleteNamespaceAtEnd(t, c, ns)
	ctx := context.Background()
	if _, err := c.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	sh := func(name, script string) corev1.Container {
		return corev1.Container{Name: name, Image: kubetest.WorkspaceImage, ImagePullPolicy: corev1.PullNever, Command: []string{"/bin/sh", "-c", script}}
	}
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "build", Namespace: ns}, Spec: corev1.PodSpec{
		InitContainers: []corev1.Container{
			sh(protocol.ImagePrepareContainerName, "echo 'building r:1 from b:1: 2 steps, 0 features'"),
			// The build waits for the test to let it end.
			sh(protocol.ImageBuildContainerName, "echo 'step 1/2: RUN a'; echo compiling; echo 'step 2/2: RUN b'; echo linking; while [ ! -e /tmp/go ]; do sleep 0.2; done; echo finished"),
			sh(protocol.ImagePushContainerName, "echo 'pushing r:1'; echo 'pushed r:1 (sha256:0)'"),
		},
		Containers: []corev1.Container{sh("main", "sleep 3600")},
	}}
	var zero int64
	p.Spec.TerminationGracePeriodSeconds = &zero
	if _, err := c.Client.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	s := newStepLogs(sctx, slog.Default(), c.Client, func() {})
	steps := func(ctx context.Context) ([]protocol.StartupStep, error) {
		got, err := c.Client.CoreV1().Pods(ns).Get(ctx, "build", metav1.GetOptions{})
		if err != nil {
			return nil, err
		}
		s.follow([]*corev1.Pod{got}, map[types.UID]bool{got.UID: true}, time.Now())
		return StartupSteps([]*corev1.Pod{got}, s.get), nil
	}
	kubetest.Eventually(t, 2*time.Minute, "the build step runs, its progress and output followed", func(ctx context.Context) error {
		st, err := steps(ctx)
		if err != nil {
			return err
		}
		if len(st) != 3 || st[0].State != protocol.StepDone || st[1].State != protocol.StepRunning || st[1].Detail != "step 2/2: RUN b" ||
			!strings.Contains(st[1].Log, "compiling\n") || !strings.Contains(st[1].Log, "linking\n") || st[2].State != protocol.StepPending {
			return fmt.Errorf("steps %+v", st)
		}
		return nil
	})
	kubetest.Eventually(t, 30*time.Second, "the build is let go", func(ctx context.Context) error {
		_, errOut, err := c.Exec(ctx, ns, "build", protocol.ImageBuildContainerName, "touch", "/tmp/go")
		if err != nil {
			return fmt.Errorf("%v: %s", err, errOut)
		}
		return nil
	})
	kubetest.Eventually(t, 2*time.Minute, "every step done, with its whole log", func(ctx context.Context) error {
		st, err := steps(ctx)
		if err != nil {
			return err
		}
		if len(st) != 3 || st[0].State != protocol.StepDone || st[1].State != protocol.StepDone || st[2].State != protocol.StepDone {
			return fmt.Errorf("steps %+v", st)
		}
		if st[1].Log != "step 1/2: RUN a\ncompiling\nstep 2/2: RUN b\nlinking\nfinished\n" || st[1].EndedAt == nil {
			t.Fatalf("done: build %+v", st[1])
		}
		// The push ran between two looks: its log is read once it ended.
		if st[2].Detail != "pushed r:1 (sha256:0)" || st[2].Log != "pushing r:1\npushed r:1 (sha256:0)\n" {
			return fmt.Errorf("push %+v", st[2])
		}
		return nil
	})
	s.follow(nil, nil, time.Now())
	s.mu.Lock()
	kept := len(s.logs)
	s.mu.Unlock()
	if kept != 0 {
		t.Errorf("%d logs kept after the pod is gone", kept)
	}
	cancel()
	s.wait()
}

// The followers, the loop's follow and the reports' get run at once (go test -race): a stream that
// ends while its container runs is opened again, its log read anew rather than appended twice.
func TestStepLogsConcurrent(t *testing.T) {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "uid"},
		Spec: corev1.PodSpec{InitContainers: []corev1.Container{{Name: protocol.ImageBuildContainerName}}},
		Status: corev1.PodStatus{InitContainerStatuses: []corev1.ContainerStatus{{Name: protocol.ImageBuildContainerName, ContainerID: "containerd://b",
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}}}}
	client := fake.NewSimpleClientset(pod) // its logs are "fake logs", and the stream ends
	ctx, cancel := context.WithCancel(context.Background())
	s := newStepLogs(ctx, slog.Default(), client, func() {})
	live := map[types.UID]bool{"uid": true}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; i < 200; i++ {
			s.follow([]*corev1.Pod{pod}, live, time.Now())
		}
	}()
	for i := 0; i < 200; i++ {
		s.get("uid", "containerd://b")
		StartupSteps([]*corev1.Pod{pod}, s.get)
	}
	<-done
	cancel()
	s.wait()
	if l, _ := s.get("uid", "containerd://b"); l.log != "fake logs\n" && l.log != "" {
		t.Errorf("after the stream was opened again: %q, want the log once", l.log)
	}
}
