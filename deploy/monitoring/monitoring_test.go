// Package monitoring holds Hangar's Grafana dashboard and Prometheus alert rules; this test checks
// that every metric they use is one the code registers, with the labels they match on.
package monitoring

import (
	"database/sql"
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/common/model"
	"go.yaml.in/yaml/v3"
)

// targetLabels are the labels Prometheus adds to every scraped series.
var targetLabels = []string{"instance", "job", "namespace", "pod", "service", "container", "endpoint"}

// metric is a registered metric family: its series names (histograms: _bucket, _sum, _count) and
// label names.
type metric struct {
	labels []string
}

// registered scans the code under internal/ (tests aside) for the metrics it registers: the Name
// of every prometheus.*Opts literal, the name of every prometheus.NewDesc, and the families of the
// standard collectors the code installs.
func registered(t *testing.T) map[string]metric {
	t.Helper()
	out := map[string]metric{}
	add := func(name string, histogram bool, labels []string) {
		if histogram {
			for _, suffix := range []string{"_bucket", "_sum", "_count"} {
				l := labels
				if suffix == "_bucket" {
					l = append(slices.Clone(labels), "le")
				}
				out[name+suffix] = metric{labels: l}
			}
			return
		}
		out[name] = metric{labels: labels}
	}
	calls := map[string]bool{}
	root := filepath.Join("..", "..", "internal")
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "testutil" || d.Name() == "e2e" || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			return err
		}
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			pkg, fn := selector(call.Fun)
			switch {
			case pkg == "collectors":
				calls[fn] = true
			case pkg == "prometheus" && fn == "NewDesc" && len(call.Args) >= 3:
				if name, ok := stringLit(call.Args[0]); ok {
					add(name, false, stringList(call.Args[2]))
				}
			case pkg == "prometheus" && strings.HasPrefix(fn, "New") && len(call.Args) >= 1:
				lit, ok := call.Args[0].(*ast.CompositeLit)
				if !ok {
					return true
				}
				_, opts := selector(lit.Type)
				name := optsName(lit)
				if name == "" {
					return true
				}
				var labels []string
				if len(call.Args) >= 2 {
					labels = stringList(call.Args[1])
				}
				add(name, opts == "HistogramOpts", labels)
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// The standard collectors, as installed: their own descriptions name their families.
	var std []prometheus.Collector
	if calls["NewGoCollector"] {
		std = append(std, collectors.NewGoCollector())
	}
	if calls["NewProcessCollector"] {
		std = append(std, collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	}
	if calls["NewDBStatsCollector"] {
		std = append(std, collectors.NewDBStatsCollector((*sql.DB)(nil), "hangar"))
	}
	descName := regexp.MustCompile(`fqName: "([^"]+)"`)
	descLabels := regexp.MustCompile(`(?:constLabels|variableLabels): \{([^}]*)\}`)
	for _, c := range std {
		ch := make(chan *prometheus.Desc, 1000)
		c.Describe(ch)
		close(ch)
		for d := range ch {
			m := descName.FindStringSubmatch(d.String())
			if m == nil {
				t.Fatalf("cannot read %s", d)
			}
			var labels []string
			for _, l := range descLabels.FindAllStringSubmatch(d.String(), -1) {
				for _, kv := range strings.Split(l[1], ",") {
					if k, _, _ := strings.Cut(kv, "="); strings.TrimSpace(k) != "" {
						labels = append(labels, strings.Trim(strings.TrimSpace(k), `"`))
					}
				}
			}
			add(m[1], false, labels)
		}
	}
	return out
}

func selector(e ast.Expr) (pkg, name string) {
	s, ok := e.(*ast.SelectorExpr)
	if !ok {
		return "", ""
	}
	x, ok := s.X.(*ast.Ident)
	if !ok {
		return "", ""
	}
	return x.Name, s.Sel.Name
}

func stringLit(e ast.Expr) (string, bool) {
	b, ok := e.(*ast.BasicLit)
	if !ok || b.Kind != token.STRING {
		return "", false
	}
	s, err := strconv.Unquote(b.Value)
	return s, err == nil
}

func stringList(e ast.Expr) []string {
	lit, ok := e.(*ast.CompositeLit)
	if !ok {
		return nil
	}
	var out []string
	for _, el := range lit.Elts {
		if s, ok := stringLit(el); ok {
			out = append(out, s)
		}
	}
	return out
}

// optsName is the full name of a prometheus.*Opts literal (Namespace_Subsystem_Name).
func optsName(lit *ast.CompositeLit) string {
	parts := map[string]string{}
	for _, el := range lit.Elts {
		kv, ok := el.(*ast.KeyValueExpr)
		if !ok {
			continue
		}
		k, ok := kv.Key.(*ast.Ident)
		if !ok {
			continue
		}
		if s, ok := stringLit(kv.Value); ok {
			parts[k.Name] = s
		}
	}
	if parts["Name"] == "" {
		return ""
	}
	return prometheus.BuildFQName(parts["Namespace"], parts["Subsystem"], parts["Name"])
}

// selectorRef is one vector selector of an expression: the metric and the labels it matches on.
type selectorRef struct {
	metric string
	labels []string
}

var (
	promString   = regexp.MustCompile("\"(?:[^\"\\\\]|\\\\.)*\"|'(?:[^'\\\\]|\\\\.)*'|`[^`]*`")
	promRange    = regexp.MustCompile(`\[[^\]]*\]`)
	promGrouping = regexp.MustCompile(`\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)`)
	promMatchers = regexp.MustCompile(`\{([^}]*)\}`)
	promMatcher  = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)\s*(?:=~|!~|!=|=)`)
	promIdent    = regexp.MustCompile(`\b[a-zA-Z_:][a-zA-Z0-9_:]*`)
	promKeywords = []string{"and", "or", "unless", "bool", "offset", "inf", "nan", "atan2"}
)

// selectors reads the vector selectors of a PromQL expression: with strings, ranges and grouping
// clauses taken out, every identifier not called as a function is a metric name.
func selectors(expr string) ([]selectorRef, error) {
	e := promString.ReplaceAllString(expr, `""`)
	e = promRange.ReplaceAllString(e, "")
	e = promGrouping.ReplaceAllString(e, "")
	var out []selectorRef
	locs := promIdent.FindAllStringIndex(e, -1)
	for _, loc := range locs {
		name := e[loc[0]:loc[1]]
		rest := strings.TrimLeft(e[loc[1]:], " \t\n")
		if strings.HasPrefix(rest, "(") || slices.Contains(promKeywords, name) {
			continue // a function, an aggregation or an operator
		}
		if loc[0] > 0 && strings.ContainsAny(e[loc[0]-1:loc[0]], "{,") {
			continue // a label inside a matcher
		}
		if inBraces(e, loc[0]) {
			continue
		}
		ref := selectorRef{metric: name}
		if strings.HasPrefix(rest, "{") {
			if m := promMatchers.FindStringSubmatch(rest); m != nil {
				for _, l := range promMatcher.FindAllStringSubmatch(m[1], -1) {
					ref.labels = append(ref.labels, l[1])
				}
			}
		}
		out = append(out, ref)
	}
	return out, nil
}

// inBraces says whether position i of e is inside a {...} matcher list.
func inBraces(e string, i int) bool {
	open := strings.LastIndex(e[:i], "{")
	return open >= 0 && !strings.Contains(e[open:i], "}")
}

// The scanner reads what it must: metric names, not functions, grouping labels or matcher labels.
func TestSelectors(t *testing.T) {
	got, _ := selectors(`sum by (le, backend) (rate(a_bucket{x="y,z", w=~"5.."}[$__rate_interval])) / on () b unless c{q!="1"} offset 5m > 0.5 and bool d`)
	want := []selectorRef{{"a_bucket", []string{"x", "w"}}, {"b", nil}, {"c", []string{"q"}}, {"d", nil}}
	if len(got) != len(want) {
		t.Fatalf("got %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i].metric != want[i].metric || !slices.Equal(got[i].labels, want[i].labels) {
			t.Fatalf("got %+v, want %+v", got, want)
		}
	}
}

// exprs returns the PromQL expressions of the dashboard and the rules, each with where it is.
func exprs(t *testing.T) map[string]string {
	t.Helper()
	out := map[string]string{}
	b, err := os.ReadFile("hangar-dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	type panel struct {
		Title   string `json:"title"`
		Targets []struct {
			Expr string `json:"expr"`
		} `json:"targets"`
		Panels []json.RawMessage `json:"panels"`
	}
	var dash struct {
		Panels []json.RawMessage `json:"panels"`
	}
	if err := json.Unmarshal(b, &dash); err != nil {
		t.Fatalf("hangar-dashboard.json: %v", err)
	}
	var walk func([]json.RawMessage)
	walk = func(ps []json.RawMessage) {
		for _, raw := range ps {
			var p panel
			if err := json.Unmarshal(raw, &p); err != nil {
				t.Fatal(err)
			}
			for i, tg := range p.Targets {
				out["dashboard panel "+strconv.Quote(p.Title)+" target "+strconv.Itoa(i)] = tg.Expr
			}
			walk(p.Panels)
		}
	}
	walk(dash.Panels)

	b, err = os.ReadFile("hangar-alerts.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var rules struct {
		Groups []struct {
			Name  string `yaml:"name"`
			Rules []struct {
				Alert       string            `yaml:"alert"`
				Expr        string            `yaml:"expr"`
				For         string            `yaml:"for"`
				Labels      map[string]string `yaml:"labels"`
				Annotations map[string]string `yaml:"annotations"`
			} `yaml:"rules"`
		} `yaml:"groups"`
	}
	dec := yaml.NewDecoder(strings.NewReader(string(b)))
	dec.KnownFields(true)
	if err := dec.Decode(&rules); err != nil {
		t.Fatalf("hangar-alerts.yaml: %v", err)
	}
	seen := map[string]bool{}
	for _, g := range rules.Groups {
		if g.Name == "" || len(g.Rules) == 0 {
			t.Errorf("rule group %q: want a name and rules", g.Name)
		}
		for _, r := range g.Rules {
			where := "alert " + r.Alert
			if !regexp.MustCompile(`^Hangar[A-Z][A-Za-z]+$`).MatchString(r.Alert) || seen[r.Alert] {
				t.Errorf("%s: want a unique name HangarSomething", where)
			}
			seen[r.Alert] = true
			if _, err := model.ParseDuration(r.For); err != nil {
				t.Errorf("%s: for %q: %v", where, r.For, err)
			}
			if s := r.Labels["severity"]; s != "warning" && s != "critical" {
				t.Errorf("%s: severity %q, want warning or critical", where, s)
			}
			if r.Annotations["summary"] == "" {
				t.Errorf("%s: no summary", where)
			}
			out[where] = r.Expr
		}
	}
	for _, want := range []string{"HangarWorkspaceStuckStarting", "HangarBuildQueueStalled", "HangarAgentNotReconciling"} {
		if !seen[want] {
			t.Errorf("no alert %s", want)
		}
	}
	return out
}

// Every metric the dashboard and the alert rules use is registered by the code (or, listed in
// pendingOps, about to be), and every label they match on is one of its labels or a target label.
func TestMetricsAreRegistered(t *testing.T) {
	reg := registered(t)
	for _, known := range []string{"hangar_workspaces", "hangar_reconcile_duration_seconds_bucket", "hangar_proxy_requests_total", "go_goroutines"} {
		if _, ok := reg[known]; !ok {
			t.Fatalf("the scan of the code misses %s: it found %d names", known, len(reg))
		}
	}
	used := 0
	for where, expr := range exprs(t) {
		if strings.TrimSpace(expr) == "" {
			t.Errorf("%s: empty expression", where)
			continue
		}
		if strings.Count(expr, "(") != strings.Count(expr, ")") || strings.Count(expr, "{") != strings.Count(expr, "}") {
			t.Errorf("%s: unbalanced brackets: %s", where, expr)
		}
		refs, _ := selectors(expr)
		if len(refs) == 0 {
			t.Errorf("%s: no metric in %s", where, expr)
		}
		for _, ref := range refs {
			used++
			m, ok := reg[ref.metric]
			if !ok {
				t.Errorf("%s: metric %s is not registered by the code", where, ref.metric)
				continue
			}
			for _, l := range ref.labels {
				if !slices.Contains(m.labels, l) && !slices.Contains(targetLabels, l) {
					t.Errorf("%s: %s has no label %q (its labels: %v)", where, ref.metric, l, m.labels)
				}
			}
		}
	}
	t.Logf("%d metric references checked", used)
}
