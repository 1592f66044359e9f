// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/fsbroker/fsbroker/broker/runtime"
)

// The command line is built with cobra, as OPA's own is: every command has a
// short and a long description and examples, and its flags are shown in
// groups; `fsbroker help COMMAND`, `fsbroker completion SHELL` and the man
// pages (`make man`) all come from the same command tree, which run builds
// afresh for each command line (no state is kept between runs).

// Annotations fsbroker puts on its commands and flags.
const (
	// flagGroupAnnotation names the group a flag is listed under in help.
	flagGroupAnnotation = "fsbroker-flag-group"
	// serverCommandAnnotation marks the commands that take a server
	// command after "--" (connect, wrap): their flags end at the first
	// argument that is not a flag.
	serverCommandAnnotation = "fsbroker-server-command"
)

// IDs of the groups the root command lists its commands in.
const (
	groupServe  = "serve"
	groupPolicy = "policy"
	groupTrail  = "trail"
	groupOther  = "other"
)

// helpWidth is the width help text is wrapped to.
const helpWidth = 100

// rootLong is the root command's description.
const rootLong = `fsbroker is the MCP client-side filesystem broker: an MCP server asks it for files
(roots/list and the files/* methods), and it answers within the roots, the consent and the Rego
policies the operator set, recording every decision in a tamper-evident audit trail.

Exit status: 0 done (a session ended cleanly); 1 a runtime failure; 2 a usage or configuration
error, with a message naming the setting; the policy commands also exit 3 (the policies do not
compile) and 4 (a policy test failed). A wrapped server's own exit status passes through wrap.

A long flag may be given with one dash (-root DIR), as in Go's flag package; the documentation
writes two.`

const rootExample = `  # A guided session on built-in defaults: decisions and the audit trail
  fsbroker demo

  # Serve an MCP server started as a child process, with one writable root
  fsbroker connect --root ~/notes:rw -- example-server

  # Sit between an MCP host and its server (the host's config runs this)
  fsbroker wrap --root ~/project -- npx -y @modelcontextprotocol/server-filesystem ~/project

  # Check the policies, and read the audit trail
  fsbroker policy test ./policies
  fsbroker audit query --decision deny --since 24h`

// newRootCommand returns fsbroker's command tree, reading stdin and writing
// stdout and stderr.
func newRootCommand(stdin io.Reader, stdout, stderr io.Writer) *cobra.Command {
	var showVersion bool
	root := &cobra.Command{
		Use:               "fsbroker COMMAND",
		Short:             "the MCP client-side filesystem broker",
		Long:              rootLong,
		Example:           rootExample,
		Args:              cobra.ArbitraryArgs,
		SilenceErrors:     true,
		SilenceUsage:      true,
		DisableAutoGenTag: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			switch {
			case showVersion:
				return runVersion(false, stdout)
			case len(args) == 0:
				writeUsage(cmd, stderr)
				return errUsageShown
			}
			return unknownCommand(cmd, args[0])
		},
	}
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.Flags().BoolVar(&showVersion, "version", false, "print the version (as fsbroker version does)")
	root.AddGroup(
		&cobra.Group{ID: groupServe, Title: "Serve MCP servers:"},
		&cobra.Group{ID: groupPolicy, Title: "Write and check policies:"},
		&cobra.Group{ID: groupTrail, Title: "Consent and the audit trail:"},
		&cobra.Group{ID: groupOther, Title: "Other commands:"},
	)
	inGroup := func(id string, cmds ...*cobra.Command) {
		for _, c := range cmds {
			c.GroupID = id
			root.AddCommand(c)
		}
	}
	inGroup(groupServe, newStdioCommand(), newConnectCommand(), newWrapCommand(), newServeCommand())
	inGroup(groupPolicy, newPolicyCommand(), newEvalCommand())
	inGroup(groupTrail, newGrantsCommand(), newAuditCommand(), newConsoleCommand())
	inGroup(groupOther, newDemoCommand(), newConformanceCommand(), newVersionCommand(), newCompletionCommand())
	root.AddCommand(newExampleServerCommand(), newManCommand(), newSandboxHelperCommand())
	root.SetHelpCommand(newHelpCommand())
	root.SetHelpCommandGroupID(groupOther)
	root.SetFlagErrorFunc(flagError)
	root.SetHelpFunc(func(c *cobra.Command, _ []string) { writeHelp(c, c.OutOrStdout()) })
	root.SetUsageFunc(func(c *cobra.Command) error {
		writeUsage(c, c.OutOrStderr())
		return nil
	})
	return root
}

