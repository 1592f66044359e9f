// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/fsbroker/fsbroker/conformance"
)

const conformanceHelp = `Run the conformance suite (the test vectors of docs/protocol.md; see docs/conformance.md)
against a broker command, playing the MCP server on its stdin and stdout, each case in a fresh
temporary directory and a fresh broker process. The command gets, for each case, --root
DIR[:rw] per root, --state-dir DIR, --consent MODE and the case's own flags appended, unless it
places them itself with the arguments {roots}, {state}, {consent} and {flags}. The default
command is this fsbroker binary with "stdio".

Cases tagged known-failure run only when that tag is asked for. The last line of output is
"N passed, M failed". Exit status: 0 when every case passed, 1 when one failed, 2 on a usage
error.
`

// newConformanceCommand returns `fsbroker conformance`.
func newConformanceCommand() *cobra.Command {
	return leafCommand(&cobra.Command{
		Use:   "conformance [flags]",
		Short: "run the conformance suite against a broker command",
		Long:  conformanceHelp,
		Example: `  # This fsbroker, every case
  fsbroker conformance

  # Another broker, the consent cases only, each outcome printed
  fsbroker conformance --broker "/usr/local/bin/other-broker --stdio" --tag consent --verbose

  # List the cases a pattern selects
  fsbroker conformance --run 'files/read/*' --list`,
		Args: noArgs,
	}, conformanceFlags)
}

// conformanceFlags registers the flags of `fsbroker conformance` and returns what runs it.
func conformanceFlags(fs *pflag.FlagSet) func(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var (
		brokerLine string
		run        string
		tags       []string
		casesDir   string
		parallel   int
		verbose    bool
		list       bool
		grace      time.Duration
	)
	fs.StringVar(&brokerLine, "broker", "", "the broker `COMMAND` line, split at spaces (default: this binary with \"stdio\")")
	fs.StringVar(&run, "run", "", "run only the cases whose name matches one of these comma-separated `GLOB`s")
	fs.Func("tag", "run only the cases with this `TAG` (repeatable, or comma-separated)", func(v string) error {
		for t := range strings.SplitSeq(v, ",") {
			if t = strings.TrimSpace(t); t != "" {
				tags = append(tags, t)
			}
		}
		return nil
	})
	fs.StringVar(&casesDir, "cases", "", "load the cases from `DIR` instead of the built-in suite")
	fs.IntVar(&parallel, "parallel", 0, "cases run at once (`N`; default twice the CPUs)")
	fs.BoolVar(&verbose, "verbose", false, "print every case's outcome, and the transcript and broker log of each failure")
	fs.BoolVar(&list, "list", false, "list the selected cases and their tags instead of running them")
	var toolSpecs []string
	fs.Func("tool", "the command behind a tool cases run beside the broker, as `NAME=COMMAND ARGS` (grants-revoke, grants-restore: fsbroker's \"{broker-bin} grants revoke --state-dir {statedir}\" and \"... grants restore ...\"); repeatable; NAME= alone skips the cases that need it", func(v string) error {
		if _, err := conformance.ParseTools(v); err != nil {
			return err
		}
		toolSpecs = append(toolSpecs, v)
		return nil
	})
	durationVar(fs, &grace, "grace", conformance.DefaultGrace, "how long a broker may take to exit after its stdin closes, and after SIGTERM")
	return func(ctx context.Context, _ []string, stdout, stderr io.Writer) error {
		if parallel < 0 {
			return configErrorf("conformance: --parallel %d: want 0 or more", parallel)
		}
		var (
			cases []*conformance.Case
			err   error
		)
		if casesDir != "" {
			cases, err = conformance.LoadCases(os.DirFS(casesDir), ".")
		} else {
			cases, err = conformance.Suite()
		}
		if err != nil {
			return configErrorf("conformance: %v", err)
		}
		if cases, err = conformance.Select(cases, run, tags); err != nil {
			return configErrorf("conformance: --run: %v", err)
		}
		if list {
			for _, c := range cases {
				fmt.Fprintf(stdout, "%-60s %s\n", c.Name, strings.Join(c.Tags, ","))
			}
			fmt.Fprintf(stdout, "%d cases\n", len(cases))
			return nil
		}
		if len(cases) == 0 {
			return configErrorf("conformance: no case matches --run %q --tag %q", run, strings.Join(tags, ","))
		}
		broker := strings.Fields(brokerLine)
		if len(broker) == 0 {
			self, err := os.Executable()
			if err != nil {
				return fmt.Errorf("conformance: find this binary: %w", err)
			}
			broker = []string{self, "stdio"}
		}
		r := &conformance.Runner{Broker: broker, Parallel: parallel, Verbose: verbose, Grace: grace}
		if len(toolSpecs) > 0 {
			if r.Tools, err = conformance.ParseTools(strings.Join(toolSpecs, ";")); err != nil {
				return configErrorf("conformance: --tool: %v", err)
			}
		}
		failed := 0
		for _, res := range r.Run(ctx, cases, stdout) {
			if res.Skipped == "" && !res.Passed() {
				failed++
			}
		}
		if failed > 0 {
			return &exitCodeError{code: exitFailure}
		}
		return nil
	}
}
