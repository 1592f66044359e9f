// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package conformance

import (
	"bytes"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"sigs.k8s.io/yaml"
)

//go:embed cases case.schema.json
var embedded embed.FS

// SchemaFile is the name of the case format's JSON Schema inside [Files].
const SchemaFile = "case.schema.json"

// schemaID is the $id of case.schema.json.
const schemaID = "https://fsbroker.dev/schema/conformance-case.json"

// KnownFailureTag marks a case that the reference broker is known to fail. [Select] leaves
// such cases out unless the tag is asked for explicitly.
const KnownFailureTag = "known-failure"

// Files returns the embedded suite: the cases under "cases/" and the schema at [SchemaFile].
func Files() fs.FS { return embedded }

// Case is one conformance vector: a fixture, a broker configuration, steps and the expected
// tree afterwards. Its fields mirror case.schema.json.
type Case struct {
	// Name identifies the case; it equals the file's base name without extension.
	Name string `json:"name"`
	// Description says what the case proves.
	Description string `json:"description"`
	// Tags name the docs/protocol.md sections checked ("s2-lifecycle", "s5-read", ...).
	Tags []string `json:"tags"`
	// Requires lists conditions without which the case is skipped: "non-root" (the runner's
	// user is not root), "linux".
	Requires []string `json:"requires,omitempty"`
	// Fixture is the tree created in the case's area before the broker starts.
	Fixture []Entry `json:"fixture,omitempty"`
	// Roots are the broker's roots, directories of the fixture.
	Roots []Root `json:"roots"`
	// Consent is the broker's consent mode: "auto" (the default), "deny", or "command:PROG ARGS"
	// (docs/protocol.md section 7; ${area} may appear in it).
	Consent string `json:"consent,omitempty"`
	// Preapproved says whether the roots are pre-approved by the operator (PROTOCOL.md section
	// 5): the runner then gives the broker a config file that lists them with consent
	// preapproved, in place of --root flags. Unset, it is true when Consent is auto or unset
	// (the runner's default: what a case may use at once, without a files/consent round), false
	// otherwise. Cases about what consent means set it to false.
	Preapproved *bool `json:"preapproved,omitempty"`
	// Flags are extra broker arguments, after the roots, state directory and consent.
	Flags []string `json:"flags,omitempty"`
	// Initialize says how the runner answers the broker's initialize request.
	Initialize *Initialize `json:"initialize,omitempty"`
	// Host, when set, makes the runner the host of a filesystem MCP server (the serve section,
	// docs/protocol.md section 8): it sends initialize as this says. See [Host].
	Host *Host `json:"host,omitempty"`
	// Steps run in order; the first failing step ends the case.
	Steps []Step `json:"steps"`
	// After is the state the tree must be in once the steps ran.
	After *After `json:"after,omitempty"`
	// Timeout bounds the whole case (a Go duration); default 60s.
	Timeout string `json:"timeout,omitempty"`

	// File is where the case was loaded from.
	File string `json:"-"`
}

// Entry is a path in a fixture, a disk change or an after check. Paths are relative to the
// case's area, with "/" separators.
type Entry struct {
	// Path is relative to the area.
	Path string `json:"path"`
	// Type is "file" (the default, or "symlink" when Target is set), "dir", "symlink", "fifo",
	// or "hardlink" (fixture only: a hard link to the file at Target, relative to the area).
	Type string `json:"type,omitempty"`
	// Content is a file's text.
	Content *string `json:"content,omitempty"`
	// ContentBase64 is a file's bytes, base64-encoded.
	ContentBase64 *string `json:"contentBase64,omitempty"`
	// Size makes a file of that many bytes of the fill pattern (see docs/conformance.md).
	Size *int64 `json:"size,omitempty"`
	// Target is a symbolic link's target, written as given (after ${...} substitution), or
	// the area-relative path of the file a hard link links to.
	Target *string `json:"target,omitempty"`
	// Mode is the permission bits in octal ("0600").
	Mode string `json:"mode,omitempty"`
	// Absent, in an after check, means nothing may exist at Path.
	Absent bool `json:"absent,omitempty"`
}

