package tfprovider

import (
	"context"
	"math"
	"regexp"
	"strconv"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-framework/types/basetypes"

	"github.com/hangar-dev/hangar/internal/protocol"
)

// hangar_agent's metadata and resources_monitoring blocks (docs/decisions.md, "Inside the
// workspace: hangar_agent's metadata and resources_monitoring"), shaped as coder_agent's: they
// become the helper's protocol.MetadataSpec, which the init script hands it as JSON in
// protocol.HelperMetadataEnv. protocol.MetadataSpec.Validate is the one rule of what is valid; its
// errors, which name the spec's field, are reported on the block's attribute.

type metadataModel struct {
	Key         types.String `tfsdk:"key"`
	DisplayName types.String `tfsdk:"display_name"`
	Script      types.String `tfsdk:"script"`
	Interval    types.Int64  `tfsdk:"interval"`
	Timeout     types.Int64  `tfsdk:"timeout"`
}

type monitoringModel struct {
	Memory types.Object `tfsdk:"memory"`
	Volume types.List   `tfsdk:"volume"`
}

type memoryModel struct {
	Enabled   types.Bool  `tfsdk:"enabled"`
	Threshold types.Int64 `tfsdk:"threshold"`
}

type volumeModel struct {
	Path      types.String `tfsdk:"path"`
	Enabled   types.Bool   `tfsdk:"enabled"`
	Threshold types.Int64  `tfsdk:"threshold"`
}

// rewrites says, in each block's description, what a change of it does.
const rewrites = " Changing it rewrites init_script (the machine that runs it is made anew; id, token and host_key stay)."

func agentBlocks() map[string]schema.Block {
	enabled := func(what string) schema.BoolAttribute {
		return schema.BoolAttribute{Optional: true, Description: "Whether the " + what + " alert is on (default true)."}
	}
	threshold := func(what string) schema.Int64Attribute {
		return schema.Int64Attribute{Optional: true, Description: "The " + what + " use, in percent, over which the workspace shows an alert: 1 to 100 (default " + strconv.Itoa(protocol.DefaultThresholdPercent) + ")."}
	}
	return map[string]schema.Block{
		"metadata": schema.ListNestedBlock{
			Description: "A custom metadata command (at most " + strconv.Itoa(protocol.MaxMetadataItems) + "): the helper runs script with `sh -c` on the machine every interval seconds and shows its output, trimmed, as display_name with the workspace (hangar show, the API, its page)." + rewrites,
			NestedObject: schema.NestedBlockObject{Attributes: map[string]schema.Attribute{
				"key":          schema.StringAttribute{Required: true, Description: "The value's key, unique in the agent: lower-case letters, digits, '_', '.' and '-'."},
				"display_name": schema.StringAttribute{Optional: true, Description: "The name it is shown under (default: key)."},
				"script":       schema.StringAttribute{Required: true, Description: "The shell command whose output is the value."},
				"interval":     schema.Int64Attribute{Optional: true, Description: "Seconds between runs (default " + strconv.Itoa(int(protocol.DefaultMetadataInterval.Seconds())) + ")."},
				"timeout":      schema.Int64Attribute{Optional: true, Description: "Seconds a run may take, at most interval (default " + strconv.Itoa(int(protocol.DefaultMetadataTimeout.Seconds())) + ", or interval if shorter)."},
			}},
		},
		"resources_monitoring": schema.SingleNestedBlock{
			Description: "The thresholds of the workspace's resource alerts. Without it, memory and the home directory's volume alert at " + strconv.Itoa(protocol.DefaultThresholdPercent) + "%." + rewrites,
			Blocks: map[string]schema.Block{
				"memory": schema.SingleNestedBlock{
					Description: "The memory alert, in percent of the machine's (cgroup's) limit.",
					Attributes:  map[string]schema.Attribute{"enabled": enabled("memory"), "threshold": threshold("memory")},
				},
				"volume": schema.ListNestedBlock{
					Description: "A volume alert (at most " + strconv.Itoa(protocol.MaxMonitoredVolumes) + "), on the filesystem that holds path; with none, the filesystem of the helper's home directory ($HOME) at " + strconv.Itoa(protocol.DefaultThresholdPercent) + "%.",
					NestedObject: schema.NestedBlockObject{Attributes: map[string]schema.Attribute{
						"path":      schema.StringAttribute{Required: true, Description: "An absolute path on the machine."},
						"enabled":   enabled("volume"),
						"threshold": threshold("volume"),
					}},
				},
			},
		},
	}
}

