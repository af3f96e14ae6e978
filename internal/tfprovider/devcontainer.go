package tfprovider

import (
	"context"
	"errors"
	"os"

	"github.com/hashicorp/terraform-plugin-framework/datasource"
	"github.com/hashicorp/terraform-plugin-framework/datasource/schema"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/hangar-dev/hangar/internal/devcontainer"
	"github.com/hangar-dev/hangar/internal/workspace"
)

// devcontainerDataSource is data.hangar_devcontainer: a devcontainer.json (its text, for example
// file(".devcontainer/devcontainer.json") of the template's module, or of a checkout) read as a
// Kubernetes workspace reads it (internal/devcontainer), so that a template can honour it on any
// machine: the image to run, the user, the folder, the environment, the ports and the lifecycle
// commands. What a Kubernetes workspace refuses is refused here too, naming the field.
type devcontainerDataSource struct{}

type devcontainerModel struct {
	JSON              types.String `tfsdk:"json"`
	Name              types.String `tfsdk:"name"`
	Image             types.String `tfsdk:"image"`
	User              types.Int64  `tfsdk:"user"`
	WorkspaceFolder   types.String `tfsdk:"workspace_folder"`
	ContainerEnv      types.Map    `tfsdk:"container_env"`
	RemoteEnv         types.Map    `tfsdk:"remote_env"`
	ForwardPorts      types.List   `tfsdk:"forward_ports"`
	PostCreateCommand types.String `tfsdk:"post_create_command"`
	PostStartCommand  types.String `tfsdk:"post_start_command"`
	PostAttachCommand types.String `tfsdk:"post_attach_command"`
	Warnings          types.List   `tfsdk:"warnings"`
}

func (d *devcontainerDataSource) Metadata(_ context.Context, req datasource.MetadataRequest, resp *datasource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_devcontainer"
}

func (d *devcontainerDataSource) Schema(_ context.Context, _ datasource.SchemaRequest, resp *datasource.SchemaResponse) {
	resp.Schema = schema.Schema{
		Description: "A devcontainer.json read as a Kubernetes workspace reads it (docs/decisions.md, \"devcontainer.json on Kubernetes\"): what a template needs to honour it on any machine.",
		Attributes: map[string]schema.Attribute{
			"json":                schema.StringAttribute{Required: true, Description: "The devcontainer.json's text (JSON with comments), at most 256 KiB."},
			"name":                schema.StringAttribute{Optional: true, Description: "${localWorkspaceFolderBasename}: the folder the workspace's files are in, /workspaces/<name> (default: the workspace's name)."},
			"image":               schema.StringAttribute{Computed: true, Description: "The image to run."},
			"user":                schema.Int64Attribute{Computed: true, Description: "The uid to run as (remoteUser or containerUser; 0 when the file names none: the image's own)."},
			"workspace_folder":    schema.StringAttribute{Computed: true, Description: "Where the workspace's files are (${containerWorkspaceFolder})."},
			"container_env":       schema.MapAttribute{Computed: true, ElementType: types.StringType, Description: "containerEnv."},
			"remote_env":          schema.MapAttribute{Computed: true, ElementType: types.StringType, Description: "remoteEnv (values may name other variables as ${NAME})."},
			"forward_ports":       schema.ListAttribute{Computed: true, ElementType: types.Int64Type, Description: "forwardPorts, in order."},
			"post_create_command": schema.StringAttribute{Computed: true, Description: "The shell line to run once per workspace (onCreateCommand, updateContentCommand, postCreateCommand), in workspace_folder; \"\" when none."},
			"post_start_command":  schema.StringAttribute{Computed: true, Description: "The shell line to run at each start; \"\" when none."},
			"post_attach_command": schema.StringAttribute{Computed: true, Description: "postAttachCommand's shell line; \"\" when none."},
			"warnings":            schema.ListAttribute{Computed: true, ElementType: types.StringType, Description: "What is accepted but not honoured."},
		},
	}
}

func (d *devcontainerDataSource) Read(ctx context.Context, req datasource.ReadRequest, resp *datasource.ReadResponse) {
	var m devcontainerModel
	resp.Diagnostics.Append(req.Config.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	name := m.Name.ValueString()
	if name == "" {
		name = os.Getenv(EnvWorkspaceName)
	}
	if name == "" {
		name = "workspace"
	}
	desc, err := devcontainer.Describe([]byte(m.JSON.ValueString()), devcontainer.Options{Basename: name, ID: os.Getenv(EnvWorkspaceID)})
	if err != nil {
		var v *workspace.ValidationError
		if errors.As(err, &v) {
			for _, p := range v.Problems {
				resp.Diagnostics.AddAttributeError(path.Root("json"), "devcontainer.json: "+p.Field, p.Detail)
			}
			return
		}
		resp.Diagnostics.AddAttributeError(path.Root("json"), "devcontainer.json", err.Error())
		return
	}
	ports := make([]int64, 0, len(desc.ForwardPorts))
	for _, p := range desc.ForwardPorts {
		ports = append(ports, int64(p))
	}
	m.Name = types.StringValue(name)
	m.Image, m.User, m.WorkspaceFolder = types.StringValue(desc.Image), types.Int64Value(desc.User), types.StringValue(desc.WorkspaceFolder)
	m.PostCreateCommand, m.PostStartCommand, m.PostAttachCommand = types.StringValue(desc.PostCreateCommand), types.StringValue(desc.PostStartCommand), types.StringValue(desc.PostAttachCommand)
	var diags diag.Diagnostics
	m.ContainerEnv, diags = types.MapValueFrom(ctx, types.StringType, desc.ContainerEnv)
	resp.Diagnostics.Append(diags...)
	m.RemoteEnv, diags = types.MapValueFrom(ctx, types.StringType, desc.RemoteEnv)
	resp.Diagnostics.Append(diags...)
	m.ForwardPorts, diags = types.ListValueFrom(ctx, types.Int64Type, ports)
	resp.Diagnostics.Append(diags...)
	warnings := desc.Warnings
	if warnings == nil {
		warnings = []string{}
	}
	m.Warnings, diags = types.ListValueFrom(ctx, types.StringType, warnings)
	resp.Diagnostics.Append(diags...)
	if resp.Diagnostics.HasError() {
		return
	}
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
}
