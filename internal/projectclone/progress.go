package projectclone

import "regexp"

// progressRE matches the lines `hangar project-clone` writes to say how far it is: a project
// being cloned, checked out, left as it is, or done. The agent shows the latest as the clone's
// progress (internal/agent/steps.go).
var progressRE = regexp.MustCompile(`^project \S+: (cloning |checked out |done$|\S+ exists, left as it is$)`)

// IsProgress reports whether a line of the clone's log says how far it is.
func IsProgress(line string) bool { return progressRE.MatchString(line) }
