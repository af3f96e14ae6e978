package agent

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"io"
	"log/slog"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/hangar-dev/hangar/internal/agent/errtrack"
	"github.com/hangar-dev/hangar/internal/imagebuild"
	"github.com/hangar-dev/hangar/internal/projectclone"
	"github.com/hangar-dev/hangar/internal/protocol"
)

// The startup steps the agent sees (docs/decisions.md, "Image build progress" and "Startup
// steps"). A workspace whose definition builds an image runs three init containers before its
// main container: prepare, build and push; one with projects clones them in another. The agent
// reports each as a startup step of the workspace, from the pod's status (its state and times)
// and from its log, which the agent follows while the container runs: the latest progress line
// the container's program wrote (its IsProgress) and the last MaxStepLogBytes of output.

// stepOfContainer names the startup step each init container that is one is, and progress says
// which lines of its log say how far it is (its program's own IsProgress).
var stepOfContainer = map[string]struct {
	step     string
	progress func(string) bool
}{
	protocol.ImagePrepareContainerName: {protocol.StepImagePrepare, imagebuild.IsProgress},
	protocol.ImageBuildContainerName:   {protocol.StepImageBuild, imagebuild.IsProgress},
	protocol.ImagePushContainerName:    {protocol.StepImagePush, imagebuild.IsProgress},
	protocol.ProjectCloneContainerName: {protocol.StepProjectClone, projectclone.IsProgress},
}

// maxLogLine bounds one line of a followed log: a longer one is cut (a build step that prints a
// megabyte without a newline does not grow the agent's memory).
const maxLogLine = 4 << 10

// stepLog is what the agent has read of one init container's log.
type stepLog struct {
	log    string // the last protocol.MaxStepLogBytes, cut at a line
	detail string // the latest progress line
}

// StartupSteps returns the startup steps of a workspace's pods: those of its newest pod that is
// not being deleted, one per image build init container in the pod's order, or nil when it has
// none. logs gives what the agent has followed of one run of a container (its container ID; ok
// false: nothing); a run that ended without a followed log gets its termination message, the tail
// the executor leaves there.
func StartupSteps(pods []*corev1.Pod, logs func(uid types.UID, containerID string) (stepLog, bool)) []protocol.StartupStep {
	pod := newestPod(pods)
	if pod == nil {
		return nil
	}
	status := map[string]corev1.ContainerStatus{}
	for _, cs := range pod.Status.InitContainerStatuses {
		status[cs.Name] = cs
	}
	var steps []protocol.StartupStep
	for _, c := range pod.Spec.InitContainers {
		of, ok := stepOfContainer[c.Name]
		if !ok {
			continue
		}
		st := protocol.StartupStep{Name: of.step, State: protocol.StepPending}
		cs := status[c.Name]
		var message, id string
		switch {
		case cs.State.Running != nil:
			st.State = protocol.StepRunning
			st.StartedAt = timeOf(cs.State.Running.StartedAt.Time)
			id = cs.ContainerID
		case cs.State.Terminated != nil:
			t := cs.State.Terminated
			st.State = protocol.StepDone
			if t.ExitCode != 0 {
				st.State = protocol.StepFailed
			}
			st.StartedAt, st.EndedAt = timeOf(t.StartedAt.Time), timeOf(t.FinishedAt.Time)
			message, id = t.Message, t.ContainerID
		case cs.LastTerminationState.Terminated != nil && cs.LastTerminationState.Terminated.ExitCode != 0:
			// Waiting to be run again after a failure (the kubelet's back-off): it failed.
			t := cs.LastTerminationState.Terminated
			st.State = protocol.StepFailed
			st.StartedAt, st.EndedAt = timeOf(t.StartedAt.Time), timeOf(t.FinishedAt.Time)
			message, id = t.Message, t.ContainerID
		}
		if st.EndedAt != nil && st.StartedAt != nil && st.EndedAt.Before(*st.StartedAt) {
			st.EndedAt = st.StartedAt
		}
		if l, ok := logs(pod.UID, id); ok && id != "" && (l.log != "" || message == "") {
			st.Log, st.Detail = l.log, l.detail
		} else if message != "" {
			st.Log = protocol.TruncateLogHead(strings.ToValidUTF8(message, "\uFFFD"), protocol.MaxStepLogBytes)
			st.Detail = lastProgress(st.Log, of.progress)
		}
		steps = append(steps, st)
	}
	return steps
}

// newestPod is the pod created last among those not being deleted (a Recreate Deployment's old
// pod may still be terminating), or nil.
func newestPod(pods []*corev1.Pod) *corev1.Pod {
	var newest *corev1.Pod
	for _, p := range pods {
		if p.DeletionTimestamp != nil {
			continue
		}
		if newest == nil || p.CreationTimestamp.After(newest.CreationTimestamp.Time) ||
			p.CreationTimestamp.Equal(&newest.CreationTimestamp) && p.Name > newest.Name {
			newest = p
		}
	}
	return newest
}

