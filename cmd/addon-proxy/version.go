package main

import (
	"crypto/tls"
	"runtime/debug"
	"slices"
)

// versionLine is what --version prints: the version of the module the
// binary was built from, as the build recorded it (a release tag, or a
// pseudo-version of the commit, "+dirty" for uncommitted changes), and
// the Go version.
func versionLine(info *debug.BuildInfo, ok bool) string {
	if !ok {
		return "addon-proxy (unknown: built without module support)"
	}
	v := info.Main.Version
	if v == "" {
		v = "(devel)"
	}
	line := "addon-proxy " + v + " " + info.GoVersion
	if v == "(devel)" {
		// Built without version control stamping the module: the
		// commit, if the build recorded it.
		for _, s := range info.Settings {
			if s.Key == "vcs.revision" || s.Key == "vcs.modified" {
				line += " " + s.Key + "=" + s.Value
			}
		}
	}
	return line
}

// insecureCiphers are the names of the suites in ids that crypto/tls
// counts as insecure.
func insecureCiphers(ids []uint16) []string {
	var weak []string
	for _, s := range tls.InsecureCipherSuites() {
		if slices.Contains(ids, s.ID) {
			weak = append(weak, s.Name)
		}
	}
	return weak
}
