// Package tfprovider is Hangar's own Terraform provider, hangar.dev/hangar/hangar, served by the
// hangar binary itself when terraform starts it as a plugin. Its data source hangar_workspace tells
// a template about the workspace being built (like the reference's coder_workspace,
// ../shared/seeds/terraform-state-management.md): its id, name, owner, the transition, start_count
// and the prebuild flags. Templates then need no variables for these. The provisioner installs it
// through a filesystem mirror (Mirror), so no registry is needed. Its resources are hangar_agent
// (agent.go) and hangar_kubernetes_pod (pod.go); its data source hangar_devcontainer
// (devcontainer.go) reads a devcontainer.json for a template.
package tfprovider

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"

	"github.com/hashicorp/terraform-plugin-framework/datasource"
	"github.com/hashicorp/terraform-plugin-framework/datasource/schema"
	"github.com/hashicorp/terraform-plugin-framework/provider"
	providerschema "github.com/hashicorp/terraform-plugin-framework/provider/schema"
	"github.com/hashicorp/terraform-plugin-framework/providerserver"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/types"
)

// Address is the provider's source address; Version the version the mirror offers.
const (
	Address = "hangar.dev/hangar/hangar"
	Version = "0.1.0"
)

// Environment the provisioner gives terraform for the data source (env, not variables: a template
// need not declare anything to use it).
const (
	EnvWorkspaceID     = "HANGAR_WORKSPACE_ID"
	EnvWorkspaceName   = "HANGAR_WORKSPACE_NAME"
	EnvWorkspaceOwner  = "HANGAR_WORKSPACE_OWNER"
	EnvTransition      = "HANGAR_WORKSPACE_TRANSITION"
	EnvStartCount      = "HANGAR_WORKSPACE_START_COUNT"
	EnvIsPrebuild      = "HANGAR_WORKSPACE_IS_PREBUILD"
	EnvIsPrebuildClaim = "HANGAR_WORKSPACE_IS_PREBUILD_CLAIM"
	// The owner's profile (docs/decisions.md, "A team's repository: dotfiles and identity").
	EnvOwnerFullName     = "HANGAR_WORKSPACE_OWNER_FULL_NAME"
	EnvOwnerEmail        = "HANGAR_WORKSPACE_OWNER_EMAIL"
	EnvOwnerDotfilesRepo = "HANGAR_WORKSPACE_OWNER_DOTFILES_REPO"
)

// Env is the environment the data source reads, from the variables Hangar offers a build
// (tfbackend.Variables).
func Env(vars map[string]string) map[string]string {
	return map[string]string{
		EnvWorkspaceID: vars["workspace_id"], EnvWorkspaceName: vars["workspace_name"], EnvWorkspaceOwner: vars["workspace_owner"],
		EnvTransition: vars["workspace_transition"], EnvStartCount: vars["start_count"],
		EnvIsPrebuild: vars["is_prebuild"], EnvIsPrebuildClaim: vars["is_prebuild_claim"],
		EnvOwnerFullName: vars["workspace_owner_full_name"], EnvOwnerEmail: vars["workspace_owner_email"],
		EnvOwnerDotfilesRepo: vars["workspace_owner_dotfiles_repo"],
	}
}

// magicCookie is how terraform marks the processes it starts as plugins (go-plugin's handshake).
const magicCookie = "TF_PLUGIN_MAGIC_COOKIE"

// IsPlugin reports whether terraform started this process as the provider: through the mirror's
// link named terraform-provider-hangar_v<version>, with the plugin handshake in its environment.
func IsPlugin() bool {
	return os.Getenv(magicCookie) != "" && strings.HasPrefix(filepath.Base(os.Args[0]), "terraform-provider-hangar")
}

// Serve serves the provider to terraform until it ends, and returns the exit status.
func Serve() int {
	err := providerserver.Serve(context.Background(), func() provider.Provider { return &hangarProvider{} },
		providerserver.ServeOpts{Address: Address})
	if err != nil {
		fmt.Fprintf(os.Stderr, "hangar provider: %v\n", err)
		return 1
	}
	return 0
}

// Mirror makes (or refreshes) a filesystem mirror under dir that offers the provider, the hangar
// executable exe under the name terraform expects, and returns the mirror's path for the CLI
// config (terraform.Runner.PluginMirror).
func Mirror(dir, exe string) (string, error) {
	bin := filepath.Join(dir, Address, Version, runtime.GOOS+"_"+runtime.GOARCH)
	if err := os.MkdirAll(bin, 0o755); err != nil {
		return "", fmt.Errorf("provider mirror: %w", err)
	}
	link := filepath.Join(bin, "terraform-provider-hangar_v"+Version)
	if cur, err := os.Readlink(link); err == nil && cur == exe {
		return dir, nil
	}
	_ = os.Remove(link)
	if err := os.Symlink(exe, link); err != nil {
		return "", fmt.Errorf("provider mirror: %w", err)
	}
	return dir, nil
}

type hangarProvider struct{}

