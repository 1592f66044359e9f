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

With --serve, run the serve section instead (docs/protocol.md section 8): the runner plays the
host of a filesystem MCP server, the command after "--" (default: this fsbroker binary with
"serve {roots} {state} {consent} {flags}"), started for each case with the case's root
directories appended, unless it places them itself with {dirs} (the directories alone) or the
placeholders above. Drop-in cases (tag s8-drop-in: tool names, arguments, defaults, result
texts, structuredContent, errors) hold any drop-in for the reference server
@modelcontextprotocol/server-filesystem; enforcement cases (s8-enforce: secrets, read-only roots,
paths outside the roots) hold a server that enforces policy, and those tagged reference-fails are
expected to fail against the reference server. A line per tag says how many cases passed.

Cases tagged known-failure run only when that tag is asked for. The last line of output is
"N passed, M failed". Exit status: 0 when every case passed, 1 when one failed, 2 on a usage
error.
`

// newConformanceCommand returns `fsbroker conformance`.
func newConformanceCommand() *cobra.Command {
	return leafCommand(&cobra.Command{
		Use:   "conformance [flags] [--serve [-- CMD ARGS...]]",
		Short: "run the conformance suite against a broker command",
		Long:  conformanceHelp,
		Example: `  # This fsbroker, every case
  fsbroker conformance

  # Another broker, the consent cases only, each outcome printed
  fsbroker conformance --broker "/usr/local/bin/other-broker --stdio" --tag consent --verbose

  # List the cases a pattern selects
  fsbroker conformance --run 'files/read/*' --list

  # The serve section against this fsbroker serve, then against the reference server
  fsbroker conformance --serve
  fsbroker conformance --serve --verbose -- npx -y @modelcontextprotocol/server-filesystem`,
		Args: serveCommandArgs,
	}, conformanceFlags)
}

// serveCommandArgs allows arguments only after "--": the server command of --serve.
func serveCommandArgs(c *cobra.Command, args []string) error {
	if len(args) > 0 && c.ArgsLenAtDash() != 0 {
		return configErrorf("conformance takes no arguments but a server command after \"--\" (with --serve), got %q", args)
	}
	return nil
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
		serve      bool
	)
	fs.StringVar(&brokerLine, "broker", "", "the broker `COMMAND` line, split at spaces (default: this binary with \"stdio\")")
	fs.BoolVar(&serve, "serve", false, "run the serve section against the filesystem MCP server command after \"--\" (default: this binary with \"serve\"), playing its host")
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
	return func(ctx context.Context, server []string, stdout, stderr io.Writer) error {
		if parallel < 0 {
			return configErrorf("conformance: --parallel %d: want 0 or more", parallel)
		}
		switch {
		case serve && brokerLine != "":
			return configErrorf("conformance: --broker and --serve exclude each other: give the server command after \"--\"")
		case !serve && len(server) > 0:
			return configErrorf("conformance: a command after \"--\" is the server of --serve, which is not given")
		}
		var (
			cases []*conformance.Case
			err   error
		)
		if casesDir != "" {
			cases, err = conformance.LoadCases(os.DirFS(casesDir), ".")
		} else {
			cases, err = conformance.LoadCases(conformance.Files(), "cases")
		}
		if err != nil {
			return configErrorf("conformance: %v", err)
		}
		cases = conformance.BySection(cases, serve)
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
		if len(broker) == 0 || serve && len(server) == 0 {
			self, err := os.Executable()
			if err != nil {
				return fmt.Errorf("conformance: find this binary: %w", err)
			}
			if len(broker) == 0 {
				broker = []string{self, "stdio"}
			}
			if serve && len(server) == 0 {
				server = []string{self, "serve", conformance.PlaceholderRoots, conformance.PlaceholderState,
					conformance.PlaceholderConsent, conformance.PlaceholderFlags}
			}
		}
		r := &conformance.Runner{Broker: broker, Server: server, Parallel: parallel, Verbose: verbose, Grace: grace}
		if serve {
			r.Summary = []string{conformance.TagDropIn, conformance.TagEnforce}
		}
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
