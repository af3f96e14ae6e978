package protocol

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestTruncateMessage(t *testing.T) {
	for _, tc := range []struct {
		in   string
		max  int
		want string
	}{
		{"short", 100, "short"},
		{strings.Repeat("a", 20), 20, strings.Repeat("a", 20)},
		{strings.Repeat("a", 30), len(TruncatedSuffix) + 5, "aaaaa" + TruncatedSuffix},
		// "é" is two bytes: the cut falls inside the third and moves back before it.
		{"ééé" + strings.Repeat("a", 30), len(TruncatedSuffix) + 5, "éé" + TruncatedSuffix},
	} {
		if got := TruncateMessage(tc.in, tc.max); got != tc.want {
			t.Errorf("TruncateMessage(%q, %d) = %q, want %q", tc.in, tc.max, got, tc.want)
		}
	}
}

func TestTruncateMessagesCutsEveryMessage(t *testing.T) {
	long := strings.Repeat("m", MaxMessageBytes+1)
	req := ReconcileRequest{UpdateType: UpdatePartial, WorkspaceAgentInfos: []WorkspaceAgentInfo{{
		Name: "w", Namespace: "n",
		ErrorDetails: &ErrorDetails{ErrorType: ErrorTypeApplier, ErrorMessage: long},
		PodFailure:   &PodFailure{Reason: "CrashLoopBackOff", Message: long},
		LatestK8sDeploymentInfo: &DeploymentInfo{Metadata: DeploymentMetadata{ResourceVersion: "1"}, Status: &DeploymentStatus{
			Conditions: []DeploymentCondition{{Type: "Progressing", Message: long}, {Type: "Available", Message: "ok"}}}},
	}}}
	if n := TruncateMessages(&req); n != 3 {
		t.Fatalf("cut %d messages, want 3", n)
	}
	i := req.WorkspaceAgentInfos[0]
	for _, s := range []string{i.ErrorDetails.ErrorMessage, i.PodFailure.Message, i.LatestK8sDeploymentInfo.Status.Conditions[0].Message} {
		if len(s) != MaxMessageBytes || !strings.HasSuffix(s, TruncatedSuffix) {
			t.Errorf("a message is %d bytes after the cut: %.40q…", len(s), s)
		}
	}
	if i.LatestK8sDeploymentInfo.Status.Conditions[1].Message != "ok" || i.PodFailure.Reason != "CrashLoopBackOff" {
		t.Errorf("what was within the bounds changed: %+v", i)
	}
}

func TestValidResourceVersion(t *testing.T) {
	for rv, want := range map[string]bool{
		"1": true, "18446744073709551615": true, "opaque/v=3:x": true, strings.Repeat("9", MaxResourceVersionBytes): true,
		"": false, "1 2": false, "12\n": false, "é": false, "\x00": false, strings.Repeat("9", MaxResourceVersionBytes+1): false,
	} {
		if got := ValidResourceVersion(rv); got != want {
			t.Errorf("ValidResourceVersion(%.20q) = %v, want %v", rv, got, want)
		}
	}
}

// FuzzTruncateMessages decodes arbitrary reconcile requests as the server does and cuts their
// messages: no message is then over MaxMessageBytes, a message within it is unchanged, a cut one is
// a prefix of the original plus TruncatedSuffix, and valid UTF-8 stays valid.
func FuzzTruncateMessages(f *testing.F) {
	f.Add([]byte(`{"update_type":"partial","workspace_agent_infos":[{"name":"w","namespace":"n","pod_failure":{"reason":"r","message":"m"},"error_details":{"error_type":"applier","error_message":"e"},"latest_k8s_deployment_info":{"metadata":{"resourceVersion":"1"},"status":{"conditions":[{"type":"Progressing","message":"x"}]}}}]}`), 3)
	f.Add([]byte(`{"workspace_agent_infos":[{"pod_failure":{"message":"ééééé"}}]}`), 5000)
	f.Fuzz(func(t *testing.T, body []byte, repeat int) {
		var req ReconcileRequest
		if json.Unmarshal(body, &req) != nil {
			return
		}
		// Grow every message past the bound some of the time, so that cuts happen.
		repeat = repeat % 2000
		if repeat < 0 {
			repeat = -repeat
		}
		type msg struct {
			p    *string
			orig string
		}
		var msgs []msg
		for i := range req.WorkspaceAgentInfos {
			info := &req.WorkspaceAgentInfos[i]
			if e := info.ErrorDetails; e != nil {
				msgs = append(msgs, msg{p: &e.ErrorMessage})
			}
			if p := info.PodFailure; p != nil {
				msgs = append(msgs, msg{p: &p.Message})
			}
			if d := info.LatestK8sDeploymentInfo; d != nil && d.Status != nil {
				for j := range d.Status.Conditions {
					msgs = append(msgs, msg{p: &d.Status.Conditions[j].Message})
				}
			}
		}
		for i := range msgs {
			*msgs[i].p = strings.Repeat(*msgs[i].p, repeat+1)
			msgs[i].orig = *msgs[i].p
		}
		TruncateMessages(&req)
		for _, m := range msgs {
			got := *m.p
			switch {
			case len(m.orig) <= MaxMessageBytes:
				if got != m.orig {
					t.Fatalf("a message within the bound changed: %q -> %q", m.orig, got)
				}
			case len(got) > MaxMessageBytes:
				t.Fatalf("a message is %d bytes after the cut", len(got))
			case !strings.HasSuffix(got, TruncatedSuffix) || !strings.HasPrefix(m.orig, strings.TrimSuffix(got, TruncatedSuffix)):
				t.Fatalf("the cut is not a prefix plus the suffix: %.60q", got)
			case utf8.ValidString(m.orig) && !utf8.ValidString(got):
				t.Fatalf("the cut split a UTF-8 sequence: %.60q", got)
			}
		}
	})
}
