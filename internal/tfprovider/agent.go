package tfprovider

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/hex"
	"encoding/pem"
	"net/url"
	"os"
	"strings"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"golang.org/x/crypto/ssh"

	"github.com/hangar-dev/hangar/internal/protocol"
)

// Environment the provisioner gives terraform for the hangar_agent resource: the token the server
// minted for this build's helper, and the URL the helper connects out to.
const (
	EnvAgentToken = "HANGAR_AGENT_TOKEN"
	EnvAgentURL   = "HANGAR_AGENT_URL"
)

// JobEnv is the provider's environment for a job: Env of its variables, and its helper's token
// and URL when the server gave them.
func JobEnv(job *protocol.ProvisionerJob) map[string]string {
	env := Env(job.Variables)
	env[EnvAgentToken], env[EnvAgentURL] = job.AgentToken, job.AgentURL
	return env
}

// agentResource is hangar_agent, like the reference's coder_agent (the seed
// terraform-state-management.md): a token and an init script that starts
// `hangar workspace-helper` on whatever machine the template creates. The helper connects out to
// the server, so the machine needs no inbound port; `hangar ssh`, port-forward and config-ssh reach
// it through the server.
//
// The token is the one the server minted for the build that creates the resource; it is kept in
// the state while the resource exists (no diff on later plans, so the machine is not replaced by
// every build), and the server accepts it exactly while the state holds it. Replacing the resource
// (hangar_binary changed, terraform taint, count = start_count) gives it the token of that build.
type agentResource struct{}

type agentModel struct {
	ID           types.String `tfsdk:"id"`
	Token        types.String `tfsdk:"token"`
	InitScript   types.String `tfsdk:"init_script"`
	HangarBinary types.String `tfsdk:"hangar_binary"`
	HostKey      types.String `tfsdk:"host_key"`
	Metadata     types.List   `tfsdk:"metadata"`
	Monitoring   types.Object `tfsdk:"resources_monitoring"`
}

func (r *agentResource) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_agent"
}

func (r *agentResource) Schema(_ context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	keep := []planmodifier.String{stringplanmodifier.UseStateForUnknown()}
	resp.Schema = schema.Schema{
		Description: "The workspace helper of the machine a template creates: run init_script on the machine (as the user who works there); the helper connects out to the Hangar server, so that hangar ssh, port-forward and config-ssh reach the machine with no inbound port.",
		Attributes: map[string]schema.Attribute{
			"id":    schema.StringAttribute{Computed: true, PlanModifiers: keep, Description: "A random id of this agent."},
			"token": schema.StringAttribute{Computed: true, Sensitive: true, PlanModifiers: keep, Description: "The helper's token (a secret): the server accepts it while this resource exists."},
			"init_script": schema.StringAttribute{Computed: true, Sensitive: true, PlanModifiers: keep,
				Description: "A POSIX sh script that runs the helper in the foreground (exec); start it in the background, under a service manager or in the machine's startup. It holds the token, and what the metadata and resources_monitoring blocks ask of the helper (in its environment, " + protocol.HelperMetadataEnv + "). Extra arguments are passed to `hangar workspace-helper`."},
			"host_key": schema.StringAttribute{Computed: true, Sensitive: true, PlanModifiers: keep,
				Description: "The helper's SSH host key (an OpenSSH private key, generated once): the init script gives it to the helper, so that a machine made anew at each start (count = start_count) keeps the identity users' known_hosts pinned."},
			"hangar_binary": schema.StringAttribute{Optional: true, PlanModifiers: []planmodifier.String{stringplanmodifier.RequiresReplace()},
				Description: "Path of the hangar binary on the machine; unset: `hangar` found on PATH when the script runs."},
		},
		Blocks: agentBlocks(),
	}
}

// ValidateConfig reports a bad metadata or resources_monitoring block on its attribute, at
// terraform validate and plan.
func (r *agentResource) ValidateConfig(ctx context.Context, req resource.ValidateConfigRequest, resp *resource.ValidateConfigResponse) {
	var m agentModel
	resp.Diagnostics.Append(req.Config.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	_, _, diags := metadataSpec(ctx, m.Metadata, m.Monitoring)
	resp.Diagnostics.Append(diags...)
}

// ModifyPlan plans a new init_script when the helper's specification changes (the blocks differ
// in what they ask of it); otherwise init_script keeps its state (UseStateForUnknown), so that an
// agent whose blocks did not change, or that was created before they existed, gets no diff.
func (r *agentResource) ModifyPlan(ctx context.Context, req resource.ModifyPlanRequest, resp *resource.ModifyPlanResponse) {
	if req.State.Raw.IsNull() || req.Plan.Raw.IsNull() {
		return // create (everything is new) or destroy
	}
	var plan, state agentModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() {
		return
	}
	next, known, diags := metadataSpec(ctx, plan.Metadata, plan.Monitoring)
	if diags.HasError() {
		resp.Diagnostics.Append(diags...)
		return
	}
	prev, _, prevDiags := metadataSpec(ctx, state.Metadata, state.Monitoring)
	if known && !prevDiags.HasError() && metadataJSON(next) == metadataJSON(prev) {
		return
	}
	resp.Diagnostics.Append(resp.Plan.SetAttribute(ctx, path.Root("init_script"), types.StringUnknown())...)
}

func (r *agentResource) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	var m agentModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	spec, _, diags := metadataSpec(ctx, m.Metadata, m.Monitoring)
	resp.Diagnostics.Append(diags...)
	token, u, diags := buildEnv()
	resp.Diagnostics.Append(diags...)
	if resp.Diagnostics.HasError() {
		return
	}
	id := make([]byte, 16)
	_, _ = rand.Read(id)
	m.ID = types.StringValue(hex.EncodeToString(id))
	hostKey, err := newHostKey()
	if err != nil {
		resp.Diagnostics.AddError("generate the helper's host key", err.Error())
		return
	}
	m.Token = types.StringValue(token)
	m.HostKey = types.StringValue(hostKey)
	m.InitScript = types.StringValue(InitScript(Helper{Binary: m.HangarBinary.ValueString(), ConnectURL: u, Token: token, HostKey: hostKey, Metadata: spec}))
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
}

