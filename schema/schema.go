// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

// Package schema holds fsbroker's JSON Schemas (Draft 2020-12) and the validator that checks
// documents against them.
//
// The schemas are embedded in the binary: one params schema per method, at
// <method>.json (files/read.json, roots/list.json, ping.json, ...), and config.json for the
// configuration file. Every schema carries an https://fsbroker.dev/schema/... $id and is added
// to the compiler as a resource; the compiler has no loader, so a $ref is never resolved from
// disk or the network. [New] compiles them once; a [Validator] is then safe for concurrent use.
//
// Schemas check types and shapes only. What a path may contain is the canonicalizer's rule, and
// sizes are quotas, so neither is an INVALID_PARAMS failure. Validation failures are reported as
// an [*Error] listing every violation as a JSON pointer and a short English message; messages
// never echo a long value, so file content sent in the wrong place never comes back.
package schema

import (
	"bytes"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
	"golang.org/x/text/language"
	"golang.org/x/text/message"
)

//go:embed *.json files/*.json roots/*.json
var embedded embed.FS

const (
	// idPrefix is the $id of an embedded schema minus its file name.
	idPrefix = "https://fsbroker.dev/schema/"
	// draft2020 is the $schema every embedded schema declares.
	draft2020 = "https://json-schema.org/draft/2020-12/schema"
	// configFile and PolicyInputFile are the embedded schemas that are not a
	// method's params schema.
	configFile = "config.json"
	// PolicyInputFile is the schema of the policy input document, the
	// contract policies are type-checked against (read it with Files).
	PolicyInputFile = "policy-input.json"
	// AuditRecordFile is the schema of an audit record line (read it with
	// Files); package audit validates against it.
	AuditRecordFile = "audit-record.json"

	subjectParams      = "params"
	subjectConfig      = "config"
	subjectPolicyInput = "policy input"

	// maxShown is the longest instance text (a value or a property name) quoted in a message or a
	// pointer; longer text is cut and marked with an ellipsis.
	maxShown = 64
	// maxMessage bounds one message, whatever a future error kind puts in it.
	maxMessage = 512
)

// ErrNoSchema is returned, wrapped, by [Validator.ValidateParams] for a method that has no params
// schema. Test for it with errors.Is.
var ErrNoSchema = errors.New("schema: no params schema for method")

// FieldError is one schema violation: where (JSON pointer into the params, "" for the whole object) and what.
type FieldError struct {
	// Pointer is an RFC 6901 JSON pointer to the offending value, or to the missing or unknown
	// property; "" means the document itself. A property name longer than 64 bytes is cut and
	// ends in "…".
	Pointer string `json:"pointer"`
	// Message says what is wrong, in English, without the offending value when it is long.
	Message string `json:"message"`
}

// Error is returned when a document fails its schema. It lists every violation, sorted by Pointer then Message, deduplicated.
type Error struct {
	// Errors holds the violations; a document that is not JSON at all has a single one with
	// Pointer "".
	Errors []FieldError

	subject string // "params" or "config"; "" reads as "params"
}

// Error implements error, for example
// "invalid params: /path: got number, want string; /x: unknown property".
func (e *Error) Error() string {
	subject := e.subject
	if subject == "" {
		subject = subjectParams
	}
	var b strings.Builder
	b.WriteString("invalid ")
	b.WriteString(subject)
	if len(e.Errors) == 0 {
		b.WriteString(": schema violation")
		return b.String()
	}
	for i, fe := range e.Errors {
		if i == 0 {
			b.WriteString(": ")
		} else {
			b.WriteString("; ")
		}
		if fe.Pointer != "" {
			b.WriteString(fe.Pointer)
			b.WriteString(": ")
		}
		b.WriteString(fe.Message)
	}
	return b.String()
}

// Validator checks documents against the compiled embedded schemas. Create it with [New]; it is
// immutable afterwards and safe for concurrent use.
type Validator struct {
	params      map[string]*jsonschema.Schema // by method name
	methods     []string                      // sorted keys of params
	config      *jsonschema.Schema
	policyInput *jsonschema.Schema
	printer     *message.Printer // English; read-only, safe to share
}

