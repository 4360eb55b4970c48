// Package version is the release a binary was built as: `make release` stamps it with
// -ldflags "-X github.com/dovetail-sh/dovetail/controller/version.Version=v1.2.3".
package version

import "runtime/debug"

// Version is the release version; empty in a build that was not stamped.
var Version = ""

// Symbol is Version's name for the linker's -X.
const Symbol = "github.com/dovetail-sh/dovetail/controller/version.Version"

// Get is the stamped version, else what the Go toolchain recorded (a module version
// or "(devel)"), else "unknown".
func Get() string {
	if Version != "" {
		return Version
	}
	if info, ok := debug.ReadBuildInfo(); ok && info.Main.Version != "" {
		return info.Main.Version
	}
	return "unknown"
}

// Commit is the VCS revision the toolchain recorded, else "unknown".
func Commit() string {
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, s := range info.Settings {
			if s.Key == "vcs.revision" {
				return s.Value
			}
		}
	}
	return "unknown"
}
