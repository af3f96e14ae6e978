package protocol

import (
	"strings"
	"unicode/utf8"
)

// Bounds on what an agent reports (docs/decisions.md, "Bounds on what agents send"). An agent's
// report is stored and shown to users: without them, one reconcile could store megabytes per
// workspace, served back on every GET.
//
// Identifiers the server compares or echoes (a resourceVersion, a condition's type, status and
// reason, a pod failure's reason) are refused when over their bound: cutting one would make two
// different values equal. Free text the agent forwards from Kubernetes (a condition's message, a
// pod failure's message, an apply error) is cut at its bound (TruncateMessages): the agent does
// not write that text, and refusing it would refuse the whole report, every workspace of the
// agent with it, for as long as Kubernetes says the long thing.
const (
	// MaxResourceVersionBytes bounds a Deployment's metadata.resourceVersion. Kubernetes' are
	// decimal etcd revisions (up to 20 digits); the bound leaves room for an opaque one.
	MaxResourceVersionBytes = 128
	// MaxConditionIdentifierBytes bounds a condition's type, status and reason, and a pod
	// failure's reason: Kubernetes' own bound on a condition's type (metav1.Condition) is 316.
	MaxConditionIdentifierBytes = 316
	// MaxConditions bounds the conditions of one Deployment; Kubernetes sets at most three types.
	MaxConditions = 16
	// MaxMessageBytes is where a condition's message, a pod failure's message and an error
	// message are cut (TruncateMessages).
	MaxMessageBytes = 4 << 10
	// MaxStartupSteps bounds a workspace's startup steps in one report.
	MaxStartupSteps = 8
	// MaxStepDetailBytes is where a startup step's detail (one progress line) is cut.
	MaxStepDetailBytes = 512
	// MaxStepLogBytes bounds a startup step's log: its last lines are kept (TruncateLogHead).
	MaxStepLogBytes = 16 << 10
)

// TruncatedSuffix ends a message cut by TruncateMessages.
const TruncatedSuffix = " …(truncated)"

// TruncateMessages cuts every free-text message of req longer than MaxMessageBytes to at most
// MaxMessageBytes bytes, ending in TruncatedSuffix, on a UTF-8 boundary, and says how many it cut.
// The agent calls it before sending, the server after decoding.
func TruncateMessages(req *ReconcileRequest) int {
	n := 0
	cut := func(s *string) {
		if len(*s) > MaxMessageBytes {
			*s = TruncateMessage(*s, MaxMessageBytes)
			n++
		}
	}
	for i := range req.WorkspaceAgentInfos {
		info := &req.WorkspaceAgentInfos[i]
		if e := info.ErrorDetails; e != nil {
			cut(&e.ErrorMessage)
		}
		if p := info.PodFailure; p != nil {
			cut(&p.Message)
		}
		for j := range info.PodAlerts {
			cut(&info.PodAlerts[j].Message)
		}
		if d := info.LatestK8sDeploymentInfo; d != nil && d.Status != nil {
			for j := range d.Status.Conditions {
				cut(&d.Status.Conditions[j].Message)
			}
		}
		for j := range info.StartupSteps {
			st := &info.StartupSteps[j]
			if len(st.Detail) > MaxStepDetailBytes {
				st.Detail = TruncateMessage(st.Detail, MaxStepDetailBytes)
				n++
			}
			if len(st.Log) > MaxStepLogBytes {
				st.Log = TruncateLogHead(st.Log, MaxStepLogBytes)
				n++
			}
		}
	}
	return n
}

// TruncatedPrefix begins a log cut by TruncateLogHead.
const TruncatedPrefix = "…(earlier lines cut)\n"

// TruncateLogHead returns s if it is at most max bytes long, else its last lines that, after
// TruncatedPrefix, fit in max bytes: cut after a newline when there is one in the part kept,
// else before a UTF-8 sequence. A log's end says most (the failing step, the latest progress).
func TruncateLogHead(s string, max int) string {
	if len(s) <= max {
		return s
	}
	keep := max - len(TruncatedPrefix)
	if keep <= 0 {
		return TruncatedPrefix[:0]
	}
	start := len(s) - keep
	if i := strings.IndexByte(s[start:], '\n'); i >= 0 && i+1 < len(s)-start {
		start += i + 1
	} else {
		for start < len(s) && !utf8.RuneStart(s[start]) {
			start++
		}
	}
	return TruncatedPrefix + s[start:]
}

// TruncateMessage returns s if it is at most max bytes long, else its longest prefix that, with
// TruncatedSuffix, fits in max bytes, cut before a UTF-8 sequence, with the suffix.
func TruncateMessage(s string, max int) string {
	if len(s) <= max {
		return s
	}
	end := max - len(TruncatedSuffix)
	if end < 0 {
		end = 0
	}
	for end > 0 && !utf8.RuneStart(s[end]) {
		end--
	}
	return s[:end] + TruncatedSuffix
}

// ValidResourceVersion reports whether rv is a resourceVersion the server stores: 1 to
// MaxResourceVersionBytes printable ASCII characters without spaces (Kubernetes' are digits; the
// protocol treats them as opaque).
func ValidResourceVersion(rv string) bool {
	if len(rv) == 0 || len(rv) > MaxResourceVersionBytes {
		return false
	}
	for i := 0; i < len(rv); i++ {
		if rv[i] <= ' ' || rv[i] > '~' {
			return false
		}
	}
	return true
}
