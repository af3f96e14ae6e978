package protocol

// The labels and annotations the server generates onto a workspace's Kubernetes objects
// (internal/devfile) and that the agent and the access proxy read back: part of the contract
// between them, so declared here, not in the generator that writes them. All are under
// workspace.ReservedPrefix, which a devfile may not use (a test in internal/devfile checks it).
const (
	// LabelAgentID selects an agent's objects (its informers watch only these).
	LabelAgentID = "hangar.dev/agent-id"
	// LabelWorkspaceID is the workspace's id (the proxy's routes are keyed by it).
	LabelWorkspaceID = "hangar.dev/workspace-id"
	// LabelWorkspaceName holds the workspace's cluster name (its kube_name), which the agent
	// reports it by: unique in the cluster, unlike the name its owner gave it.
	LabelWorkspaceName = "hangar.dev/workspace-name"
	// LabelInventory marks the ConfigMap that lists a workspace's objects (data key InventoryKey),
	// which the agent deletes at termination.
	LabelInventory = "hangar.dev/inventory"
	// InventoryKey is the inventory ConfigMap's data key.
	InventoryKey = "objects"
	// AnnotationHostTemplate is what the proxy routes by: `{{.port}}-<name>--<owner>.<dns_zone>`
	// (workspace.HostTemplate). A workspace whose name or owner cannot make a host (from before
	// the naming rules: "--" in either, or too long together) has none, and no route.
	AnnotationHostTemplate = "hangar.dev/host-template"
	// AnnotationPublicPorts on the Service lists the ports (comma-separated) of public endpoints:
	// the only ones the proxy may route to. Internal endpoints have Service ports but no route.
	AnnotationPublicPorts = "hangar.dev/public-ports"
	// HelperSSHPortName names the Service port of the workspace helper's SSH, which the proxy
	// finds the pod by.
	HelperSSHPortName = "hangar-ssh"
	// A workspace pod that builds its main container's image does it in three init containers:
	// ImagePrepareContainerName (the tools image, with the registry credential), then
	// ImageBuildContainerName (the build's base image: the user's steps, no credential), then
	// ImagePushContainerName (the tools image, with the credential). When one fails, the agent
	// gives its log's last line, the build's reason, as the workspace's image build's failure.
	ImagePrepareContainerName = "hangar-image-prepare"
	ImageBuildContainerName   = "hangar-image-build"
	ImagePushContainerName    = "hangar-image-push"
	// ProjectCloneContainerName is the init container that clones the devfile's projects
	// (`hangar project-clone`): a startup step the agent reports (StepProjectClone).
	ProjectCloneContainerName = "hangar-project-clone"
)
