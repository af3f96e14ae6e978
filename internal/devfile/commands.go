package devfile

import (
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/devfile/api/v2/pkg/apis/workspaces/v1alpha2"
	corev1 "k8s.io/api/core/v1"

	"github.com/hangar-dev/hangar/internal/workspace"
)

type commandInfo struct {
	index       int
	cmd         v1alpha2.Command
	kind        string // exec, apply, composite, custom
	inComposite bool
}

func (c *commandInfo) field() string { return fmt.Sprintf("devfile.commands[%d]", c.index) }

// parseCommands checks what commands refer to: Hangar runs commands only through events, but a
// command naming a component or command that does not exist is a broken devfile either way.
func parseCommands(v *workspace.ValidationError, cmds []v1alpha2.Command, comps map[string]*componentInfo) map[string]*commandInfo {
	infos := map[string]*commandInfo{}
	for i, c := range cmds {
		f := fmt.Sprintf("devfile.commands[%d]", i)
		info := &commandInfo{index: i, cmd: c}
		// A preStart exec command's id names its init container: the devfile spec's rule for ids is
		// Kubernetes' rule for container names.
		switch {
		case !workspace.IsDNSLabel(c.Id, 63):
			v.Add(f+".id", "must be a DNS label (lowercase letters, digits and '-', at most 63 characters), got %q", c.Id)
		case hasReservedPrefix(c.Id):
			v.Add(f+".id", "%q starts with %q, which is reserved for Hangar", c.Id, reservedName)
		}
		if _, dup := infos[c.Id]; dup {
			v.Add(f+".id", "%q is used by another command; command ids must be unique", c.Id)
		} else {
			infos[c.Id] = info
		}
		var kinds []string
		for _, k := range []struct {
			name string
			set  bool
		}{{"exec", c.Exec != nil}, {"apply", c.Apply != nil}, {"composite", c.Composite != nil}, {"custom", c.Custom != nil}} {
			if k.set {
				kinds = append(kinds, k.name)
			}
		}
		if len(kinds) != 1 {
			v.Add(f, "must set exactly one of exec, apply, composite or custom, got %d", len(kinds))
			continue
		}
		info.kind = kinds[0]
		switch info.kind {
		case "exec":
			switch comp := comps[c.Exec.Component]; {
			case comp == nil:
				v.Add(f+".exec.component", "%q is not the name of a component", c.Exec.Component)
			case comp.kind != "container":
				v.Add(f+".exec.component", "%q is a %s component; exec commands run in container components", c.Exec.Component, comp.kind)
			}
		case "apply":
			if comps[c.Apply.Component] == nil {
				v.Add(f+".apply.component", "%q is not the name of a component", c.Apply.Component)
			}
		}
	}
	for i, c := range cmds { // in devfile order, so that problems come in the same order every time
		info := infos[c.Id]
		if info == nil || info.index != i || info.kind != "composite" {
			continue
		}
		for j, id := range info.cmd.Composite.Commands {
			member := infos[id]
			switch {
			case member == nil:
				v.Add(fmt.Sprintf("%s.composite.commands[%d]", info.field(), j), "%q is not the id of a command", id)
			case member == info:
				v.Add(fmt.Sprintf("%s.composite.commands[%d]", info.field(), j), "a composite command cannot contain itself")
			default:
				member.inComposite = true
			}
		}
	}
	return infos
}

// expand returns the exec, apply and custom commands a command stands for, composites flattened in
// order. A cycle is reported once, on the field that closes it.
func expand(v *workspace.ValidationError, field string, id string, cmds map[string]*commandInfo, stack []string) []*commandInfo {
	c := cmds[id]
	if c == nil {
		return nil
	}
	if slices.Contains(stack, id) {
		v.Add(field, "command %q contains itself through %s", id, strings.Join(append(stack, id), " -> "))
		return nil
	}
	if c.kind != "composite" {
		return []*commandInfo{c}
	}
	var out []*commandInfo
	for j, m := range c.cmd.Composite.Commands {
		out = append(out, expand(v, fmt.Sprintf("%s.composite.commands[%d]", c.field(), j), m, cmds, append(stack, id))...)
	}
	return out
}