// Root is one broker root.
type Root struct {
	// Path is the root's directory, relative to the area.
	Path string `json:"path"`
	// Writable passes the root as DIR:rw.
	Writable bool `json:"writable,omitempty"`
	// Mount, when it differs from the directory's base name, is given by passing a symbolic
	// link named Mount (outside the area) that points at the directory.
	Mount string `json:"mount,omitempty"`
}

// Initialize is the runner's side of the initialize exchange.
type Initialize struct {
	// Manual leaves the exchange to the steps (awaitInitialize, answerInitialize).
	Manual bool `json:"manual,omitempty"`
	// Expect is matched against the params of the broker's initialize request.
	Expect any `json:"expect,omitempty"`
	// ProtocolVersion is the version the runner answers with; default "2025-11-25".
	ProtocolVersion string `json:"protocolVersion,omitempty"`
	// Result, when set, is sent as the whole initialize result instead.
	Result any `json:"result,omitempty"`
	// Error, when set, is sent as an error reply instead of a result.
	Error any `json:"error,omitempty"`
	// Initialized says whether notifications/initialized must follow; default true for a
	// result, false for an error.
	Initialized *bool `json:"initialized,omitempty"`
}

// Step is one action of a case. Exactly one of the action fields is set.
type Step struct {
	// Name captures what the step received (a reply, a notification, a request), to be
	// referenced later as ${name.result.etag}. Default "s<index>" (from 1).
	Name string `json:"name,omitempty"`
	// Comment is free text.
	Comment string `json:"comment,omitempty"`

	// Request sends a JSON-RPC request and, unless Async, waits for its reply (Expect).
	Request *Request `json:"request,omitempty"`
	// Raw sends one line verbatim; with Expect it waits for a reply.
	Raw *Raw `json:"raw,omitempty"`
	// Notify sends a notification.
	Notify *Notify `json:"notify,omitempty"`
	// Reply waits for the reply to an earlier Async request (by step name).
	Reply string `json:"reply,omitempty"`
	// Expect is the reply a Request, Raw or Reply step must get.
	Expect *Expect `json:"expect,omitempty"`

	// ExpectNotification waits for a notification from the broker.
	ExpectNotification *NotificationExpect `json:"expectNotification,omitempty"`
	// ExpectNoNotification checks that no matching notification comes within a time.
	ExpectNoNotification *NotificationExpect `json:"expectNoNotification,omitempty"`
	// ExpectNoReply checks that no reply with an id comes within a time (a message that must
	// not be answered).
	ExpectNoReply *NoReplyExpect `json:"expectNoReply,omitempty"`
	// ExpectRequest waits for a request from the broker (ping is answered automatically).
	ExpectRequest *RequestExpect `json:"expectRequest,omitempty"`
	// ExpectExit waits for the broker to exit.
	ExpectExit *ExitExpect `json:"expectExit,omitempty"`
	// ExpectStderr waits for the broker's stderr to match a regular expression.
	ExpectStderr *StderrExpect `json:"expectStderr,omitempty"`
	// Signal sends the broker process "TERM" or "INT".
	Signal string `json:"signal,omitempty"`
	// CloseInput closes the broker's stdin (end of the session from the server's side).
	CloseInput bool `json:"closeInput,omitempty"`
	// Disk changes the tree behind the broker's back.
	Disk *DiskChange `json:"disk,omitempty"`
	// Sleep pauses (a Go duration).
	Sleep string `json:"sleep,omitempty"`
	// AwaitInitialize waits for the broker's initialize request (manual handshake).
	AwaitInitialize *AwaitInitialize `json:"awaitInitialize,omitempty"`
	// AnswerInitialize answers it (manual handshake).
	AnswerInitialize *Initialize `json:"answerInitialize,omitempty"`
	// Run runs a command beside the broker (a tool of the runner, such as {grants-revoke}).
	Run *RunStep `json:"run,omitempty"`
	// Restart ends the broker (end of input, as at the end of a case) and starts it again on
	// the same area and state directory, with the handshake.
	Restart *Restart `json:"restart,omitempty"`
}