// metadataSpec is the helper's specification the blocks declare, validated (its defaults filled
// in). known is false while a value is unknown (a plan before what it depends on exists); then
// the spec is not checked.
func metadataSpec(ctx context.Context, metadata types.List, monitoring types.Object) (spec protocol.MetadataSpec, known bool, diags diag.Diagnostics) {
	if metadata.IsUnknown() || monitoring.IsUnknown() {
		return spec, false, nil
	}
	var items []metadataModel
	if diags = metadata.ElementsAs(ctx, &items, false); diags.HasError() {
		return spec, false, diags
	}
	for _, it := range items {
		if !allKnown(it.Key, it.DisplayName, it.Script, it.Interval, it.Timeout) {
			return spec, false, nil
		}
		spec.Items = append(spec.Items, protocol.MetadataItemSpec{
			Key: it.Key.ValueString(), DisplayName: it.DisplayName.ValueString(), Script: it.Script.ValueString(),
			Interval: seconds(it.Interval), Timeout: seconds(it.Timeout),
		})
	}
	if !monitoring.IsNull() {
		var m monitoringModel
		if diags = monitoring.As(ctx, &m, basetypes.ObjectAsOptions{}); diags.HasError() {
			return spec, false, diags
		}
		if m.Memory.IsUnknown() || m.Volume.IsUnknown() {
			return spec, false, nil
		}
		if !m.Memory.IsNull() {
			var mem memoryModel
			if diags = m.Memory.As(ctx, &mem, basetypes.ObjectAsOptions{}); diags.HasError() {
				return spec, false, diags
			}
			if !allKnown(mem.Enabled, mem.Threshold) {
				return spec, false, nil
			}
			t, d := thresholdOf(mem.Enabled, mem.Threshold, path.Root("resources_monitoring").AtName("memory"))
			if d != nil {
				return spec, true, diag.Diagnostics{d}
			}
			spec.Monitoring.Memory = &t
		}
		var volumes []volumeModel
		if diags = m.Volume.ElementsAs(ctx, &volumes, false); diags.HasError() {
			return spec, false, diags
		}
		for i, v := range volumes {
			if !allKnown(v.Path, v.Enabled, v.Threshold) {
				return spec, false, nil
			}
			t, d := thresholdOf(v.Enabled, v.Threshold, path.Root("resources_monitoring").AtName("volume").AtListIndex(i))
			if d != nil {
				return spec, true, diag.Diagnostics{d}
			}
			spec.Monitoring.Volumes = append(spec.Monitoring.Volumes, protocol.VolumeThreshold{Path: v.Path.ValueString(), Threshold: t})
		}
	}
	if err := spec.Validate(); err != nil {
		return spec, true, diag.Diagnostics{specDiagnostic(err)}
	}
	return spec, true, nil
}

// thresholdOf maps coder_agent's enabled and threshold onto the spec's threshold, where 0 is off:
// an alert that is on with a threshold of 0 would be silently off, so it is refused here; the
// spec's Validate checks the rest of the range.
func thresholdOf(enabled types.Bool, threshold types.Int64, at path.Path) (int, diag.Diagnostic) {
	if !enabled.IsNull() && !enabled.ValueBool() {
		return 0, nil
	}
	if threshold.IsNull() {
		return protocol.DefaultThresholdPercent, nil
	}
	if threshold.ValueInt64() == 0 {
		return 0, diag.NewAttributeErrorDiagnostic(at.AtName("threshold"), "Invalid hangar_agent resources_monitoring",
			at.AtName("threshold").String()+": want a percentage from 1 to 100 for an alert that is on (enabled = false turns it off), got 0")
	}
	return int(threshold.ValueInt64()), nil
}

// seconds is an interval or timeout for the spec, whose Validate refuses what is out of its range:
// a value far out of it is kept far out (Validate multiplies it into a time.Duration, which a
// huge number would overflow into a valid one).
func seconds(v types.Int64) int {
	return int(max(min(v.ValueInt64(), math.MaxInt32), math.MinInt32))
}

func allKnown(vs ...interface{ IsUnknown() bool }) bool {
	for _, v := range vs {
		if v.IsUnknown() {
			return false
		}
	}
	return true
}

// specField is the field a protocol.MetadataSpec.Validate error names: items[2].key,
// resources_monitoring.volumes[0].path, resources_monitoring.memory.
var specField = regexp.MustCompile(`^(items|resources_monitoring\.memory|resources_monitoring\.volumes)(?:\[(\d+)\])?(?:\.([a-z_]+))?: (.*)$`)

// specDiagnostic reports a Validate error on the block attribute it names, in Terraform's terms
// (metadata[2].key), or on the resource when it names none this mapping knows.
func specDiagnostic(err error) diag.Diagnostic {
	m := specField.FindStringSubmatch(err.Error())
	if m == nil {
		return diag.NewErrorDiagnostic("Invalid hangar_agent metadata", err.Error())
	}
	var p path.Path
	switch m[1] {
	case "items":
		p = path.Root("metadata")
	case "resources_monitoring.memory":
		// The spec's memory is the block's threshold.
		p = path.Root("resources_monitoring").AtName("memory").AtName("threshold")
	default:
		p = path.Root("resources_monitoring").AtName("volume")
	}
	if m[2] != "" {
		i, _ := strconv.Atoi(m[2])
		p = p.AtListIndex(i)
	}
	if m[3] != "" {
		p = p.AtName(m[3])
	}
	summary := "Invalid hangar_agent metadata"
	if m[1] != "items" {
		summary = "Invalid hangar_agent resources_monitoring"
	}
	return diag.NewAttributeErrorDiagnostic(p, summary, p.String()+": "+m[4])
}

// metadataJSON is the spec as the helper reads it; "" for the empty one (the helper's defaults),
// so that an agent without the blocks keeps the init script it had before they existed.
func metadataJSON(spec protocol.MetadataSpec) string {
	if len(spec.Items) == 0 && spec.Monitoring.Memory == nil && len(spec.Monitoring.Volumes) == 0 {
		return ""
	}
	return protocol.EncodeMetadataSpec(spec)
}