// parseEvents turns events into what the pod does: preStart commands become init containers,
// postStart and preStop exec commands lifecycle hooks of their container.
func (d *Devfile) parseEvents(v *workspace.ValidationError, ev *v1alpha2.Events, cmds map[string]*commandInfo, comps map[string]*componentInfo, undefinedVars map[string][]string) {
	if ev == nil {
		return
	}
	leaves := func(event string, ids []string) [][]*commandInfo {
		out := make([][]*commandInfo, len(ids))
		for j, id := range ids {
			f := fmt.Sprintf("devfile.events.%s[%d]", event, j)
			if cmds[id] == nil {
				v.Add(f, "%q is not the id of a command", id)
				continue
			}
			out[j] = expand(v, f, id, cmds, nil)
			d.warnParallel(event, cmds[id], cmds, map[string]bool{})
			for _, c := range out[j] {
				if keys, bad := undefinedVars[c.cmd.Id]; bad {
					v.Add(c.field(), "uses undefined variables: %s (define them under devfile.variables); the %s event runs it", strings.Join(keys, ", "), event)
				}
			}
		}
		return out
	}

	applied := map[string]bool{}
	for j, group := range leaves("preStart", ev.PreStart) {
		f := fmt.Sprintf("devfile.events.preStart[%d]", j)
		for _, c := range group {
			switch c.kind {
			case "exec":
				comp := comps[c.cmd.Exec.Component]
				if comp == nil || comp.container == nil {
					continue // refused by parseCommands
				}
				init := comp.container.asInit(c.cmd.Id)
				init.command = []string{"/bin/sh", "-c", shellScript([]execCommand{execOf(v, c)})}
				init.args = nil
				d.inits = append(d.inits, init)
			case "apply":
				comp := comps[c.cmd.Apply.Component]
				switch {
				case comp == nil:
				case comp.kind == "volume":
					// A volume exists before any container starts; applying it does nothing more.
				case comp.container != nil:
					if applied[c.cmd.Apply.Component] {
						v.Add(f, "applies component %q a second time; a preStart container runs once", c.cmd.Apply.Component)
						continue
					}
					applied[c.cmd.Apply.Component] = true
					d.inits = append(d.inits, comp.container.asInit(comp.container.name))
				default:
					v.Add(f, "applies the %s component %q before the workspace starts; Hangar runs only containers there", comp.kind, c.cmd.Apply.Component)
				}
			default:
				v.Add(f, "runs the %s command %q; preStart runs exec commands and applies container components", c.kind, c.cmd.Id)
			}
		}
	}
	d.checkInitNames(v, comps, applied)

	for _, hook := range []struct {
		event string
		ids   []string
		add   func(c *container, e execCommand)
	}{
		{"postStart", ev.PostStart, func(c *container, e execCommand) { c.postStart = append(c.postStart, e) }},
		{"preStop", ev.PreStop, func(c *container, e execCommand) {
			if e.oncePerWorkspace {
				v.Add(fmt.Sprintf("devfile.commands[%d].attributes[%q]", cmds[e.id].index, OncePerWorkspaceAttribute), "applies to commands of the postStart event only")
			}
			c.preStop = append(c.preStop, e)
		}},
	} {
		for j, group := range leaves(hook.event, hook.ids) {
			f := fmt.Sprintf("devfile.events.%s[%d]", hook.event, j)
			for _, c := range group {
				if c.kind != "exec" {
					v.Add(f, "runs the %s command %q; %s runs exec commands only (Hangar starts containers with the workspace, not after it)", c.kind, c.cmd.Id, hook.event)
					continue
				}
				comp := comps[c.cmd.Exec.Component]
				if comp == nil || comp.container == nil {
					continue
				}
				if applied[comp.container.name] {
					v.Add(f, "runs command %q in %q, which is a preStart init container and has ended by then", c.cmd.Id, comp.container.name)
					continue
				}
				hook.add(comp.container, execOf(v, c))
			}
		}
	}
	for j := range ev.PostStop {
		v.Add(fmt.Sprintf("devfile.events.postStop[%d]", j), "is not supported: nothing of the workspace runs after it stopped to run a command")
	}
	// Containers applied by preStart run only as init containers.
	for name := range applied {
		comps[name].initOnly = true
	}
}

