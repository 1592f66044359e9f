// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

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

const policyLong = `Test and check a policy set: a directory of Rego files and data (data.json, data.yaml), as
--policies takes it, or the built-in set when no DIR is given. The broker loads a set only once
it compiles, type-checks against the policy input schema and passes its tests; these commands
run the same checks before you deploy one. See docs/policy.md.

Exit status: 0 passed; 2 a usage error; 3 the policies do not compile or type-check; 4 a
policy test failed (policy test).`

const policyExample = `  # Test the built-in policies, listing every test
  fsbroker policy test --verbose

  # Check a set of your own before pointing --policies at it
  fsbroker policy check ./policies
  fsbroker policy test ./policies`

// newPolicyCommand returns `fsbroker policy test|check`.
func newPolicyCommand() *cobra.Command {
	return newGroupCommand(&cobra.Command{
		Use:     "policy COMMAND",
		Short:   "test or check a policy set (test, check)",
		Long:    policyLong,
		Example: policyExample,
	}, newPolicyTestCommand(), newPolicyCheckCommand())
}

// newPolicyTestCommand returns `fsbroker policy test`.
func newPolicyTestCommand() *cobra.Command {
	var verbose bool
	c := &cobra.Command{
		Use:   "test [DIR]",
		Short: "run a policy set's Rego tests, with coverage",
		Long: `Compile the policy set in DIR (default: the built-in set) and run its Rego tests (the rules
named test_* in its *_test.rego files), then print the failures, the coverage of the policy
files and a count. The broker runs the same tests when it loads a --policies set, and refuses
a set whose tests fail.

Exit status: 0 every test passed; 2 a usage error; 3 the set does not compile; 4 a test
failed.`,
		Example: `  fsbroker policy test
  fsbroker policy test --verbose ./policies`,
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runPolicy(cmd.Context(), "test", verbose, args, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	c.Flags().BoolVar(&verbose, "verbose", false, "list every test, passed ones included")
	return c
}

// newPolicyCheckCommand returns `fsbroker policy check`.
func newPolicyCheckCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "check [DIR]",
		Short: "compile and type-check a policy set against the policy input schema",
		Long: `Compile the policy set in DIR (default: the built-in set) and type-check it against the
policy input schema (schema/policy-input.json), without running its tests: a misspelt input
field or a wrong type is an error with its file and line.

Exit status: 0 the set compiles and type-checks; 2 a usage error; 3 it does not.`,
		Example: `  fsbroker policy check ./policies`,
		Args:    cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runPolicy(cmd.Context(), "check", false, args, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
}

// runPolicy runs `fsbroker policy test|check [DIR]`.
func runPolicy(ctx context.Context, cmd string, verbose bool, args []string, stdout, stderr io.Writer) error {
	src, err := policySource(args)
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
		if !r.Pass || verbose {
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

// newEvalCommand returns `fsbroker eval`.
func newEvalCommand() *cobra.Command {
	var inputPath, dir string
	c := &cobra.Command{
		Use:   "eval --input FILE [--policies DIR]",
		Short: "the decision on one policy input, and the rules that matched",
		Long: `Evaluate the policies (the built-in set, or --policies DIR) on one policy input, the JSON
document the broker builds for each request (schema/policy-input.json; docs/policy.md), and
print the decision (allow, code, reasons, obligations), the policy revision and the rules that
matched. An input that does not match the schema is refused, naming the field: the broker could
never send it, and a misspelt member would be silently absent to Rego.

Exit status: 0 a decision was made, allowed or not; 2 a usage error, or an input that is not
JSON or does not match the schema; 3 the policies do not compile.`,
		Example: `  # Why was this read refused?
  fsbroker eval --input input.json

  # The same input against a policy set of your own, read from stdin
  fsbroker eval --policies ./policies --input - < input.json`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runEval(cmd.Context(), inputPath, dir, cmd.InOrStdin(), cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	c.Flags().StringVar(&inputPath, "input", "", "the policy input `FILE` (JSON, as schema/policy-input.json describes; - for stdin)")
	c.Flags().StringVar(&dir, "policies", "", "policy `DIR`; default: the built-in policies")
	return c
}

// runEval runs `fsbroker eval --input FILE [--policies DIR]`: the decision on
// one policy input, and the rules that matched.
func runEval(ctx context.Context, inputPath, dir string, stdin io.Reader, stdout, stderr io.Writer) error {
	if inputPath == "" {
		return configErrorf("eval needs --input FILE")
	}
	var raw []byte
	var err error
	if inputPath == "-" {
		raw, err = io.ReadAll(stdin)
	} else {
		raw, err = os.ReadFile(inputPath)
	}
	if err != nil {
		return configErrorf("--input %s: %v", inputPath, err)
	}
	if !json.Valid(raw) {
		return configErrorf("--input %s: not valid JSON", inputPath)
	}
	// An input the broker could never send gives a decision that means
	// nothing (a misspelt member is simply absent to Rego): refuse it, naming
	// each violation by its JSON pointer.
	v, err := schema.New()
	if err != nil {
		return err
	}
	if err := v.ValidatePolicyInput(raw); err != nil {
		return configErrorf("--input %s does not match schema/policy-input.json: %v", inputPath, err)
	}
	src := engine.Source{FS: policies.FS}
	if dir != "" {
		src = engine.Source{Dir: dir}
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