// Request is a JSON-RPC request the runner sends.
type Request struct {
	// Method is the method name.
	Method string `json:"method"`
	// Params are sent as given (after substitution); absent means no params member.
	Params any `json:"params,omitempty"`
	// ID is the request id; default a number counting from 1.
	ID any `json:"id,omitempty"`
	// Async sends without waiting; a later Reply step waits for the answer.
	Async bool `json:"async,omitempty"`
	// RetryFor (a Go duration) sends the request again, with a new id each time (unless ID is
	// given), until a reply matches Expect or this long has passed since the first was sent
	// ("takes effect within 1 second"); the last reply is the one reported. Not with Async.
	RetryFor string `json:"retryFor,omitempty"`
}

// RunStep runs a command beside the broker and waits for it to end.
type RunStep struct {
	// Argv is the command. Its first element names a tool of the runner in braces
	// ("{grants-revoke}") and stands for that tool's command template ([Runner.Tools]); the
	// others are arguments, ${...} references expanded. A case whose tool the runner lacks is
	// skipped.
	Argv []string `json:"argv"`
	// ExpectExit is a matcher on the exit status; default 0 (`{$any: true}` accepts any).
	ExpectExit any `json:"expectExit,omitempty"`
	// Within bounds the run (a Go duration); default 10s.
	Within string `json:"within,omitempty"`
}

// Restart is a broker restart in the middle of a case.
type Restart struct {
	// Consent is the new broker's consent mode; default the case's.
	Consent string `json:"consent,omitempty"`
	// Preapproved is the new broker's pre-approval of the roots; default the case's setting,
	// else the runner's default for the new consent mode (Case.Preapproved).
	Preapproved *bool `json:"preapproved,omitempty"`
	// Flags, when given ([] included), replace the case's flags for the new broker.
	Flags []string `json:"flags,omitempty"`
	// Within bounds the old broker's exit after its stdin closes; default the runner's grace.
	Within string `json:"within,omitempty"`
}

// Raw is a line sent verbatim (a newline is added).
type Raw struct {
	// Text is the line.
	Text *string `json:"text,omitempty"`
	// Base64 is the line's bytes, base64-encoded (for invalid UTF-8).
	Base64 *string `json:"base64,omitempty"`
	// Prefix, Fill and Suffix build a long line: Prefix, Fill bytes of "a", Suffix.
	Prefix string `json:"prefix,omitempty"`
	// Fill is the number of "a" bytes between Prefix and Suffix.
	Fill int `json:"fill,omitempty"`
	// Suffix ends a built line.
	Suffix string `json:"suffix,omitempty"`
}

// Notify is a notification the runner sends.
type Notify struct {
	// Method is the notification's method.
	Method string `json:"method"`
	// Params are sent as given.
	Params any `json:"params,omitempty"`
}

// Expect is the reply a step must get.
type Expect struct {
	// ID is the reply's expected id; default the request's id (a Raw step must set it,
	// null included, to wait for a reply).
	ID any `json:"id,omitempty"`
	// Result is matched against the reply's result; its presence requires a success.
	Result any `json:"result,omitempty"`
	// Error is matched against the reply's error; its presence requires an error.
	Error any `json:"error,omitempty"`
	// Fail is a shorthand for an error with data.code = Fail and the code of docs/protocol.md's
	// table ("FILE_NOT_FOUND" means code -32001 and data.code "FILE_NOT_FOUND").
	Fail string `json:"fail,omitempty"`
	// Any accepts any reply, success or error.
	Any bool `json:"any,omitempty"`
	// Reply is matched against the whole reply message, for a case that accepts a result or an
	// error ({$anyOf: [{error: ...}, {result: ...}]}).
	Reply any `json:"reply,omitempty"`
	// Within bounds the wait (a Go duration); default 10s.
	Within string `json:"within,omitempty"`

	hasID bool // ID was given, null included
}

// UnmarshalJSON notes whether id was present, since "id": null is an expectation too.
func (e *Expect) UnmarshalJSON(b []byte) error {
	type plain Expect
	var p plain
	if err := json.Unmarshal(b, &p); err != nil {
		return err
	}
	var keys map[string]json.RawMessage
	if err := json.Unmarshal(b, &keys); err != nil {
		return err
	}
	*e = Expect(p)
	_, e.hasID = keys["id"]
	return nil
}

