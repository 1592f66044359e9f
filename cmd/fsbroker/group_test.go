package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"testing"
)

// TestCommandGroup: a group dispatches to its subcommands, shows its help
// and a subcommand's flags, and refuses unknown or missing commands as a
// usage error naming the commands it has.
func TestCommandGroup(t *testing.T) {
	var ran []string
	cmd := func(name string) subcommand {
		return subcommand{name, func(_ context.Context, args []string, stdout, _ io.Writer) error {
			ran = append(ran, name+" "+strings.Join(args, " "))
			return nil
		}}
	}
	g := &commandGroup{name: "g", usage: "USAGE\n", cmds: []subcommand{cmd("a"), cmd("b"), cmd("c")}}
	var out bytes.Buffer
	if err := g.run(context.Background(), []string{"b", "-x", "1"}, &out, &out); err != nil {
		t.Fatal(err)
	}
	if err := g.run(context.Background(), []string{"help", "c"}, &out, &out); err != nil {
		t.Fatal(err)
	}
	if err := g.run(context.Background(), []string{"-h"}, &out, &out); err != nil || out.String() != "USAGE\n" {
		t.Fatalf("help: %q, %v", out.String(), err)
	}
	if got := strings.Join(ran, "|"); got != "b -x 1|c -h" {
		t.Errorf("ran %q", got)
	}
	for _, args := range [][]string{nil, {"d"}, {"help", "d"}} {
		err := g.run(context.Background(), args, &out, &out)
		var cerr *configError
		if !errors.As(err, &cerr) || !strings.Contains(err.Error(), "a, b or c") {
			t.Errorf("%q: %v, want a usage error naming a, b or c", args, err)
		}
	}
}