func timeOf(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	u := t.UTC()
	return &u
}

// lastProgress is the last progress line of a log, cut to protocol.MaxStepDetailBytes.
func lastProgress(log string, progress func(string) bool) string {
	lines := strings.Split(log, "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		if progress(lines[i]) {
			return protocol.TruncateMessage(lines[i], protocol.MaxStepDetailBytes)
		}
	}
	return ""
}

// stepsKey identifies what a report of steps says, to send them again only when it changed.
func stepsKey(steps []protocol.StartupStep) [sha256.Size]byte {
	h := sha256.New()
	for _, st := range steps {
		h.Write([]byte(st.Name + "\x00" + st.State + "\x00" + st.Detail + "\x00" + st.Log + "\x00"))
		for _, t := range []*time.Time{st.StartedAt, st.EndedAt} {
			if t != nil {
				h.Write([]byte(t.Format(time.RFC3339Nano)))
			}
			h.Write([]byte{0})
		}
	}
	var k [sha256.Size]byte
	h.Sum(k[:0])
	return k
}

// stepLogs follows the logs of the image build's init containers, one goroutine and one log
// stream per run of a container, and keeps what they said until their pod is gone; and it
// remembers which steps the server has. It lives as long as the agent's loop, across the
// reconcilers that full syncs build (hourly): a full sync neither reads the logs again nor sends
// every build's steps again.
type stepLogs struct {
	ctx    context.Context
	log    *slog.Logger
	client kubernetes.Interface
	// changed is called when a followed container's progress line changes: the loop reports it.
	changed func()

	mu     sync.Mutex
	logs   map[logKey]*followed
	sent   map[errtrack.Key][sha256.Size]byte // the steps last reported and answered (stepsKey)
	warned bool                               // the missing pods/log permission was logged
	wg     sync.WaitGroup
}

// logKey names one run of a container: a container restarted after a failure is a new run with
// its own log.
type logKey struct {
	uid         types.UID
	containerID string
}

type followed struct {
	// buf is the log's end: appended to, and cut to its last protocol.MaxStepLogBytes (at a
	// line) when it grows past twice that, so that a line costs no copy of the whole tail.
	buf    []byte
	detail string // the latest progress line
	cut    bool   // lines were dropped from buf's beginning
	// streaming: a goroutine reads the log's stream. A stream that ends while its container
	// still runs (the API server restarted, a proxy's idle timeout) is opened again.
	streaming                 bool
	namespace, pod, container string
	progress                  func(string) bool
}

func newStepLogs(ctx context.Context, log *slog.Logger, client kubernetes.Interface, changed func()) *stepLogs {
	return &stepLogs{ctx: ctx, log: log, client: client, changed: changed, logs: map[logKey]*followed{}, sent: map[errtrack.Key][sha256.Size]byte{}}
}

// get is StartupSteps' logs.
func (s *stepLogs) get(uid types.UID, containerID string) (stepLog, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f, ok := s.logs[logKey{uid, containerID}]
	if !ok {
		return stepLog{}, false
	}
	log := string(f.buf)
	if f.cut {
		log = protocol.TruncatedPrefix + log
	}
	return stepLog{log: protocol.TruncateLogHead(log, protocol.MaxStepLogBytes), detail: f.detail}, true
}

// unsent reports whether steps differ from what the server last answered for k.
func (s *stepLogs) unsent(k errtrack.Key, steps []protocol.StartupStep) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	sent, ok := s.sent[k]
	return !ok || sent != stepsKey(steps)
}

// answered records the steps the server answered for k (nil: forget k).
func (s *stepLogs) answered(k errtrack.Key, steps []protocol.StartupStep) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if steps == nil {
		delete(s.sent, k)
		return
	}
	s.sent[k] = stepsKey(steps)
}

// recentEnd is how long after an image build container ended the agent still reads its log when
// it has not followed it: a step that ran between two looks (a cached prepare takes a second).
// Older ones are not read: a restarted agent does not fetch the logs of every workspace built
// since, ahead of the applies that share its client's rate limit.
const recentEnd = 2 * time.Minute

// follow starts following the log of every image build init container that runs in pods, or
// ended less than recentEnd before now, and is not followed yet (or whose stream ended while it
// runs); and forgets the logs of pods that are no longer in live (every pod the informer holds).
func (s *stepLogs) follow(pods []*corev1.Pod, live map[types.UID]bool, now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for k := range s.logs {
		if !live[k.uid] {
			delete(s.logs, k)
		}
	}
	for _, p := range pods {
		if p.DeletionTimestamp != nil {
			continue
		}
		for _, cs := range p.Status.InitContainerStatuses {
			if _, ok := stepOfContainer[cs.Name]; !ok {
				continue
			}
			id := ""
			switch t := cs.State.Terminated; {
			case cs.State.Running != nil:
				id = cs.ContainerID
			case t != nil && now.Sub(t.FinishedAt.Time) < recentEnd:
				id = t.ContainerID
			}
			if id == "" {
				continue
			}
			k := logKey{p.UID, id}
			f, ok := s.logs[k]
			switch {
			case !ok:
				f = &followed{namespace: p.Namespace, pod: p.Name, container: cs.Name, progress: stepOfContainer[cs.Name].progress}
				s.logs[k] = f
			case f.streaming || cs.State.Running == nil:
				continue
			default:
				// Its stream ended while it runs: read it again, from its tail.
				f.buf, f.cut = nil, false
			}
			f.streaming = true
			s.wg.Add(1)
			go s.run(k, f)
		}
	}
}