// NotificationExpect matches a notification from the broker.
type NotificationExpect struct {
	// Method is the notification's method.
	Method string `json:"method"`
	// Params is matched against its params.
	Params any `json:"params,omitempty"`
	// Within bounds the wait; default 5s for expectNotification and 1s for
	// expectNoNotification (which waits that long).
	Within string `json:"within,omitempty"`
	// AtMost, for expectNoNotification, tolerates up to this many matching notifications
	// (default 0); they are consumed.
	AtMost int `json:"atMost,omitempty"`
}

// NoReplyExpect says no reply with ID may come.
type NoReplyExpect struct {
	// ID is the id no reply may carry (null included).
	ID any `json:"id"`
	// Within is how long to wait; default 1s.
	Within string `json:"within,omitempty"`
}

// RequestExpect matches a request from the broker and answers it.
type RequestExpect struct {
	// Method is the request's method.
	Method string `json:"method"`
	// Params is matched against its params.
	Params any `json:"params,omitempty"`
	// Result is sent back (ping is answered with {} when the request arrives, whatever this says).
	Result any `json:"result,omitempty"`
	// Within bounds the wait; default 10s.
	Within string `json:"within,omitempty"`
}

// AwaitInitialize waits for the broker's initialize request.
type AwaitInitialize struct {
	// Expect is matched against its params.
	Expect any `json:"expect,omitempty"`
	// Within bounds the wait; default 10s.
	Within string `json:"within,omitempty"`
}

// ExitExpect waits for the broker process to end.
type ExitExpect struct {
	// Code is the exit status required; any status when absent.
	Code *int `json:"code,omitempty"`
	// Within bounds the wait; default 10s.
	Within string `json:"within,omitempty"`
}

// StderrExpect waits for the broker's log to match.
type StderrExpect struct {
	// Regex is a Go regular expression matched against everything written to stderr so far.
	Regex string `json:"regex"`
	// Within bounds the wait; default 5s.
	Within string `json:"within,omitempty"`
}

// DiskChange is a change the runner makes to the tree while the broker runs.
type DiskChange struct {
	// Op is write, append, mkdir, remove, removeAll, rename, symlink, fifo or chmod.
	Op string `json:"op"`
	// Path is the path changed, relative to the area.
	Path string `json:"path"`
	// To is the new path of a rename.
	To string `json:"to,omitempty"`
	// Content is the text written or appended.
	Content string `json:"content,omitempty"`
	// Target is a symbolic link's target.
	Target string `json:"target,omitempty"`
	// Mode is chmod's octal mode.
	Mode string `json:"mode,omitempty"`
}

// After is the expected state of the tree once the steps ran.
type After struct {
	// Files are checked one by one: type, content, size, target, mode, or absence.
	Files []Entry `json:"files,omitempty"`
	// Exactly maps a directory (relative to the area) to every path beneath it, recursively,
	// relative to it; nothing else may be there.
	Exactly map[string][]string `json:"exactly,omitempty"`
	// OutsideUnchanged checks that nothing in the area outside the roots changed, other than
	// by disk steps; default true.
	OutsideUnchanged *bool `json:"outsideUnchanged,omitempty"`
}

// failCodes maps docs/protocol.md section 4's data.code to the JSON-RPC error code.
var failCodes = map[string]int{
	"FILE_NOT_FOUND":       -32001,
	"PERMISSION_DENIED":    -32002,
	"INVALID_PATH":         -32003,
	"IO_ERROR":             -32004,
	"TIMEOUT":              -32005,
	"CONCURRENCY_CONFLICT": -32006,
	"QUOTA_EXCEEDED":       -32007,
	"INVALID_PARAMS":       -32602,
	"NOT_INITIALIZED":      -32600,
}

var (
	compileOnce sync.Once
	caseSchema  *jsonschema.Schema
	compileErr  error
)

// schema compiles the embedded case schema once.
func schema() (*jsonschema.Schema, error) {
	compileOnce.Do(func() {
		data, err := embedded.ReadFile(SchemaFile)
		if err != nil {
			compileErr = err
			return
		}
		doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(data))
		if err != nil {
			compileErr = fmt.Errorf("conformance: parse %s: %w", SchemaFile, err)
			return
		}
		c := jsonschema.NewCompiler()
		c.DefaultDraft(jsonschema.Draft2020)
		if err := c.AddResource(schemaID, doc); err != nil {
			compileErr = err
			return
		}
		caseSchema, compileErr = c.Compile(schemaID)
	})
	return caseSchema, compileErr
}