// shellNameRe is a name /bin/sh can export.
var shellNameRe = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// warnParallel warns about composites with parallel: true that an event runs: Hangar runs their
// commands one after another (init containers run in order; hooks run one script).
func (d *Devfile) warnParallel(event string, c *commandInfo, cmds map[string]*commandInfo, seen map[string]bool) {
	if c == nil || c.kind != "composite" || seen[c.cmd.Id] {
		return
	}
	seen[c.cmd.Id] = true
	if p := c.cmd.Composite.Parallel; p != nil && *p {
		d.warnings = append(d.warnings, fmt.Sprintf("commands[%d] (%q) has parallel: true, which is ignored: the %s event runs its commands one after another", c.index, c.cmd.Id, event))
	}
	for _, m := range c.cmd.Composite.Commands {
		d.warnParallel(event, cmds[m], cmds, seen)
	}
}

// checkInitNames checks that init containers' names are unique among the pod's containers and init
// containers, the project clone's included (the names share one name space).
func (d *Devfile) checkInitNames(v *workspace.ValidationError, comps map[string]*componentInfo, applied map[string]bool) {
	seen := map[string]bool{}
	for name, c := range comps {
		if c.container != nil && !applied[name] {
			seen[name] = true
		}
	}
	if len(d.projects) > 0 {
		seen[CloneContainerName] = true // the first init container
	}
	for _, init := range d.inits {
		if seen[init.name] {
			v.Add("devfile.events.preStart", "init container %q has the name of another container or init container; rename the command or component", init.name)
		}
		seen[init.name] = true
	}
}

func execOf(v *workspace.ValidationError, c *commandInfo) execCommand {
	e := execCommand{id: c.cmd.Id, commandLine: c.cmd.Exec.CommandLine, workingDir: c.cmd.Exec.WorkingDir}
	if c.cmd.Attributes.Exists(OncePerWorkspaceAttribute) {
		var err error
		if e.oncePerWorkspace = c.cmd.Attributes.GetBoolean(OncePerWorkspaceAttribute, &err); err != nil {
			v.Add(fmt.Sprintf("%s.attributes[%q]", c.field(), OncePerWorkspaceAttribute), "must be true or false")
		}
	}
	if strings.TrimSpace(e.commandLine) == "" {
		v.Add(c.field()+".exec.commandLine", "is empty; an event runs this command")
	}
	seen := map[string]bool{}
	for i, env := range c.cmd.Exec.Env {
		ef := fmt.Sprintf("%s.exec.env[%d].name", c.field(), i)
		if !shellNameRe.MatchString(env.Name) {
			// shellScript exports it: /bin/sh refuses other names and the hook or init container fails.
			v.Add(ef, "must be letters, digits and '_' and not start with a digit, got %q; /bin/sh exports the command's environment and takes no other names", env.Name)
			continue
		}
		checkEnvName(v, ef, env.Name, seen, "in this command")
		e.env = append(e.env, corev1.EnvVar{Name: env.Name, Value: env.Value})
	}
	return e
}

// asInit returns a copy of c to run as an init container: same image, command, env, mounts and
// resources; no endpoints, hooks or keep-alive.
func (c *container) asInit(name string) container {
	init := *c
	init.name = name
	init.endpoints = nil
	init.postStart, init.preStop = nil, nil
	init.keepAlive = false
	init.deploymentAnnotations, init.serviceAnnotations = nil, nil
	return init
}

