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

// agentResource is hangar_agent, like the reference's coder_agent
// (../shared/seeds/terraform-state-management.md): a token and an init script that starts
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
				Description: "A POSIX sh script that runs the helper in the foreground (exec); start it in the background, under a service manager or in the machine's startup. It holds the token. Extra arguments are passed to `hangar workspace-helper`."},
			"host_key": schema.StringAttribute{Computed: true, Sensitive: true, PlanModifiers: keep,
				Description: "The helper's SSH host key (an OpenSSH private key, generated once): the init script gives it to the helper, so that a machine made anew at each start (count = start_count) keeps the identity users' known_hosts pinned."},
			"hangar_binary": schema.StringAttribute{Optional: true, PlanModifiers: []planmodifier.String{stringplanmodifier.RequiresReplace()},
				Description: "Path of the hangar binary on the machine; unset: `hangar` found on PATH when the script runs."},
		},
	}
}

func (r *agentResource) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	var m agentModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	token, u := os.Getenv(EnvAgentToken), os.Getenv(EnvAgentURL)
	if !strings.HasPrefix(token, protocol.WorkspaceAgentTokenPrefix) || u == "" {
		resp.Diagnostics.AddError("no helper token from Hangar",
			"hangar_agent takes its token and the server's URL from the environment a Hangar provisioner gives terraform ("+EnvAgentToken+", "+EnvAgentURL+"); they are empty. Run the build through Hangar, with a server that knows the URL helpers reach it at (hangar server --helper-url, by default --access-url).")
		return
	}
	if pu, err := url.Parse(u); err != nil || (pu.Scheme != "http" && pu.Scheme != "https") || pu.Host == "" {
		resp.Diagnostics.AddError("bad "+EnvAgentURL, "want the server's http:// or https:// URL, got "+u)
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
	m.InitScript = types.StringValue(InitScript(m.HangarBinary.ValueString(), u, token, hostKey))
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
}

// Read keeps the state: the agent exists only in Terraform and in Hangar's tokens.
func (r *agentResource) Read(context.Context, resource.ReadRequest, *resource.ReadResponse) {}

// Update only copies the plan: every attribute either keeps its state or replaces the resource.
func (r *agentResource) Update(ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	var m agentModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &m)...)
	if !resp.Diagnostics.HasError() {
		resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
	}
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

// InitScript is the script that starts the helper: hangar workspace-helper --connect-url URL, with
// the token and the host key (when hostKey is set) in the helper's environment (not on its command
// line, which every user of the machine can read).
func InitScript(hangarBinary, connectURL, token, hostKey string) string {
	var b strings.Builder
	b.WriteString("#!/bin/sh\n")
	b.WriteString("# Hangar's workspace helper: it connects out to the Hangar server, which relays hangar ssh,\n")
	b.WriteString("# port-forward and config-ssh to it. Written by hangar_agent; it holds the helper's token.\n")
	b.WriteString("set -eu\n")
	b.WriteString("hangar_bin=" + shellQuote(hangarBinary) + "\n")
	b.WriteString("if [ -z \"$hangar_bin\" ]; then\n")
	b.WriteString("  hangar_bin=$(command -v hangar) || { echo 'hangar_agent: no hangar binary on PATH (set hangar_binary)' >&2; exit 127; }\n")
	b.WriteString("fi\n")
	b.WriteString("HANGAR_HELPER_TOKEN=" + shellQuote(token) + "\n")
	b.WriteString("export HANGAR_HELPER_TOKEN\n")
	if hostKey != "" {
		b.WriteString("HANGAR_HELPER_HOST_KEY=" + shellQuote(hostKey) + "\n")
		b.WriteString("export HANGAR_HELPER_HOST_KEY\n")
	}
	b.WriteString("exec \"$hangar_bin\" workspace-helper --connect-url " + shellQuote(connectURL) + " \"$@\"\n")
	return b.String()
}

// shellQuote quotes s as one word of POSIX sh.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
