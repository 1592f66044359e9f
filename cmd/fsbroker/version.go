// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"encoding/json"
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
	"strings"

	"github.com/spf13/cobra"
)

// version is set at build time with -ldflags "-X main.version=..." (release
// builds); otherwise it comes from the module's build information.
var version = ""

// modulePath is the main module's path, and opaModule the policy engine's.
const (
	modulePath = "github.com/fsbroker/fsbroker"
	opaModule  = "github.com/open-policy-agent/opa"
)

// buildReport is what `fsbroker version` tells: where the binary comes from.
type buildReport struct {
	// Version is the release (-X main.version), else the module version the
	// go command stamped: a tag, a pseudo-version from the commit, or
	// "(devel)" for a build without version control information.
	Version string `json:"version"`
	// Revision, Time and Modified are the commit the binary was built from,
	// its time, and whether the work tree had uncommitted changes; empty
	// when the build carried no version control information.
	Revision string `json:"revision,omitempty"`
	Time     string `json:"time,omitempty"`
	Modified bool   `json:"modified,omitempty"`
	// Go is the toolchain, Platform the target (GOOS/GOARCH).
	Go       string `json:"go"`
	Platform string `json:"platform"`
	// OPA is the version of the policy engine built in.
	OPA string `json:"opa"`
}

// readBuildReport reads the binary's build information.
func readBuildReport() buildReport {
	r := buildReport{Version: "(devel)", Go: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return r
	}
	r.Go = bi.GoVersion
	if bi.Main.Version != "" {
		r.Version = bi.Main.Version
	}
	if version != "" {
		r.Version = version
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			r.Revision = s.Value
		case "vcs.time":
			r.Time = s.Value
		case "vcs.modified":
			r.Modified = s.Value == "true"
		}
	}
	for _, d := range bi.Deps {
		if d.Path == opaModule {
			r.OPA = d.Version
			if d.Replace != nil {
				r.OPA = d.Replace.Version
			}
		}
	}
	return r
}

// brokerVersion is the version the broker gives in initialize, session
// records and decision logs: the release or module version, else the
// commit it was built from.
func brokerVersion() string {
	r := readBuildReport()
	if r.Version != "(devel)" || r.Revision == "" {
		return r.Version
	}
	v := "(devel)-" + shortRevision(r.Revision)
	if r.Modified {
		v += "+dirty"
	}
	return v
}

// shortRevision is the first 12 characters of a commit hash.
func shortRevision(rev string) string { return rev[:min(len(rev), 12)] }

// newVersionCommand returns `fsbroker version`.
func newVersionCommand() *cobra.Command {
	var asJSON bool
	c := &cobra.Command{
		Use:   "version",
		Short: "print the version, commit, Go and OPA versions",
		Long: `Print where this binary comes from, read from the build information the go command
embedded in it: the module version (a release tag, or a Go pseudo-version of the commit), the
commit and its time (and whether the work tree had uncommitted changes), the Go version and
platform, and the version of OPA, the policy engine built in. --json prints the same as one
JSON object (version, revision, time, modified, go, platform, opa).`,
		Example: `  fsbroker version
  fsbroker version --json | jq -r .revision`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runVersion(asJSON, cmd.OutOrStdout())
		},
	}
	c.Flags().BoolVar(&asJSON, "json", false, "print one JSON object, for machines")
	return c
}

// runVersion prints the build report, as text or as JSON.
func runVersion(asJSON bool, stdout io.Writer) error {
	r := readBuildReport()
	if asJSON {
		out, err := json.Marshal(r)
		if err != nil {
			return err
		}
		_, err = fmt.Fprintln(stdout, string(out))
		return err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "fsbroker %s\n", r.Version)
	switch {
	case r.Revision != "":
		modified := ""
		if r.Modified {
			modified = ", with uncommitted changes"
		}
		fmt.Fprintf(&b, "  revision  %s (%s%s)\n", r.Revision, r.Time, modified)
	case r.Version == "(devel)":
		b.WriteString("  revision  unknown: built without version control information (-buildvcs=false)\n")
	}
	fmt.Fprintf(&b, "  go        %s %s\n", r.Go, r.Platform)
	fmt.Fprintf(&b, "  opa       %s\n", r.OPA)
	_, err := io.WriteString(stdout, b.String())
	return err
}