// run streams one container's log until it ends (the container ended, or the agent stops; for
// one that ended already, its log is read whole).
func (s *stepLogs) run(k logKey, f *followed) {
	defer s.wg.Done()
	defer func() {
		s.mu.Lock()
		f.streaming = false
		s.mu.Unlock()
	}()
	// The last lines are enough when the agent starts following a build that runs already (after a
	// restart, or a new leader): the tail is what is kept.
	tail := int64(protocol.MaxStepLogBytes / 16)
	rc, err := s.client.CoreV1().Pods(f.namespace).GetLogs(f.pod, &corev1.PodLogOptions{Container: f.container, Follow: true, TailLines: &tail}).Stream(s.ctx)
	if err != nil {
		if s.ctx.Err() == nil {
			s.fail(k, f, err)
		}
		return
	}
	defer rc.Close()
	s.read(k, f, rc)
}

// fail handles a log that could not be followed. Forbidden (a chart from before pods/log was in
// the agent's rules) is said once and the run is not tried again: its step still shows its state,
// and its termination message when it ends. Otherwise the log is forgotten, so that the next
// cycle tries again while the container runs.
func (s *stepLogs) fail(k logKey, f *followed, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if apierrors.IsForbidden(err) {
		if !s.warned {
			s.warned = true
			s.log.Warn("cannot follow image build logs: the agent may not get pods/log (grant it, as the hangar-agent chart does); builds show their state without their progress",
				"pod", f.namespace+"/"+f.pod, "err", err)
		}
		return
	}
	s.log.Debug("cannot follow an image build log; trying again", "pod", f.namespace+"/"+f.pod, "container", f.container, "err", err)
	if s.logs[k] == f && len(f.buf) == 0 {
		delete(s.logs, k)
	}
}

// read reads a log stream line by line into f.
func (s *stepLogs) read(k logKey, f *followed, r io.Reader) {
	br := bufio.NewReaderSize(r, maxLogLine)
	for {
		line, err := readLine(br)
		if line != "" || err == nil {
			s.add(f, line)
		}
		if err != nil {
			return
		}
	}
}

// readLine reads one line without its newline, cut at maxLogLine bytes (the rest of a longer
// line is dropped), as valid UTF-8.
func readLine(br *bufio.Reader) (string, error) {
	b, err := br.ReadSlice('\n')
	line := string(b)
	if errors.Is(err, bufio.ErrBufferFull) {
		// Over the bound: cut, marked, and the rest of the line dropped.
		line = protocol.TruncateMessage(line+" ", maxLogLine)
		for errors.Is(err, bufio.ErrBufferFull) {
			_, err = br.ReadSlice('\n')
		}
	}
	line = strings.TrimSuffix(strings.TrimSuffix(line, "\n"), "\r")
	return strings.ToValidUTF8(line, "\uFFFD"), err
}

// add appends a line to a followed log, and calls changed when it is a progress line that differs
// from the latest.
func (s *stepLogs) add(f *followed, line string) {
	s.mu.Lock()
	f.buf = append(append(f.buf, line...), '\n')
	if len(f.buf) > 2*protocol.MaxStepLogBytes {
		keep := f.buf[len(f.buf)-protocol.MaxStepLogBytes:]
		if i := bytes.IndexByte(keep, '\n'); i >= 0 && i+1 < len(keep) {
			keep = keep[i+1:]
		}
		f.buf, f.cut = append([]byte(nil), keep...), true
	}
	changed := false
	if f.progress != nil && f.progress(line) {
		detail := protocol.TruncateMessage(line, protocol.MaxStepDetailBytes)
		changed = detail != f.detail
		f.detail = detail
	}
	s.mu.Unlock()
	if changed {
		s.changed()
	}
}

// wait waits for the followers to end (their streams end with the agent's context).
func (s *stepLogs) wait() { s.wg.Wait() }

// podsOf returns the pods among an informer's objects. Their order does not matter: PodFailure
// looks at each, and newestPod breaks ties by name.
func podsOf(objs []any) []*corev1.Pod {
	pods := make([]*corev1.Pod, 0, len(objs))
	for _, o := range objs {
		if p, ok := o.(*corev1.Pod); ok {
			pods = append(pods, p)
		}
	}
	return pods
}