// run executes one command line and returns the exit status. ctx ends on
// SIGINT or SIGTERM, which stops a session gracefully.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	return exitStatus(execute(ctx, args, stdin, stdout, stderr), stderr)
}

// execute runs one command line on a command tree of its own and returns
// its error, unprinted.
func execute(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	root := newRootCommand(stdin, stdout, stderr)
	// A nil slice would make cobra read os.Args.
	root.SetArgs(append([]string{}, oneDashLongFlags(root, args)...))
	return root.ExecuteContext(ctx)
}

// exitStatus maps a command's error to its exit status, printing it.
func exitStatus(err error, stderr io.Writer) int {
	var (
		cerr        *configError
		runtimeCErr *runtime.ConfigError
		codeErr     *exitCodeError
	)
	switch {
	case err == nil:
		return exitOK
	case errors.Is(err, errUsageShown):
		return exitUsage
	case errors.As(err, &codeErr):
		return codeErr.code
	case errors.As(err, &cerr), errors.As(err, &runtimeCErr):
		fmt.Fprintln(stderr, "fsbroker:", err)
		return exitUsage
	case errors.Is(err, errAlreadyLogged):
		return exitFailure
	default:
		fmt.Fprintln(stderr, "fsbroker:", err)
		return exitFailure
	}
}

var (
	// errUsageShown ends a command line that named no command, after the
	// usage was printed on stderr: a usage error.
	errUsageShown = errors.New("usage shown")
	// errAlreadyLogged is a runtime failure whose reason is already in the log.
	errAlreadyLogged = errors.New("failure already logged")
)

// flagError makes a flag parsing error a usage error that says where the
// flags are described.
func flagError(c *cobra.Command, err error) error {
	return configErrorf("%s: %v (run \"%s\")", c.CommandPath(), err, helpCommandLine(c))
}

// helpCommandLine is the command line that shows c's help.
func helpCommandLine(c *cobra.Command) string {
	if !c.HasParent() {
		return c.Name() + " help"
	}
	return c.Root().Name() + " help " + strings.TrimPrefix(c.CommandPath(), c.Root().Name()+" ")
}

// unknownCommand is the usage error for a command name c does not have,
// with the names cobra finds close to it.
func unknownCommand(c *cobra.Command, name string) error {
	msg := fmt.Sprintf("unknown command %q", name)
	if c.HasParent() {
		msg = c.Name() + ": " + msg + ": want " + subcommandNames(c)
	}
	if c.SuggestionsMinimumDistance <= 0 {
		c.SuggestionsMinimumDistance = 2 // cobra's own default, which it sets only for its messages
	}
	if s := c.SuggestionsFor(name); len(s) > 0 {
		msg += fmt.Sprintf("; did you mean %q?", s[0])
	}
	return configErrorf("%s (run \"%s\")", msg, helpCommandLine(c))
}

// subcommandNames lists the commands of c a person may run: "verify, query
// or hash".
func subcommandNames(c *cobra.Command) string {
	var names []string
	for _, sub := range c.Commands() {
		if sub.IsAvailableCommand() {
			names = append(names, sub.Name())
		}
	}
	if len(names) < 2 {
		return strings.Join(names, "")
	}
	return strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
}

// newGroupCommand returns a command made of subcommands (fsbroker audit,
// grants, policy). Run alone or with an unknown name it is a usage error
// naming its commands; "fsbroker NAME help [COMMAND]" shows the help as
// "fsbroker help NAME [COMMAND]" does.
func newGroupCommand(c *cobra.Command, subs ...*cobra.Command) *cobra.Command {
	c.Args = cobra.ArbitraryArgs
	c.RunE = func(cmd *cobra.Command, args []string) error {
		switch {
		case len(args) == 0:
			return configErrorf("%s: give a command: %s (run \"%s\")", cmd.Name(), subcommandNames(cmd), helpCommandLine(cmd))
		case args[0] == "help":
			return showHelp(cmd, args[1:])
		}
		return unknownCommand(cmd, args[0])
	}
	c.AddCommand(subs...)
	return c
}