// buildEnv is the helper's token and the server's URL the provisioner gives terraform.
func buildEnv() (token, u string, diags diag.Diagnostics) {
	token, u = os.Getenv(EnvAgentToken), os.Getenv(EnvAgentURL)
	if !strings.HasPrefix(token, protocol.WorkspaceAgentTokenPrefix) || u == "" {
		diags.AddError("no helper token from Hangar",
			"hangar_agent takes its token and the server's URL from the environment a Hangar provisioner gives terraform ("+EnvAgentToken+", "+EnvAgentURL+"); they are empty. Run the build through Hangar, with a server that knows the URL helpers reach it at (hangar server --helper-url, by default --access-url).")
		return "", "", diags
	}
	if pu, err := url.Parse(u); err != nil || (pu.Scheme != "http" && pu.Scheme != "https") || pu.Host == "" {
		diags.AddError("bad "+EnvAgentURL, "want the server's http:// or https:// URL, got "+u)
	}
	return token, u, diags
}

// Read keeps the state: the agent exists only in Terraform and in Hangar's tokens.
func (r *agentResource) Read(context.Context, resource.ReadRequest, *resource.ReadResponse) {}

// Update copies the plan, writing the init script anew when ModifyPlan left it unknown (the
// helper's specification changed): with the agent's own token and host key, and the URL the server
// gives this build (its --helper-url now). Every other attribute keeps its state or replaces the
// resource.
func (r *agentResource) Update(ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	var m agentModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	if m.InitScript.IsUnknown() {
		spec, _, diags := metadataSpec(ctx, m.Metadata, m.Monitoring)
		resp.Diagnostics.Append(diags...)
		_, u, diags := buildEnv()
		resp.Diagnostics.Append(diags...)
		if resp.Diagnostics.HasError() {
			return
		}
		m.InitScript = types.StringValue(InitScript(Helper{Binary: m.HangarBinary.ValueString(), ConnectURL: u, Token: m.Token.ValueString(), HostKey: m.HostKey.ValueString(), Metadata: spec}))
	}
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
}

// Delete has nothing to remove: the server drops the token once no state holds it.
func (r *agentResource) Delete(context.Context, resource.DeleteRequest, *resource.DeleteResponse) {}

// newHostKey is a new ed25519 host key in OpenSSH's PEM form.
func newHostKey() (string, error) {
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return "", err
	}
	block, err := ssh.MarshalPrivateKey(priv, "hangar_agent")
	if err != nil {
		return "", err
	}
	return string(pem.EncodeToMemory(block)), nil
}

// Helper is what hangar_agent's init script starts.
type Helper struct {
	Binary     string // the hangar binary on the machine; "": hangar on PATH
	ConnectURL string // the URL the helper reaches the server at
	Token      string
	HostKey    string // "": none (an agent created before host keys)
	// Metadata is what the helper collects; the empty spec gives none (the helper's defaults).
	Metadata protocol.MetadataSpec
}

// InitScript is the script that starts the helper: hangar workspace-helper --connect-url URL, with
// the token, the host key (when set) and the metadata specification (when not empty) in the
// helper's environment (not on its command line, which every user of the machine can read).
func InitScript(h Helper) string {
	var b strings.Builder
	b.WriteString("#!/bin/sh\n")
	b.WriteString("# Hangar's workspace helper: it connects out to the Hangar server, which relays hangar ssh,\n")
	b.WriteString("# port-forward and config-ssh to it. Written by hangar_agent; it holds the helper's token.\n")
	b.WriteString("set -eu\n")
	b.WriteString("hangar_bin=" + shellQuote(h.Binary) + "\n")
	b.WriteString("if [ -z \"$hangar_bin\" ]; then\n")
	b.WriteString("  hangar_bin=$(command -v hangar) || { echo 'hangar_agent: no hangar binary on PATH (set hangar_binary)' >&2; exit 127; }\n")
	b.WriteString("fi\n")
	env := func(name, value string) {
		b.WriteString(name + "=" + shellQuote(value) + "\n")
		b.WriteString("export " + name + "\n")
	}
	env("HANGAR_HELPER_TOKEN", h.Token)
	if h.HostKey != "" {
		env("HANGAR_HELPER_HOST_KEY", h.HostKey)
	}
	if spec := metadataJSON(h.Metadata); spec != "" {
		env(protocol.HelperMetadataEnv, spec)
	}
	b.WriteString("exec \"$hangar_bin\" workspace-helper --connect-url " + shellQuote(h.ConnectURL) + " \"$@\"\n")
	return b.String()
}

// shellQuote quotes s as one word of POSIX sh.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
