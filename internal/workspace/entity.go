package workspace

// ParameterValue is a workspace's value of one parameter (package parameter: the template
// version's parameters, and the checks of their values).
type ParameterValue struct {
	Name      string `json:"name"`
	Value     string `json:"value"`
	Sensitive bool   `json:"sensitive,omitempty"`
}
