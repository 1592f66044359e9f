package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/fsbroker/fsbroker/engine"
	"github.com/fsbroker/fsbroker/policies"
	"github.com/fsbroker/fsbroker/schema"
)

// Exit statuses of the policy commands (PROTOCOL.md section 7).
const (
	exitPolicyCompile = 3
	exitPolicyTests   = 4
)

// exitCodeError ends a command with a specific status, its message already
// printed.
type exitCodeError struct{ code int }

func (e *exitCodeError) Error() string { return fmt.Sprintf("exit status %d", e.code) }

// policySource is DIR when given, else the built-in policies.
func policySource(args []string) (engine.Source, error) {
	switch len(args) {
	case 0:
		return engine.Source{FS: policies.FS}, nil
	case 1:
		return engine.Source{Dir: args[0]}, nil
	default:
		return engine.Source{}, configErrorf("give at most one policy directory, got %q", args)
	}
}

// runPolicy runs `fsbroker policy test|check [DIR]`.
func runPolicy(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || (args[0] != "test" && args[0] != "check") {
		return configErrorf("usage: fsbroker policy test [--verbose] [DIR] | fsbroker policy check [DIR]")
	}
	cmd := args[0]
	fs := flag.NewFlagSet("fsbroker policy "+cmd, flag.ContinueOnError)
	fs.SetOutput(stderr)
	verbose := fs.Bool("verbose", false, "list every test, passed ones included")
	if err := fs.Parse(args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return errHelpShown
		}
		return &configError{msg: err.Error()}
	}
	src, err := policySource(fs.Args())
	if err != nil {
		return err
	}
	if cmd == "check" {
		if err := engine.Check(ctx, src); err != nil {
			fmt.Fprintln(stderr, err)
			return &exitCodeError{code: exitPolicyCompile}
		}
		fmt.Fprintf(stdout, "%s: compiles and type-checks against the policy input schema\n", src)
		return nil
	}
	rep, err := engine.Test(ctx, src)
	if err != nil {
		fmt.Fprintln(stderr, err)
		var lerr *engine.LoadError
		if errors.As(err, &lerr) {
			return &exitCodeError{code: exitPolicyCompile}
		}
		return err
	}
	passed, failed, skipped := 0, 0, 0
	for _, r := range rep.Results {
		switch {
		case r.Skip:
			skipped++
		case r.Pass:
			passed++
		default:
			failed++
		}
		if !r.Pass || *verbose {
			status := "PASS"
			if r.Skip {
				status = "SKIP"
			} else if !r.Pass {
				status = "FAIL"
			}
			fmt.Fprintf(stdout, "%s %s.%s (%s)", status, r.Package, r.Name, r.Duration)
			if r.Fail != "" {
				fmt.Fprintf(stdout, ": %s", r.Fail)
			}
			fmt.Fprintln(stdout)
		}
	}
	fmt.Fprintf(stdout, "coverage: %.1f%%\n", rep.Coverage)
	fmt.Fprintf(stdout, "%d passed, %d failed, %d skipped\n", passed, failed, skipped)
	if !rep.Passed() {
		return &exitCodeError{code: exitPolicyTests}
	}
	return nil
}

// runEval runs `fsbroker eval --input FILE [--policies DIR]`: the decision on
// one policy input, and the rules that matched.
func runEval(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("fsbroker eval", flag.ContinueOnError)
	fs.SetOutput(stderr)
	inputPath := fs.String("input", "", "the policy input `FILE` (JSON, as schema/policy-input.json describes; - for stdin)")
	dir := fs.String("policies", "", "policy `DIR`; default: the built-in policies")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return errHelpShown
		}
		return &configError{msg: err.Error()}
	}
	if *inputPath == "" {
		return configErrorf("eval needs --input FILE")
	}
	var raw []byte
	var err error
	if *inputPath == "-" {
		raw, err = io.ReadAll(os.Stdin)
	} else {
		raw, err = os.ReadFile(*inputPath)
	}
	if err != nil {
		return configErrorf("--input %s: %v", *inputPath, err)
	}
	if !json.Valid(raw) {
		return configErrorf("--input %s: not valid JSON", *inputPath)
	}
	// An input the broker could never send gives a decision that means
	// nothing (a misspelt member is simply absent to Rego): refuse it, naming
	// each violation by its JSON pointer.
	v, err := schema.New()
	if err != nil {
		return err
	}
	if err := v.ValidatePolicyInput(raw); err != nil {
		return configErrorf("--input %s does not match schema/policy-input.json: %v", *inputPath, err)
	}
	src := engine.Source{FS: policies.FS}
	if *dir != "" {
		src = engine.Source{Dir: *dir}
	}
	e, err := engine.New(ctx, src, engine.WithRunTests(false))
	if err != nil {
		fmt.Fprintln(stderr, err)
		return &exitCodeError{code: exitPolicyCompile}
	}
	dec, matched, err := e.Explain(ctx, json.RawMessage(raw))
	if err != nil {
		fmt.Fprintln(stderr, "evaluation failed (the broker would deny):", err)
	}
	out, _ := json.MarshalIndent(map[string]any{
		"decision": map[string]any{"allow": dec.Allow, "code": dec.Code, "reasons": dec.Reasons, "obligations": dec.Obligations},
		"revision": dec.Revision,
		"matched":  matched,
	}, "", "  ")
	fmt.Fprintln(stdout, string(out))
	return nil
}