// newHelpCommand returns `fsbroker help [COMMAND...]`.
func newHelpCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "help [COMMAND [SUBCOMMAND]]",
		Short: "show what a command does, its flags and examples",
		Long: `Show what fsbroker or one of its commands does, its flags, grouped, and examples. The same
text is printed by COMMAND --help (or -h), and is in the man pages (man fsbroker-COMMAND).`,
		Example: `  fsbroker help connect
  fsbroker help audit verify
  fsbroker policy --help`,
		Args: cobra.ArbitraryArgs,
		ValidArgsFunction: func(c *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
			target, rest, err := c.Root().Find(args)
			if err != nil || len(rest) > 0 {
				return nil, cobra.ShellCompDirectiveNoFileComp
			}
			var names []cobra.Completion
			for _, sub := range target.Commands() {
				if sub.IsAvailableCommand() && strings.HasPrefix(sub.Name(), toComplete) {
					names = append(names, cobra.CompletionWithDesc(sub.Name(), sub.Short))
				}
			}
			return names, cobra.ShellCompDirectiveNoFileComp
		},
		RunE: func(c *cobra.Command, args []string) error {
			return showHelp(c.Root(), args)
		},
	}
}

// showHelp prints the help of the command args name below from.
func showHelp(from *cobra.Command, args []string) error {
	target, rest, err := from.Find(args)
	if err != nil || len(rest) > 0 || target.Hidden {
		name := strings.TrimSpace(strings.TrimPrefix(from.CommandPath(), from.Root().Name()) + " " + strings.Join(args, " "))
		return configErrorf("help: unknown command %q (run \"%s help\")", name, from.Root().Name())
	}
	target.InitDefaultHelpFlag()
	return target.Help()
}

// writeHelp prints c's description, then its usage.
func writeHelp(c *cobra.Command, w io.Writer) {
	text := c.Long
	if text == "" {
		text = c.Short
	}
	fmt.Fprintf(w, "%s\n\n", strings.TrimRight(text, "\n "))
	writeUsage(c, w)
}

// writeUsage prints c's command line, examples, commands and flags, grouped.
func writeUsage(c *cobra.Command, w io.Writer) {
	var b strings.Builder
	fmt.Fprintf(&b, "Usage:\n  %s\n", c.UseLine())
	if c.HasExample() {
		fmt.Fprintf(&b, "\nExamples:\n%s\n", strings.TrimRight(c.Example, "\n "))
	}
	if c.HasAvailableSubCommands() {
		writeCommands(&b, c)
	}
	writeFlags(&b, c)
	if c.HasAvailableSubCommands() {
		fmt.Fprintf(&b, "\nRun \"%s COMMAND\" for a command's description, flags and examples.\n", helpCommandLine(c))
	}
	_, _ = io.WriteString(w, b.String())
}

// writeCommands lists c's commands, under the titles of their groups.
func writeCommands(b *strings.Builder, c *cobra.Command) {
	titles := []*cobra.Group{{ID: "", Title: "Commands:"}}
	if groups := c.Groups(); len(groups) > 0 {
		titles = groups
	}
	for _, g := range titles {
		var lines []string
		for _, sub := range c.Commands() {
			if sub.GroupID == g.ID && (sub.IsAvailableCommand() || sub.Name() == "help") {
				lines = append(lines, fmt.Sprintf("  %s\t%s", sub.Name(), sub.Short))
			}
		}
		if len(lines) == 0 {
			continue
		}
		fmt.Fprintf(b, "\n%s\n", g.Title)
		tw := tabwriter.NewWriter(b, 0, 0, 3, ' ', 0)
		for _, l := range lines {
			fmt.Fprintln(tw, l)
		}
		_ = tw.Flush()
	}
}

