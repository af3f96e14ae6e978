package imagebuild

import "regexp"

// progressRE matches the lines `hangar image-build` writes to say how far it is (phases.go,
// install.go): the image found built already or to be built, each step and feature as it starts,
// and the push. The agent shows the latest as the build's progress (internal/agent/steps.go).
var progressRE = regexp.MustCompile(`^(image \S+ is built already|building \S+ from |step \d+/\d+: |feature \d+/\d+: |pushing \S|pushed \S)`)

// IsProgress reports whether a line of the build's log says how far the build is.
func IsProgress(line string) bool { return progressRE.MatchString(line) }