// New compiles every embedded schema. It fails only when an embedded schema is broken, which is
// a programming error: call it once at start-up and share the result.
func New() (*Validator, error) {
	names, err := schemaFiles()
	if err != nil {
		return nil, err
	}

	c := newCompiler()
	for _, name := range names {
		data, err := fs.ReadFile(embedded, name)
		if err != nil {
			return nil, fmt.Errorf("schema: read embedded %s: %w", name, err)
		}
		doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(data))
		if err != nil {
			return nil, fmt.Errorf("schema: parse embedded %s: %w", name, err)
		}
		obj, ok := doc.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("schema: embedded %s: not a JSON object", name)
		}
		if got := obj["$schema"]; got != draft2020 {
			return nil, fmt.Errorf("schema: embedded %s: $schema is %v, want %s", name, got, draft2020)
		}
		if got, want := obj["$id"], idPrefix+name; got != want {
			return nil, fmt.Errorf("schema: embedded %s: $id is %v, want %s", name, got, want)
		}
		if err := c.AddResource(idPrefix+name, doc); err != nil {
			return nil, fmt.Errorf("schema: add embedded %s: %w", name, err)
		}
	}

	v := &Validator{
		params:  make(map[string]*jsonschema.Schema, len(names)),
		printer: message.NewPrinter(language.English),
	}
	for _, name := range names {
		sch, err := c.Compile(idPrefix + name)
		if err != nil {
			return nil, fmt.Errorf("schema: compile embedded %s: %w", name, err)
		}
		switch name {
		case configFile:
			v.config = sch
			continue
		case PolicyInputFile:
			v.policyInput = sch
			continue
		case AuditRecordFile:
			continue // compiled here only to check it; package audit validates records
		}
		method := strings.TrimSuffix(name, ".json")
		v.params[method] = sch
		v.methods = append(v.methods, method)
	}
	if v.config == nil || v.policyInput == nil {
		return nil, fmt.Errorf("schema: embedded %s or %s is missing", configFile, PolicyInputFile)
	}
	slices.Sort(v.methods)
	return v, nil
}

// newCompiler returns a Draft 2020-12 compiler without any loader: every schema must be added as
// a resource, and a $ref to anything else fails to compile instead of being fetched from disk or
// the network. The 2020-12 meta-schema comes from the library's embedded copy.
func newCompiler() *jsonschema.Compiler {
	c := jsonschema.NewCompiler()
	c.UseLoader(nil)
	c.DefaultDraft(jsonschema.Draft2020)
	return c
}

// schemaFiles lists the embedded schema files, slash-separated and relative to this directory.
func schemaFiles() ([]string, error) {
	var names []string
	err := fs.WalkDir(embedded, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && path.Ext(p) == ".json" {
			names = append(names, p)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("schema: list embedded schemas: %w", err)
	}
	return names, nil
}

// Methods returns the sorted names of the methods that have a params schema, such as
// "files/read" and "roots/list". The caller owns the returned slice.
func (v *Validator) Methods() []string {
	return slices.Clone(v.methods)
}

// ValidateParams checks a request's params against schema/<method>.json. Absent params (empty,
// or JSON null) are validated as {}. It returns nil, an [*Error] (params that are not valid JSON
// included), or an error wrapping [ErrNoSchema] for a method without a schema. Method aliases
// such as fs.read are not known here: pass the canonical files/* name.
func (v *Validator) ValidateParams(method string, params json.RawMessage) error {
	sch, ok := v.params[method]
	if !ok {
		return noSchema(method)
	}
	return v.validate(sch, params, subjectParams)
}

// noSchema wraps ErrNoSchema with the method's name, cut to 64 characters.
func noSchema(method string) error {
	return fmt.Errorf("%w %.64q", ErrNoSchema, method)
}

// ValidatePolicyInput checks a policy input document against
// policy-input.json. It returns nil or an [*Error].
func (v *Validator) ValidatePolicyInput(doc json.RawMessage) error {
	return v.validate(v.policyInput, doc, subjectPolicyInput)
}

// ValidateConfig checks a configuration document, already converted from YAML to JSON, against
// config.json. An absent document (empty, or JSON null, as an empty YAML file converts to) is
// validated as {}. It returns nil or an [*Error].
func (v *Validator) ValidateConfig(doc json.RawMessage) error {
	return v.validate(v.config, doc, subjectConfig)
}

// Files returns a read-only view of the embedded schema files (config.json, ping.json,
// files/read.json, ...), for example to publish them.
func Files() fs.FS {
	return embedded
}

// validate decodes doc and checks it against sch.
func (v *Validator) validate(sch *jsonschema.Schema, doc json.RawMessage, subject string) error {
	inst, err := decode(doc)
	if err != nil {
		verb := " is"
		if subject == subjectParams {
			verb = " are"
		}
		return &Error{
			Errors:  []FieldError{{Pointer: "", Message: subject + verb + " not valid JSON (" + err.Error() + ")"}},
			subject: subject,
		}
	}
	err = sch.Validate(inst)
	if err == nil {
		return nil
	}
	var verr *jsonschema.ValidationError
	if !errors.As(err, &verr) {
		// Validate returns nothing else today; never let an unexpected error text through.
		return &Error{Errors: []FieldError{{Message: "validation failed"}}, subject: subject}
	}
	return &Error{Errors: v.fieldErrors(verr), subject: subject}
}

// decode parses doc with json.Number semantics; absent documents decode as {}. The returned
// error text never contains document content.
func decode(doc json.RawMessage) (any, error) {
	if trimmed := trimSpace(doc); len(trimmed) == 0 || string(trimmed) == "null" {
		return map[string]any{}, nil
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(doc))
	if err == nil {
		return inst, nil
	}
	var syntax *json.SyntaxError
	switch {
	case errors.As(err, &syntax):
		return nil, errors.New("syntax error at byte offset " + strconv.FormatInt(syntax.Offset, 10))
	case errors.Is(err, io.ErrUnexpectedEOF):
		return nil, errors.New("unexpected end of input")
	default:
		// The only other failure is data after the top-level value.
		return nil, errors.New("data after the top-level value")
	}
}

// isSpace reports JSON insignificant whitespace.
func isSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\r'
}

