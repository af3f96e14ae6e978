package imagebuild

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
)

// featureNode is one feature of the build: one the user named, or one a feature dependsOn.
type featureNode struct {
	Ref     string         // as referenced
	Repo    string         // the reference without its tag or digest, normalized: what installsAfter and FeatureOrder name
	Options map[string]any // the options it is installed with
	Meta    *featureMetadata
	Dir     string // the extracted folder: its name in the work directory, then its path in the image
	// index is the order of discovery: the user's features first, in their order, then the
	// dependencies as they were found. It breaks ties between features that may go in one round.
	index int
	key   string   // featureKey
	deps  []string // keys of the features it dependsOn
}

// featureKey is a feature's identity (Feature Equality: the same reference and the same options).
func featureKey(ref string, options map[string]any) string {
	if len(options) == 0 {
		options = nil // {} and no options are the same
	}
	b, _ := json.Marshal(options) // map keys sorted: canonical
	return ref + " " + string(b)
}

// installOrder orders the features as the Dev Containers spec's round-based sort does: a round
// is every feature whose dependsOn and installsAfter (among the features being installed) are
// installed already; of a round, those named earliest in FeatureOrder go first and the others
// wait for the next round; ties keep the discovery order. A round that installs nothing is a cycle,
// and the error names it.
func installOrder(nodes map[string]*featureNode, featureOrder []string, normalize func(string) string) ([]*featureNode, error) {
	priority := map[string]int{}
	for i, o := range featureOrder {
		repo := normalize(o)
		found := false
		for _, n := range nodes {
			if n.Repo == repo {
				found = true
			}
		}
		if !found {
			return nil, fmt.Errorf("overrideFeatureInstallOrder names %s, which is not one of the features", o)
		}
		if _, ok := priority[repo]; !ok {
			priority[repo] = len(featureOrder) - i
		}
	}
	// The edges: dependsOn, and installsAfter where it names a feature being installed.
	byRepo := map[string][]string{}
	for k, n := range nodes {
		byRepo[n.Repo] = append(byRepo[n.Repo], k)
	}
	edges := map[string][]string{}
	for k, n := range nodes {
		edges[k] = append(edges[k], n.deps...)
		for _, a := range n.Meta.InstallsAfter {
			for _, other := range byRepo[normalize(a)] {
				if other != k {
					edges[k] = append(edges[k], other)
				}
			}
		}
	}
	done := map[string]bool{}
	var order []*featureNode
	for len(order) < len(nodes) {
		var round []*featureNode
		for k, n := range nodes {
			if done[k] {
				continue
			}
			ready := true
			for _, d := range edges[k] {
				ready = ready && done[d]
			}
			if ready {
				round = append(round, n)
			}
		}
		if len(round) == 0 {
			return nil, cycleError(nodes, edges, done)
		}
		top := 0
		for _, n := range round {
			top = max(top, priority[n.Repo])
		}
		sort.Slice(round, func(i, j int) bool { return round[i].index < round[j].index })
		for _, n := range round {
			if priority[n.Repo] == top {
				order = append(order, n)
				done[n.key] = true
			}
		}
	}
	return order, nil
}

// cycleError names the features of one cycle among those left: each of them waits for another one
// left, so following those edges from any of them comes back to a feature already seen.
func cycleError(nodes map[string]*featureNode, edges map[string][]string, done map[string]bool) error {
	var left []string
	for k := range nodes {
		if !done[k] {
			left = append(left, k)
		}
	}
	sort.Slice(left, func(i, j int) bool { return nodes[left[i]].index < nodes[left[j]].index })
	seen := map[string]int{}
	var path []string
	for k := left[0]; ; {
		if i, ok := seen[k]; ok {
			cycle := append(path[i:], k)
			names := make([]string, len(cycle))
			for j, c := range cycle {
				names[j] = nodes[c].Ref
			}
			return fmt.Errorf("the features depend on each other in a cycle (dependsOn or installsAfter): %s", strings.Join(names, " -> "))
		}
		seen[k] = len(path)
		path = append(path, k)
		next := ""
		for _, d := range edges[k] {
			if !done[d] {
				next = d
				break
			}
		}
		if next == "" { // cannot happen: k would have been ready
			return fmt.Errorf("the features cannot be ordered: %s", nodes[k].Ref)
		}
		k = next
	}
}
