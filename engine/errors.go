// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package engine

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/open-policy-agent/opa/v1/ast"
)

// LoadError reports a policy set that was refused: a file that does not parse, a compile or type
// error (a reference the input schema does not have included), a failing policy test, a bundle
// that fails verification, or a source that cannot be read.
type LoadError struct {
	// File and Line locate the first problem. File is "" and Line 0 when the problem has no
	// place in a file (a bundle signature, an unreadable directory).
	File string
	Line int
	// Problems lists every problem, in the order they were found; it is never empty.
	Problems []Problem

	err error
}

// Problem is one reason a policy set was refused.
type Problem struct {
	// File is the file the problem is in: the path under Source.Dir joined to it, the path
	// inside Source.FS, or the bundle file and the path inside it. "" when there is none.
	File string
	// Line and Column are 1-based; 0 when unknown.
	Line   int
	Column int
	// Message says what is wrong, for example
	// "rego_type_error: undefined ref: input.path.canonicl".
	Message string
}

// String renders the problem as file:line:column: message, leaving out what is unknown.
func (p Problem) String() string {
	var b strings.Builder
	if p.File != "" {
		b.WriteString(p.File)
		if p.Line > 0 {
			b.WriteByte(':')
			b.WriteString(strconv.Itoa(p.Line))
			if p.Column > 0 {
				b.WriteByte(':')
				b.WriteString(strconv.Itoa(p.Column))
			}
		}
		b.WriteString(": ")
	}
	b.WriteString(p.Message)
	return b.String()
}

// Error implements error: "engine: policy load failed: " and every problem, one per line after
// the first.
func (e *LoadError) Error() string {
	var b strings.Builder
	b.WriteString("engine: policy load failed: ")
	for i, p := range e.Problems {
		if i > 0 {
			b.WriteString("\n\t")
		}
		b.WriteString(p.String())
	}
	return b.String()
}

// Unwrap returns the underlying error (an ast.Errors, a bundle or file system error), if any.
func (e *LoadError) Unwrap() error {
	return e.err
}

// newLoadError builds a LoadError from problems; cause is what Unwrap returns.
func newLoadError(cause error, problems ...Problem) *LoadError {
	if len(problems) == 0 {
		msg := "unknown error"
		if cause != nil {
			msg = cause.Error()
		}
		problems = []Problem{{Message: msg}}
	}
	return &LoadError{File: problems[0].File, Line: problems[0].Line, Problems: problems, err: cause}
}

// fileError is a LoadError for a problem with a whole file (or none).
func fileError(file string, err error) *LoadError {
	return newLoadError(err, Problem{File: file, Message: err.Error()})
}

// astLoadError converts OPA's parse and compile errors, which carry locations, into a LoadError.
func astLoadError(err error) *LoadError {
	var le *LoadError
	if errors.As(err, &le) {
		return le
	}
	var errs ast.Errors
	if !errors.As(err, &errs) {
		var one *ast.Error
		if !errors.As(err, &one) {
			return newLoadError(err)
		}
		errs = ast.Errors{one}
	}
	problems := make([]Problem, 0, len(errs))
	for _, e := range errs {
		problems = append(problems, astProblem(e))
	}
	return newLoadError(err, problems...)
}

// astProblem converts one OPA error, details (such as the fields a type error wanted) included.
func astProblem(e *ast.Error) Problem {
	p := Problem{Message: e.Message}
	if e.Code != "" {
		p.Message = e.Code + ": " + e.Message
	}
	if e.Location != nil {
		p.File, p.Line, p.Column = e.Location.File, e.Location.Row, e.Location.Col
	}
	if e.Details != nil {
		for _, l := range e.Details.Lines() {
			if strings.TrimSpace(l) != "" {
				p.Message += "\n\t\t" + l
			}
		}
	}
	return p
}

// jsonProblem locates a JSON syntax error in data by its byte offset.
func jsonProblem(file string, data []byte, err error) Problem {
	p := Problem{File: file, Message: "invalid JSON: " + err.Error()}
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	offset := int64(-1)
	switch {
	case errors.As(err, &syn):
		offset = syn.Offset
	case errors.As(err, &typ):
		offset = typ.Offset
	}
	if offset >= 0 && offset <= int64(len(data)) {
		p.Line, p.Column = 1, 1
		for _, c := range data[:offset] {
			if c == '\n' {
				p.Line++
				p.Column = 1
			} else {
				p.Column++
			}
		}
	}
	return p
}

// testFailure describes one failing policy test for a LoadError.
func testFailure(r TestResult) Problem {
	return Problem{
		File:    r.File,
		Line:    r.Line,
		Message: fmt.Sprintf("policy test %s.%s failed: %s", r.Package, r.Name, r.Fail),
	}
}
