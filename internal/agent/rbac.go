package agent

import (
	"slices"

	rbacv1 "k8s.io/api/rbac/v1"
)

// The Kubernetes permissions the agent needs, derived from what it does: the Helm chart's
// ClusterRole and Role (deploy/helm/hangar-agent) grant exactly these, and the chart's test
// (deploy/helm) checks the rendered rules against them.
//
//   - every kind the server generates (knownKinds): patch and create (server-side apply: the API
//     server authorizes an apply that creates the object as a create too; TestHelmCharts found it),
//     get (existence and the inventory), list and watch (the informers: Deployments typed, the
//     others metadata only), and delete (prune and terminate); namespaces among them, which also
//     covers the Lease's namespace, created if missing (ensureNamespace);
//   - pods list and watch: the reconciler's informer reads pod failures;
//   - pods/log get: the image build's init containers' logs, followed for its progress (steps.go);
//   - events.k8s.io events create and patch: ApplyFailed and PodFailed Events (events.go);
//   - the leader-election Lease, in the lease namespace only (LeaseRules).
//
// A template that asks for other kinds needs more: the chart's agent.extraRules.
var (
	applyVerbs = []string{"create", "delete", "get", "list", "patch", "watch"}
)

// ClusterRules are the cluster-wide rules: workspaces live in namespaces the agent config chooses,
// and Namespaces are cluster-scoped. Resources are sorted, one rule per API group, groups sorted.
func ClusterRules() []rbacv1.PolicyRule {
	byGroup := map[string][]string{}
	for _, kd := range knownKinds {
		byGroup[kd.gvr.Group] = append(byGroup[kd.gvr.Group], kd.gvr.Resource)
	}
	var groups []string
	for g := range byGroup {
		groups = append(groups, g)
	}
	slices.Sort(groups)
	var rules []rbacv1.PolicyRule
	for _, g := range groups {
		res := byGroup[g]
		slices.Sort(res)
		rules = append(rules, rbacv1.PolicyRule{APIGroups: []string{g}, Resources: res, Verbs: slices.Clone(applyVerbs)})
	}
	rules = append(rules, rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"list", "watch"}})
	// The image build's progress and log: its init containers' logs, followed (steps.go).
	rules = append(rules, rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"pods/log"}, Verbs: []string{"get"}})
	// Events on workspaces' Deployments (events.go): client-go's events.k8s.io broadcaster creates
	// an Event and patches it when it repeats (its series).
	rules = append(rules, rbacv1.PolicyRule{APIGroups: []string{"events.k8s.io"}, Resources: []string{"events"}, Verbs: []string{"create", "patch"}})
	return rules
}

// LeaseRules are the rules in the lease namespace (--lease-namespace): leader election reads,
// creates and renews its Lease (client-go's LeaseLock).
func LeaseRules() []rbacv1.PolicyRule {
	return []rbacv1.PolicyRule{{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"create", "get", "update"}}}
}
