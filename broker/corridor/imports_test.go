// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package corridor_test

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// module is the path every package of the project starts with.
const module = "github.com/fsbroker/fsbroker/"

// stages are the packages of each stage of the pipeline of docs/protocol.md
// section 1, in the pipeline's order.
var stages = []struct {
	name     string
	packages []string
}{
	{"schema", []string{"schema"}},
	{"canonicalize", []string{"broker/roots", "broker/canon"}},
	{"consent", []string{"broker/consent", "broker/grants"}},
	{"policy", []string{"broker/usage", "broker/decision", "engine"}},
	{"audit", []string{"audit"}},
	{"execution", []string{"broker/executor", "broker/executor/watch"}},
	// The corridor runs the stages; the front ends call it.
	{"corridor", []string{"broker/corridor"}},
	{"front end", []string{"broker"}},
}

// forbidden are imports a package must not have, directly or not, beyond
// those of the stage order.
var forbidden = map[string][]string{
	// The decider sees the policy input only: the decision types depend on
	// neither the executor nor the engine that implements them.
	"broker/decision": {"broker/executor", "broker/canon", "engine"},
	// The engine provides the decider; the corridor and the session are
	// wired to it by their host (cmd/fsbroker, or a Go program).
	"broker/corridor": {"engine"},
	"broker":          {"engine"},
}

// TestImportGraph holds the import graph to docs/architecture.md: data
// flows one way, so no stage depends on a stage that comes after it (the
// corridor after the stages it runs, the front ends after the corridor), the
// decision types do not depend on the executor, and neither the corridor nor
// the broker depends on the engine. It reads the graph from the go command (go list -deps), the
// packages as built, not their tests.
func TestImportGraph(t *testing.T) {
	goCmd, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command to list the packages with")
	}
	out, err := exec.Command(goCmd, "list", "-f", `{{.ImportPath}} {{join .Deps " "}}`, module+"...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	deps := map[string][]string{} // package -> the project's packages it depends on
	for line := range strings.SplitSeq(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		pkg := strings.TrimPrefix(fields[0], module)
		deps[pkg] = []string{}
		for _, d := range fields[1:] {
			if strings.HasPrefix(d, module) {
				deps[pkg] = append(deps[pkg], strings.TrimPrefix(d, module))
			}
		}
	}
	for i, st := range stages {
		for _, pkg := range st.packages {
			ds, ok := deps[pkg]
			if !ok {
				t.Errorf("stage %s: no package %s", st.name, pkg)
				continue
			}
			for _, later := range stages[i+1:] {
				for _, lp := range later.packages {
					if slices.Contains(ds, lp) {
						t.Errorf("%s (stage %s) depends on %s, of the later stage %s", pkg, st.name, lp, later.name)
					}
				}
			}
		}
	}
	for pkg, not := range forbidden {
		ds, ok := deps[pkg]
		if !ok {
			t.Errorf("no package %s", pkg)
		}
		for _, n := range not {
			if slices.Contains(ds, n) {
				t.Errorf("%s depends on %s", pkg, n)
			}
		}
	}
}