func (p *hangarProvider) Metadata(_ context.Context, _ provider.MetadataRequest, resp *provider.MetadataResponse) {
	resp.TypeName = "hangar"
	resp.Version = Version
}

func (p *hangarProvider) Schema(_ context.Context, _ provider.SchemaRequest, resp *provider.SchemaResponse) {
	resp.Schema = providerschema.Schema{Description: "Hangar: facts about the workspace being built, the helper of its machine (hangar_agent), and a pod as that machine (hangar_kubernetes_pod)."}
}

func (p *hangarProvider) Configure(context.Context, provider.ConfigureRequest, *provider.ConfigureResponse) {
}

func (p *hangarProvider) DataSources(context.Context) []func() datasource.DataSource {
	return []func() datasource.DataSource{
		func() datasource.DataSource { return &workspaceDataSource{} },
		func() datasource.DataSource { return &devcontainerDataSource{} },
	}
}

func (p *hangarProvider) Resources(context.Context) []func() resource.Resource {
	return []func() resource.Resource{
		func() resource.Resource { return &agentResource{} },
		func() resource.Resource { return &podResource{} },
	}
}

type workspaceDataSource struct{}

type workspaceModel struct {
	ID              types.String `tfsdk:"id"`
	Name            types.String `tfsdk:"name"`
	Owner           types.String `tfsdk:"owner"`
	Transition      types.String `tfsdk:"transition"`
	StartCount      types.Int64  `tfsdk:"start_count"`
	IsPrebuild      types.Bool   `tfsdk:"is_prebuild"`
	IsPrebuildClaim types.Bool   `tfsdk:"is_prebuild_claim"`
	OwnerFullName   types.String `tfsdk:"owner_full_name"`
	OwnerEmail      types.String `tfsdk:"owner_email"`
	OwnerDotfiles   types.String `tfsdk:"owner_dotfiles_repo"`
}

func (d *workspaceDataSource) Metadata(_ context.Context, req datasource.MetadataRequest, resp *datasource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_workspace"
}

func (d *workspaceDataSource) Schema(_ context.Context, _ datasource.SchemaRequest, resp *datasource.SchemaResponse) {
	resp.Schema = schema.Schema{
		Description: "The workspace this build is for.",
		Attributes: map[string]schema.Attribute{
			"id":                  schema.StringAttribute{Computed: true, Description: "The workspace's id."},
			"name":                schema.StringAttribute{Computed: true, Description: "The workspace's name."},
			"owner":               schema.StringAttribute{Computed: true, Description: "Its owner's username."},
			"transition":          schema.StringAttribute{Computed: true, Description: "start, stop or delete."},
			"start_count":         schema.Int64Attribute{Computed: true, Description: "1 on start, 0 on stop and delete: the count of the resources that run only while the workspace runs."},
			"is_prebuild":         schema.BoolAttribute{Computed: true, Description: "The build makes a prebuilt workspace (no owner yet)."},
			"is_prebuild_claim":   schema.BoolAttribute{Computed: true, Description: "The build hands a prebuilt workspace to its owner."},
			"owner_full_name":     schema.StringAttribute{Computed: true, Description: "Its owner's full name, for git (GIT_AUTHOR_NAME; empty: none, use owner)."},
			"owner_email":         schema.StringAttribute{Computed: true, Description: "Its owner's email, for git (GIT_AUTHOR_EMAIL; empty: none)."},
			"owner_dotfiles_repo": schema.StringAttribute{Computed: true, Description: "Its owner's dotfiles repository, URL[#ref] (empty: none)."},
		},
	}
}

func (d *workspaceDataSource) Read(ctx context.Context, _ datasource.ReadRequest, resp *datasource.ReadResponse) {
	name := os.Getenv(EnvWorkspaceName)
	if name == "" {
		resp.Diagnostics.AddError("not run by a Hangar provisioner",
			"data.hangar_workspace reads the workspace from the environment a Hangar provisioner gives terraform ("+EnvWorkspaceName+" is empty).")
		return
	}
	count, err := strconv.ParseInt(os.Getenv(EnvStartCount), 10, 64)
	if err != nil {
		resp.Diagnostics.AddError("bad "+EnvStartCount, err.Error())
		return
	}
	m := workspaceModel{
		ID: types.StringValue(os.Getenv(EnvWorkspaceID)), Name: types.StringValue(name), Owner: types.StringValue(os.Getenv(EnvWorkspaceOwner)),
		Transition: types.StringValue(os.Getenv(EnvTransition)), StartCount: types.Int64Value(count),
		IsPrebuild: types.BoolValue(os.Getenv(EnvIsPrebuild) == "true"), IsPrebuildClaim: types.BoolValue(os.Getenv(EnvIsPrebuildClaim) == "true"),
		OwnerFullName: types.StringValue(os.Getenv(EnvOwnerFullName)), OwnerEmail: types.StringValue(os.Getenv(EnvOwnerEmail)),
		OwnerDotfiles: types.StringValue(os.Getenv(EnvOwnerDotfilesRepo)),
	}
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
}