// shellScript is what `/bin/sh -c` runs for exec commands: each one in its working directory (where
// set) with its environment; several run in order, each in a subshell, stopping at the first that
// fails. Working directories and values are double-quoted (shellDoubleQuote), so that
// $PROJECT_SOURCE and the like expand as the devfile means.
func shellScript(cmds []execCommand) string {
	parts := make([]string, 0, len(cmds))
	for _, c := range cmds {
		var steps []string
		for _, e := range c.env {
			steps = append(steps, "export "+e.Name+"="+shellDoubleQuote(e.Value))
		}
		if c.workingDir != "" {
			steps = append(steps, "cd "+shellDoubleQuote(c.workingDir))
		}
		steps = append(steps, strings.TrimRight(c.commandLine, "\n"))
		s := strings.Join(steps, " && ")
		if len(cmds) > 1 {
			s = "(" + s + "\n)"
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, " && ")
}

// shellDoubleQuote quotes s for sh inside double quotes: spaces, double quotes, backslashes and
// backquotes are kept as they are, while $VAR, ${VAR} and also $(...) expand, as they would in the
// commandLine. `$(` is not escaped on purpose: that would take escaping every `$`, and
// `${PROJECT_SOURCE}/app` is what working directories and values mean. It is no security boundary:
// the devfile's author writes the commandLine that runs next to it.
func shellDoubleQuote(s string) string {
	r := strings.NewReplacer(`\`, `\\`, `"`, `\"`, "`", "\\`")
	return `"` + r.Replace(s) + `"`
}

// checkOtherComponents decides what happens to image, kubernetes and openshift components: ignored
// with a warning when only build or deploy commands use them, refused for any use Hangar would have
// to honour when the workspace starts.
func (d *Devfile) checkOtherComponents(v *workspace.ValidationError, comps []v1alpha2.Component, cmds map[string]*commandInfo, infos map[string]*componentInfo) {
	uses := map[string][]string{} // component -> "command id (group)" of each use
	var walk func(c *commandInfo, group string, seen map[string]bool)
	walk = func(c *commandInfo, group string, seen map[string]bool) {
		if c == nil || seen[c.cmd.Id] {
			return
		}
		seen[c.cmd.Id] = true
		if g := commandGroup(c.cmd); g != nil && g.Kind != "" {
			group = string(g.Kind)
		}
		switch c.kind {
		case "apply":
			uses[c.cmd.Apply.Component] = append(uses[c.cmd.Apply.Component], group)
		case "composite":
			for _, m := range c.cmd.Composite.Commands {
				walk(cmds[m], group, seen)
			}
		}
	}
	ids := make([]string, 0, len(cmds))
	for id := range cmds {
		ids = append(ids, id)
	}
	slices.SortFunc(ids, func(a, b string) int { return cmds[a].index - cmds[b].index })
	for _, id := range ids {
		if !cmds[id].inComposite {
			walk(cmds[id], "", map[string]bool{})
		}
	}

	for i, c := range comps {
		info := infos[c.Name]
		if info == nil || info.index != i {
			continue
		}
		var flag *bool
		flagName, verb := "deployByDefault", "deployed"
		switch info.kind {
		case "image":
			flag, flagName, verb = c.Image.AutoBuild, "autoBuild", "built"
		case "kubernetes":
			flag = c.Kubernetes.DeployByDefault
		case "openshift":
			flag = c.Openshift.DeployByDefault
		default:
			continue
		}
		f := fmt.Sprintf("devfile.components[%d].%s", i, info.kind)
		u := uses[c.Name]
		var other []string
		for _, g := range u {
			if g != "build" && g != "deploy" {
				if g == "" {
					g = "no group"
				}
				other = append(other, g)
			}
		}
		switch {
		case flag != nil && *flag:
			v.Add(f+"."+flagName, "is true: the component would be %s when the workspace starts; %s (set it to false to keep the component for build and deploy tools)", verb, supported)
		case len(u) == 0 && flag == nil:
			v.Add(f, "would be %s when the workspace starts, as no apply command uses it; %s (set %s: false to keep it for other tools)", verb, supported, flagName)
		case len(other) > 0:
			slices.Sort(other)
			v.Add(f, "is used by commands outside build and deploy groups (%s); %s, and ignores image, kubernetes and openshift components only when build or deploy commands alone use them", strings.Join(slices.Compact(other), ", "), supported)
		case len(u) == 0:
			d.warnings = append(d.warnings, fmt.Sprintf("components[%d] (%s %q) is ignored: no command uses it and %s is false", i, info.kind, c.Name, flagName))
		default:
			d.warnings = append(d.warnings, fmt.Sprintf("components[%d] (%s %q) is ignored: only build and deploy commands use it, and Hangar runs neither", i, info.kind, c.Name))
		}
	}
}

func commandGroup(c v1alpha2.Command) *v1alpha2.CommandGroup {
	switch {
	case c.Exec != nil:
		return c.Exec.Group
	case c.Apply != nil:
		return c.Apply.Group
	case c.Composite != nil:
		return c.Composite.Group
	case c.Custom != nil:
		return c.Custom.Group
	}
	return nil
}