// leadingSpace counts the JSON whitespace bytes at the start of b.
func leadingSpace(b []byte) int {
	n := 0
	for n < len(b) && isSpace(b[n]) {
		n++
	}
	return n
}

// trimSpace removes JSON whitespace around b.
func trimSpace(b []byte) []byte {
	b = b[leadingSpace(b):]
	for len(b) > 0 && isSpace(b[len(b)-1]) {
		b = b[:len(b)-1]
	}
	return b
}

// fieldErrors flattens the cause tree of verr into sorted, deduplicated field errors.
func (v *Validator) fieldErrors(verr *jsonschema.ValidationError) []FieldError {
	var out []FieldError
	out = v.collect(out, verr)
	slices.SortFunc(out, func(a, b FieldError) int {
		if c := strings.Compare(a.Pointer, b.Pointer); c != 0 {
			return c
		}
		return strings.Compare(a.Message, b.Message)
	})
	return slices.Compact(out)
}

// collect appends the field errors of the leaves under e.
func (v *Validator) collect(out []FieldError, e *jsonschema.ValidationError) []FieldError {
	if len(e.Causes) > 0 {
		for _, c := range e.Causes {
			out = v.collect(out, c)
		}
		return out
	}
	at := pointer(e.InstanceLocation)
	switch k := e.ErrorKind.(type) {
	case *kind.Required:
		for _, name := range k.Missing {
			out = append(out, FieldError{Pointer: at + "/" + token(name), Message: "required property is missing"})
		}
	case *kind.AdditionalProperties:
		for _, name := range k.Properties {
			out = append(out, FieldError{Pointer: at + "/" + token(name), Message: "unknown property"})
		}
	default:
		out = append(out, FieldError{Pointer: at, Message: v.message(e.ErrorKind)})
	}
	return out
}

// message renders k in English, cutting any instance text it would quote.
func (v *Validator) message(k jsonschema.ErrorKind) string {
	switch k := k.(type) {
	case *kind.Not:
		return "value is not allowed"
	case *kind.Pattern:
		k = &kind.Pattern{Got: shorten(k.Got), Want: k.Want}
		return limit(k.LocalizedString(v.printer))
	case *kind.PropertyNames:
		k = &kind.PropertyNames{Property: shorten(k.Property)}
		return limit(k.LocalizedString(v.printer))
	case *kind.Format:
		got := k.Got
		switch g := got.(type) {
		case string:
			got = shorten(g)
		case json.Number:
			got = json.Number(shorten(string(g)))
		}
		k = &kind.Format{Got: got, Want: k.Want, Err: k.Err}
		return limit(k.LocalizedString(v.printer))
	}
	return limit(k.LocalizedString(v.printer))
}

// pointer renders instance-location tokens as an RFC 6901 JSON pointer.
func pointer(tokens []string) string {
	if len(tokens) == 0 {
		return ""
	}
	var b strings.Builder
	for _, t := range tokens {
		b.WriteByte('/')
		b.WriteString(token(t))
	}
	return b.String()
}

// token escapes one pointer token (~ as ~0, / as ~1) after cutting it to maxShown bytes.
func token(t string) string {
	t = shorten(t)
	if !strings.ContainsAny(t, "~/") {
		return t
	}
	return strings.ReplaceAll(strings.ReplaceAll(t, "~", "~0"), "/", "~1")
}

// shorten cuts s to at most maxShown bytes on a rune boundary, marking the cut with "…".
func shorten(s string) string {
	return cut(s, maxShown)
}

// limit cuts a whole message to maxMessage bytes.
func limit(s string) string {
	return cut(s, maxMessage)
}

// cut returns s, or its longest prefix of at most n bytes that ends on a rune boundary followed
// by "…".
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	i := n
	for i > 0 && !utf8.RuneStart(s[i]) {
		i--
	}
	return s[:i] + "…"
}
