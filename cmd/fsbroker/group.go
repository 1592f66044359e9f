package main

import (
	"context"
	"fmt"
	"io"
	"strings"
)

// commandGroup is a command made of subcommands (fsbroker audit ..., fsbroker
// grants ...): one dispatch, one help, one wording of its errors.
type commandGroup struct {
	name  string // as typed: "audit"
	usage string // the group's help text
	cmds  []subcommand
}

// subcommand is one command of a group.
type subcommand struct {
	name string
	run  func(ctx context.Context, args []string, stdout, stderr io.Writer) error
}

// run runs the subcommand args[0] with the rest of args; "help" (or -h)
// prints the group's help, or a subcommand's flags.
func (g *commandGroup) run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return configErrorf("%s: give a command: %s (run \"fsbroker help %s\")", g.name, g.names(), g.name)
	}
	switch name := args[0]; name {
	case "help", "-h", "-help", "--help":
		return g.help(args[1:], stdout)
	default:
		if c := g.find(name); c != nil {
			return c.run(ctx, args[1:], stdout, stderr)
		}
		return g.unknown(name)
	}
}

// help prints the group's help, or the flags of the subcommand args[0].
func (g *commandGroup) help(args []string, stdout io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stdout, g.usage)
		return nil
	}
	if c := g.find(args[0]); c != nil {
		return c.run(context.Background(), []string{"-h"}, stdout, stdout)
	}
	return g.unknown(args[0])
}

func (g *commandGroup) find(name string) *subcommand {
	for i := range g.cmds {
		if g.cmds[i].name == name {
			return &g.cmds[i]
		}
	}
	return nil
}

func (g *commandGroup) unknown(name string) error {
	return configErrorf("%s: unknown command %q: want %s", g.name, name, g.names())
}

// names lists the subcommands: "verify, query or hash".
func (g *commandGroup) names() string {
	names := make([]string, len(g.cmds))
	for i, c := range g.cmds {
		names[i] = c.name
	}
	if len(names) == 1 {
		return names[0]
	}
	return strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
}