// ParseCase decodes one case file (YAML or JSON), validates it against the case schema and
// checks what the schema cannot (the name matches the file name, one action per step, valid
// durations and patterns). file is used for the name check and in errors.
func ParseCase(file string, data []byte) (*Case, error) {
	js, err := yaml.YAMLToJSON(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	sch, err := schema()
	if err != nil {
		return nil, err
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(js))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	if err := sch.Validate(inst); err != nil {
		return nil, fmt.Errorf("%s: does not follow %s: %v", file, SchemaFile, err)
	}
	dec := json.NewDecoder(bytes.NewReader(js))
	dec.UseNumber()
	dec.DisallowUnknownFields()
	var c Case
	if err := dec.Decode(&c); err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	c.File = file
	if err := c.check(); err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	return &c, nil
}

// check enforces what the schema does not.
func (c *Case) check() error {
	base := path.Base(c.File)
	if want := strings.TrimSuffix(base, path.Ext(base)); c.Name != want {
		return fmt.Errorf("name %q differs from the file name %q", c.Name, want)
	}
	if c.Timeout != "" {
		if _, err := time.ParseDuration(c.Timeout); err != nil {
			return fmt.Errorf("timeout: %w", err)
		}
	}
	names := map[string]bool{}
	for i := range c.Steps {
		s := &c.Steps[i]
		n := 0
		for _, set := range []bool{s.Request != nil, s.Raw != nil, s.Notify != nil, s.Reply != "",
			s.ExpectNotification != nil, s.ExpectNoNotification != nil, s.ExpectNoReply != nil, s.ExpectRequest != nil,
			s.ExpectExit != nil, s.ExpectStderr != nil, s.Signal != "", s.CloseInput, s.Disk != nil, s.Sleep != "",
			s.AwaitInitialize != nil, s.AnswerInitialize != nil, s.Run != nil, s.Restart != nil} {
			if set {
				n++
			}
		}
		if n != 1 {
			return fmt.Errorf("step %d: %d actions, want exactly one", i+1, n)
		}
		if s.Expect != nil && s.Request == nil && s.Raw == nil && s.Reply == "" {
			return fmt.Errorf("step %d: expect belongs to a request, raw or reply step", i+1)
		}
		if s.Name == "" {
			s.Name = fmt.Sprintf("s%d", i+1)
		}
		if names[s.Name] {
			return fmt.Errorf("step %d: name %q used twice", i+1, s.Name)
		}
		names[s.Name] = true
		if s.Reply != "" && !names[s.Reply] {
			return fmt.Errorf("step %d: reply to %q, which is not an earlier step", i+1, s.Reply)
		}
		if s.Request != nil && s.Request.RetryFor != "" && s.Request.Async {
			return fmt.Errorf("step %d: retryFor waits for each reply: not with async", i+1)
		}
		if s.Run != nil {
			if _, ok := toolName(s.Run.Argv[0]); !ok {
				return fmt.Errorf("step %d: run: argv[0] %q: want a tool of the runner in braces, such as {grants-revoke}", i+1, s.Run.Argv[0])
			}
		}
		var retry string
		if s.Request != nil {
			retry = s.Request.RetryFor
		}
		for _, d := range []string{s.Sleep, durationOf(s), retry} {
			if d != "" {
				if _, err := time.ParseDuration(d); err != nil {
					return fmt.Errorf("step %d: %w", i+1, err)
				}
			}
		}
	}
	if c.Initialize != nil && c.Initialize.Manual && (c.Initialize.Result != nil || c.Initialize.Error != nil || c.Initialize.ProtocolVersion != "") {
		return errors.New("initialize: manual excludes an answer (use answerInitialize)")
	}
	if err := c.checkHost(); err != nil {
		return err
	}
	seen := map[string]bool{} // explicit mounts are links in one directory
	for _, r := range c.Roots {
		if r.Mount != "" && seen[r.Mount] {
			return fmt.Errorf("roots: mount %q twice", r.Mount)
		}
		seen[r.Mount] = true
	}
	return nil
}

// durationOf returns the within of a step's wait, if any.
func durationOf(s *Step) string {
	switch {
	case s.Expect != nil:
		return s.Expect.Within
	case s.ExpectNotification != nil:
		return s.ExpectNotification.Within
	case s.ExpectNoNotification != nil:
		return s.ExpectNoNotification.Within
	case s.ExpectNoReply != nil:
		return s.ExpectNoReply.Within
	case s.ExpectRequest != nil:
		return s.ExpectRequest.Within
	case s.ExpectExit != nil:
		return s.ExpectExit.Within
	case s.ExpectStderr != nil:
		return s.ExpectStderr.Within
	case s.AwaitInitialize != nil:
		return s.AwaitInitialize.Within
	case s.Run != nil:
		return s.Run.Within
	case s.Restart != nil:
		return s.Restart.Within
	}
	return ""
}

// toolName returns NAME for an argument "{NAME}" naming a tool.
func toolName(arg string) (string, bool) {
	if len(arg) < 3 || arg[0] != '{' || arg[len(arg)-1] != '}' {
		return "", false
	}
	name := arg[1 : len(arg)-1]
	for i, r := range name {
		if !(r >= 'a' && r <= 'z' || i > 0 && (r == '-' || r >= '0' && r <= '9')) {
			return "", false
		}
	}
	return name, true
}

// Tools returns the names of the tools the case's run steps use, in order of first use.
func (c *Case) Tools() []string {
	var out []string
	for i := range c.Steps {
		if r := c.Steps[i].Run; r != nil && len(r.Argv) > 0 {
			if n, ok := toolName(r.Argv[0]); ok && !slices.Contains(out, n) {
				out = append(out, n)
			}
		}
	}
	return out
}

// LoadCases reads every *.yaml, *.yml and *.json case under dir in fsys (SchemaFile excepted),
// sorted by name. Names must be unique.
func LoadCases(fsys fs.FS, dir string) ([]*Case, error) {
	var cases []*Case
	var errs []error
	byName := map[string]string{}
	err := fs.WalkDir(fsys, dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		switch ext := path.Ext(p); {
		case d.IsDir(), path.Base(p) == SchemaFile:
			return nil
		case ext != ".yaml" && ext != ".yml" && ext != ".json":
			return nil
		}
		data, err := fs.ReadFile(fsys, p)
		if err != nil {
			return err
		}
		c, err := ParseCase(p, data)
		if err != nil {
			errs = append(errs, err)
			return nil
		}
		if other, dup := byName[c.Name]; dup {
			errs = append(errs, fmt.Errorf("%s: name %q already used by %s", p, c.Name, other))
			return nil
		}
		byName[c.Name] = p
		cases = append(cases, c)
		return nil
	})
	if err != nil {
		return nil, err
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	slices.SortFunc(cases, func(a, b *Case) int { return strings.Compare(a.Name, b.Name) })
	return cases, nil
}

// Suite loads the embedded cases that play the MCP server against a broker ([ServeSuite] loads
// the serve section's).
func Suite() ([]*Case, error) {
	cases, err := LoadCases(embedded, "cases")
	return BySection(cases, false), err
}

// Select returns the cases whose name matches one of the comma-separated globs of run (all when
// run is empty) and that carry one of tags (all when tags is empty). Cases tagged
// [KnownFailureTag] are left out unless that tag is among tags.
func Select(cases []*Case, run string, tags []string) ([]*Case, error) {
	var globs []string
	for g := range strings.SplitSeq(run, ",") {
		if g = strings.TrimSpace(g); g != "" {
			if _, err := path.Match(g, ""); err != nil {
				return nil, fmt.Errorf("bad pattern %q: %w", g, err)
			}
			globs = append(globs, g)
		}
	}
	var out []*Case
	for _, c := range cases {
		if len(globs) > 0 && !slices.ContainsFunc(globs, func(g string) bool { ok, _ := path.Match(g, c.Name); return ok }) {
			continue
		}
		if len(tags) > 0 && !slices.ContainsFunc(c.Tags, func(t string) bool { return slices.Contains(tags, t) }) {
			continue
		}
		if slices.Contains(c.Tags, KnownFailureTag) && !slices.Contains(tags, KnownFailureTag) {
			continue
		}
		out = append(out, c)
	}
	return out, nil
}