// writeFlags lists c's flags in their groups (flagGroupAnnotation), in the
// order the groups were first used, then the flags of no group.
func writeFlags(b *strings.Builder, c *cobra.Command) {
	var (
		order  []string
		groups = map[string]*pflag.FlagSet{}
	)
	c.LocalFlags().VisitAll(func(f *pflag.Flag) {
		if f.Hidden {
			return
		}
		title := "Flags:"
		if g := f.Annotations[flagGroupAnnotation]; len(g) > 0 {
			title = g[0] + ":"
		}
		fs, ok := groups[title]
		if !ok {
			fs = pflag.NewFlagSet(title, pflag.ContinueOnError)
			fs.SortFlags = false
			groups[title] = fs
			order = append(order, title)
		}
		fs.AddFlag(f)
	})
	// The flags of no group (--help among them) come last when others are
	// grouped: they matter least.
	if i := indexOf(order, "Flags:"); i >= 0 && len(order) > 1 {
		order = append(append(order[:i:i], order[i+1:]...), "Other flags:")
		groups["Other flags:"] = groups["Flags:"]
	}
	for _, title := range order {
		fmt.Fprintf(b, "\n%s\n%s", title, groups[title].FlagUsagesWrapped(helpWidth))
	}
}

func indexOf(list []string, s string) int {
	for i, v := range list {
		if v == s {
			return i
		}
	}
	return -1
}

// setFlagGroup puts the named flags of fs in the help group title.
func setFlagGroup(fs *pflag.FlagSet, title string, names ...string) {
	for _, name := range names {
		if err := fs.SetAnnotation(name, flagGroupAnnotation, []string{title}); err != nil {
			panic(fmt.Sprintf("flag group %s: %v", title, err)) // a flag named here and not registered: a bug
		}
	}
}

// noArgs is cobra.NoArgs as a usage error that names the command.
func noArgs(c *cobra.Command, args []string) error {
	if len(args) > 0 {
		return configErrorf("%s takes no arguments, got %q", strings.TrimPrefix(c.CommandPath(), c.Root().Name()+" "), args)
	}
	return nil
}

// oneDashLongFlags rewrites each long flag given with one dash ("-root DIR",
// "-root=DIR", as Go's flag package took them and fsbroker did before its
// command line moved to cobra) to two dashes, for the command args runs:
// pflag reads "-root" as the shorthands -r -o -o -t. Arguments after "--",
// flag values, and (for connect and wrap) everything from the first argument
// that is not a flag are left as they are.
func oneDashLongFlags(root *cobra.Command, args []string) []string {
	cmd, _, err := root.Find(args)
	if err != nil || cmd.DisableFlagParsing {
		return args
	}
	cmd.InitDefaultHelpFlag()
	flags := cmd.Flags()
	names := len(strings.Fields(cmd.CommandPath())) - 1 // the command's own names among args
	stopAtArgument := cmd.Annotations[serverCommandAnnotation] != ""
	out := make([]string, 0, len(args))
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--":
			return append(out, args[i:]...)
		case !strings.HasPrefix(a, "-") || a == "-":
			out = append(out, a)
			if names > 0 {
				names--
				continue
			}
			if stopAtArgument {
				return append(out, args[i+1:]...)
			}
			continue
		}
		if strings.HasPrefix(a, "--") {
			name, _, hasValue := strings.Cut(a[2:], "=")
			out = append(out, a)
			if f := flags.Lookup(name); f != nil && f.NoOptDefVal == "" && !hasValue && i+1 < len(args) {
				out = append(out, args[i+1])
				i++
			}
			continue
		}
		name, _, hasValue := strings.Cut(a[1:], "=")
		if f := flags.Lookup(name); len(name) > 1 && f != nil {
			out = append(out, "-"+a)
			if f.NoOptDefVal == "" && !hasValue && i+1 < len(args) {
				out = append(out, args[i+1])
				i++
			}
			continue
		}
		// Shorthands, alone or together (-n 5, -fn 5, -n5): the first one
		// that takes a value takes the rest of the word, or the next word.
		out = append(out, a)
		for j, ch := range a[1:] {
			f := flags.ShorthandLookup(string(ch))
			if f == nil || f.NoOptDefVal != "" {
				continue
			}
			if j == len(a)-2 && i+1 < len(args) {
				out = append(out, args[i+1])
				i++
			}
			break
		}
	}
	return out
}
