// Prints the seccomp profile containerd applies by default to a container with
// the capabilities named on the command line, as JSON (the OCI runtime spec's
// LinuxSeccomp: the format under_profile reads). The profile is containerd's
// own code (contrib/seccomp.DefaultProfile), built by tools/runtime-profiles.sh
// from Debian's package of containerd's sources; nothing of it is copied here.
//
// Usage: go run containerd-profile.go CAP_CHOWN CAP_KILL ... > PROFILE.json
package main

import (
	"encoding/json"
	"fmt"
	"os"

	"github.com/containerd/containerd/contrib/seccomp"
	specs "github.com/opencontainers/runtime-spec/specs-go"
)

func main() {
	spec := &specs.Spec{Process: &specs.Process{Capabilities: &specs.LinuxCapabilities{Bounding: os.Args[1:]}}}
	out := json.NewEncoder(os.Stdout)
	out.SetIndent("", "  ")
	if err := out.Encode(seccomp.DefaultProfile(spec)); err != nil {
		fmt.Fprintln(os.Stderr, "containerd-profile:", err)
		os.Exit(1)
	}
}
