// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/fsbroker/fsbroker/audit"
	"github.com/fsbroker/fsbroker/schema"
)

// auditKeyEnv holds the audit key as 64 hex digits, for verify and hash.
const auditKeyEnv = "FSBROKER_AUDIT_KEY"

// followInterval is how often tail -f looks for new records.
const followInterval = 200 * time.Millisecond

const auditLong = `Check and read the audit trail. PATH is a segment file or a directory of them;
default: --audit PATH if given, else the audit.dir of the --config FILE, else
<state-dir>/audit. The state directory (where the audit key is) is --state-dir,
else the stateDir of the --config FILE, else the default: the broker resolves
them the same way, so --config FILE alone finds the trail of a broker started
with that file. See docs/audit.md.`

const auditExample = `  # Is the trail intact?
  fsbroker audit verify

  # What was refused in the last day, and the trail of a broker started with a config file
  fsbroker audit query --decision deny --since 24h
  fsbroker audit tail --config /etc/fsbroker/fsbroker.yaml -n 20 -f`

const auditVerifyHelp = `Check every MAC, link and checkpoint of the trail and report its first bad
record: the file, line, seq and kind of problem (edited, removed, reordered,
inserted, truncated, checkpoint, unknown_key), or a torn tail: the last line of
a segment left unfinished by a broker that crashed or was killed, which is not
tampering (every record before it verifies).

The audit key is --key FILE, else $FSBROKER_AUDIT_KEY (64 hex digits), else
<state-dir>/audit.key (--state-dir, else the stateDir of --config FILE). Give
keys used before a rotation with --old-key.

The checkpoint public key defaults to the checkpoint.pub beside the trail; it is
only as trustworthy as the log directory, so give a trusted copy with
--checkpoint-pub.

The trail cannot prove its own end: a broker's newest segment deleted with its
checkpoint file, or cut short, looks like a quiet broker. With --witness FILE
(repeatable), verify also checks the trail against the witness lines a broker
started with --audit-witness sent ("fsbroker-witness v1 ..."): FILE is a copy
of /var/log/syslog, the output of "journalctl -o cat -t fsbroker", or a witness
file; other lines are skipped. Every segment the witness saw must still hold the
last record the witness saw, with the same chain hash, or have been deleted by
retention; else verify names the segment, the broker process that wrote it, the
last record the witness saw and how many records are missing at least. Forged
witness lines (their signature does not verify) are refused and named, never
used; lines of other trails are counted and ignored.

Exit status: 0 intact; 1 a problem was found (tampering, or a torn tail: the
message says which), or there are no segments; 2 the check could not run (no
key, unreadable trail or witness file, bad flags).
`

const auditQueryHelp = `Print the records that match every filter given, in time order, across all the
segments of the trail. Segment headers and checkpoint records are left out
unless --kind names them.

Query reads the trail; it does not verify it and needs no key. A trail anyone
could have edited reads just the same: run "fsbroker audit verify" to know the
records are the broker's.

Exit status: 0 ok; 1 some lines are not records (named on stderr); 2 bad flags
or no trail at PATH.
`

const auditTailHelp = `Print the last N records of the trail (those matching the filters, if any); with
-f (--follow), keep printing new records as the broker appends them, new segments
included, until interrupted. Like query, tail reads and does not verify.

Exit status: 0 ok (and on SIGINT/SIGTERM with -f); 1 some lines are not
records; 2 bad flags or no trail at PATH.
`

const auditExportHelp = `Write the decisions of the trail (those matching the filters) to stdout as OPA
decision-log events (the JSON of OPA's decision_logs plugin, EventV1 as of OPA
v1.22.2), one a line, for a SIEM or decision-log service built for OPA. The
operation's outcome, when the trail has it, is joined into custom.outcome; the
record's place in the trail is in custom.audit. Export reads and does not
verify: run "fsbroker audit verify" first.

Exit status: 0 ok; 1 some lines are not records; 2 bad flags or no trail.
`

const auditHashHelp = `Print the digest that stands for PATH in a trail written with redacted paths
(audit.redactPaths), to find its records with query --path-digest. The digest
is an HMAC of the exact path string under the audit key (--key FILE, else
$FSBROKER_AUDIT_KEY, else <state-dir>/audit.key, where --config FILE can name
the state directory).

The broker hashes the canonical path: absolute, cleaned, symlinks resolved. An
absolute PATH is hashed exactly as given, so give that form. A relative PATH is
made absolute against the working directory first (cleaned, symlinks not
resolved), and the path hashed is printed on stderr.
`

const auditQueryExample = `  fsbroker audit query --server notes --method files/write --since 24h
  fsbroker audit query --decision deny
  fsbroker audit query --path /home/alice/project --format json | jq .`

// newAuditCommand returns `fsbroker audit verify|query|tail|export|hash`.
func newAuditCommand() *cobra.Command {
	return newGroupCommand(&cobra.Command{
		Use:     "audit COMMAND",
		Short:   "check and read the audit trail (verify, query, tail, export, hash)",
		Long:    auditLong,
		Example: auditExample,
	},
		leafCommand(&cobra.Command{
			Use:   "verify [PATH]",
			Short: "prove the trail intact, or name its first bad record (needs the audit key)",
			Long:  auditVerifyHelp,
			Example: `  fsbroker audit verify
  fsbroker audit verify --key /secure/audit.key --checkpoint-pub /secure/checkpoint.pub \
    /var/log/fsbroker
  fsbroker audit verify --witness /var/log/syslog --json`,
		}, auditVerify),
		leafCommand(&cobra.Command{
			Use:     "query [PATH]",
			Short:   "print the records that match, in time order (reads; does not verify)",
			Long:    auditQueryHelp,
			Example: auditQueryExample,
		}, auditQuery),
		leafCommand(&cobra.Command{
			Use:   "tail [PATH]",
			Short: "print the last N records; -f follows new ones",
			Long:  auditTailHelp,
			Example: `  fsbroker audit tail -n 20
  fsbroker audit tail -f --server notes --decision deny`,
		}, auditTail),
		leafCommand(&cobra.Command{
			Use:     "export --format opa [PATH]",
			Short:   "write the decisions as OPA decision-log events, one JSON object a line",
			Long:    auditExportHelp,
			Example: `  fsbroker audit export --format opa --since 24h > decisions.jsonl`,
		}, auditExport),
		leafCommand(&cobra.Command{
			Use:     "hash PATH",
			Short:   "print the digest that stands for PATH where paths are redacted",
			Long:    auditHashHelp,
			Example: `  fsbroker audit query --path-digest "$(fsbroker audit hash /home/alice/project/.env)"`,
		}, auditHash),
	)
}

// commandFunc registers a command's flags on fs and returns what runs it on the
// arguments left once they are parsed.
type commandFunc func(fs *pflag.FlagSet) func(ctx context.Context, args []string, stdout, stderr io.Writer) error

// leafCommand completes c, a command without subcommands: its flags and what
// runs it come from build.
func leafCommand(c *cobra.Command, build commandFunc) *cobra.Command {
	fs := c.Flags()
	fs.SortFlags = false
	run := build(fs)
	if c.Args == nil {
		c.Args = cobra.ArbitraryArgs
	}
	c.RunE = func(cmd *cobra.Command, args []string) error {
		return run(cmd.Context(), args, cmd.OutOrStdout(), cmd.ErrOrStderr())
	}
	return c
}

// trailFlags locate the trail and the state directory the way the broker does: the flags,
// else the config file's members, else the defaults.
type trailFlags struct {
	auditPath  string
	stateDir   string
	configPath string
}

func (t *trailFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&t.auditPath, "audit", "", "the trail `PATH` (a directory of segments, or one segment file) when no PATH argument is given; default the config file's audit.dir, else <state-dir>/audit")
	t.registerState(fs)
}

// registerState registers the flags that locate the state directory: --state-dir and --config.
func (t *trailFlags) registerState(fs *pflag.FlagSet) {
	fs.StringVar(&t.stateDir, "state-dir", "", "the broker's state `DIR` (the trail and the audit key); default the config file's stateDir, else $XDG_STATE_HOME/fsbroker or ~/.local/state/fsbroker")
	fs.StringVar(&t.configPath, "config", "", "the broker's config `FILE`: its stateDir and audit.dir stand in for --state-dir and --audit when those are not given (nothing else in it is used)")
}

// applyConfig loads --config FILE, when given, with the broker's own loader (so a file the
// broker would refuse is refused here too, with the same message) and takes its stateDir and
// audit.dir for --state-dir and --audit where those flags were not given. Relative paths are
// relative to the config file's directory, as the broker resolves them (options.mergeConfig).
func (t *trailFlags) applyConfig() error {
	if t.configPath == "" {
		return nil
	}
	v, err := schema.New()
	if err != nil {
		return fmt.Errorf("compile schemas: %w", err)
	}
	cfg, err := loadConfig(t.configPath, v)
	if err != nil {
		return err
	}
	fromConfig := func(p string) string {
		if p != "" && !filepath.IsAbs(p) {
			p = filepath.Join(filepath.Dir(t.configPath), p)
		}
		return p
	}
	if t.stateDir == "" {
		t.stateDir = fromConfig(cfg.StateDir)
	}
	if t.auditPath == "" {
		t.auditPath = fromConfig(cfg.Audit.Dir)
	}
	return nil
}

// state returns the state directory.
func (t *trailFlags) state() (string, error) {
	if t.stateDir != "" {
		return t.stateDir, nil
	}
	d, err := defaultStateDir()
	if err != nil {
		return "", configErrorf("--state-dir: %v; set one", err)
	}
	return d, nil
}

// path returns the trail's path: the argument, else --audit, else <state-dir>/audit. It must
// exist.
func (t *trailFlags) path(args []string) (string, error) {
	var p string
	switch {
	case len(args) > 1:
		return "", configErrorf("give at most one trail PATH, got %q", args)
	case len(args) == 1:
		p = args[0]
	case t.auditPath != "":
		p = t.auditPath
	default:
		dir, err := t.state()
		if err != nil {
			return "", err
		}
		p = filepath.Join(dir, "audit")
	}
	if _, err := os.Stat(p); err != nil {
		var perr *fs.PathError
		if errors.As(err, &perr) {
			err = perr.Err
		}
		return "", configErrorf("audit trail %s: %v", p, err)
	}
	return p, nil
}

// keyFlags name the audit keys.
type keyFlags struct {
	key     string
	oldKeys []string
}

func (k *keyFlags) register(fs *pflag.FlagSet, old bool) {
	fs.StringVar(&k.key, "key", "", "the audit key `FILE` (32 raw bytes, mode 0600); default $"+auditKeyEnv+" (64 hex digits), else <state-dir>/audit.key")
	if old {
		fs.Func("old-key", "an audit key `FILE` in use before a rotation; repeatable", func(v string) error {
			k.oldKeys = append(k.oldKeys, v)
			return nil
		})
	}
}

// load returns the audit key (from --key, the environment or the state directory) followed by
// the old keys.
func (k *keyFlags) load(t *trailFlags) ([][]byte, error) {
	keys, _, err := k.loadFrom(t)
	return keys, err
}

// loadFrom is load, and says where the audit key came from ("--key FILE", "$ENV", or the
// key file in the state directory).
func (k *keyFlags) loadFrom(t *trailFlags) (keys [][]byte, source string, err error) {
	var key []byte
	switch env := os.Getenv(auditKeyEnv); {
	case k.key != "":
		b, err := audit.LoadKey(k.key)
		if err != nil {
			return nil, "", configErrorf("--key: %v", err)
		}
		key, source = b, "--key "+k.key
	case env != "":
		b, err := hex.DecodeString(strings.TrimSpace(env))
		if err != nil || len(b) != audit.KeySize {
			return nil, "", configErrorf("$%s: want %d hex digits (a %d-byte key)", auditKeyEnv, 2*audit.KeySize, audit.KeySize)
		}
		key, source = b, "$"+auditKeyEnv
	default:
		dir, err := t.state()
		if err != nil {
			return nil, "", err
		}
		p := filepath.Join(dir, audit.DefaultKeyFile)
		b, err := audit.LoadKey(p)
		if err != nil {
			return nil, "", configErrorf("no audit key: %v; give --key FILE or set $%s", err, auditKeyEnv)
		}
		key, source = b, p
	}
	keys = [][]byte{key}
	for _, p := range k.oldKeys {
		b, err := audit.LoadKey(p)
		if err != nil {
			return nil, "", configErrorf("--old-key: %v", err)
		}
		keys = append(keys, b)
	}
	return keys, source, nil
}

// trailStateDir is the state directory a broker that wrote the trail at path kept its audit
// key in, when the trail is in the default place, <state-dir>/audit: the trail directory's
// parent, if it holds an audit key file; "" otherwise.
func trailStateDir(path string) string {
	dir := path
	if fi, err := os.Stat(path); err == nil && !fi.IsDir() {
		dir = filepath.Dir(path)
	}
	parent := filepath.Dir(filepath.Clean(dir))
	if fi, err := os.Stat(filepath.Join(parent, audit.DefaultKeyFile)); err == nil && fi.Mode().IsRegular() {
		return parent
	}
	return ""
}

// wrongKey reports a trail of which no segment could be checked because each is under an
// audit key that was not given: the trail's key ids, else nil.
func wrongKey(rep *audit.Report) []string {
	if rep.Segments == 0 || rep.Records > 0 || len(rep.Problems) == 0 {
		return nil
	}
	var ids []string
	for _, p := range rep.Problems {
		if p.Kind != audit.ProblemUnknownKey || p.MACKeyID == "" {
			return nil
		}
		if !slices.Contains(ids, p.MACKeyID) {
			ids = append(ids, p.MACKeyID)
		}
	}
	return ids
}

// filterFlags are the record filters of query, tail and export.
type filterFlags struct {
	f            audit.Filter
	kind         string
	since, until string
}

func (ff *filterFlags) register(fs *pflag.FlagSet, kind bool) {
	fs.StringVar(&ff.f.Server, "server", "", "records of the MCP server `NAME`")
	fs.StringVar(&ff.f.Method, "method", "", "records of the `METHOD` (files/read, files/write, ...; under serve the tool or resources method: read_text_file, resources/read, ...)")
	fs.StringVar(&ff.f.Tool, "tool", "", "records of the `TOOL`: forward records (wrap) of its tools/call, and the records of serve's requests for it")
	if kind {
		fs.StringVar(&ff.kind, "kind", "", "records of the `KIND` (decision, outcome, session_start, session_end, consent, grant, policy_reload, policy_reload_failed, key_rotation, forward; segment_start and checkpoint are shown only when named)")
	}
	fs.StringVar(&ff.f.Decision, "decision", "", "decisions that were `allow|deny`")
	fs.StringVar(&ff.f.Code, "code", "", "records with the `CODE` as their decision's code or their outcome (ok, PERMISSION_DENIED, ...)")
	fs.StringVar(&ff.f.PathPrefix, "path", "", "records with a path at or below `PREFIX` (/a/b matches /a/b and /a/b/c, not /a/bc)")
	fs.StringVar(&ff.f.PathDigest, "path-digest", "", "records with the path `DIGEST` (hmac-sha256:..., from fsbroker audit hash), where paths are redacted")
	fs.StringVar(&ff.since, "since", "", "records at or after `TIME`: RFC 3339 (2026-03-01T00:00:00Z) or a duration ago (24h, 90m)")
	fs.StringVar(&ff.until, "until", "", "records before `TIME`: RFC 3339 or a duration ago")
	fs.StringVar(&ff.f.SessionID, "session", "", "records of the session `ID`")
	fs.StringVar(&ff.f.DecisionID, "decision-id", "", "records of the decision `ID` (the decision and its outcome)")
}

// filter returns the filter the flags describe, with durations counted back from now.
func (ff *filterFlags) filter(now time.Time) (audit.Filter, error) {
	f := ff.f
	f.Kind = audit.Kind(ff.kind)
	var err error
	if f.Since, err = parseWhen("--since", ff.since, now); err != nil {
		return f, err
	}
	if f.Until, err = parseWhen("--until", ff.until, now); err != nil {
		return f, err
	}
	if err := f.Validate(); err != nil {
		return f, &configError{msg: strings.TrimPrefix(err.Error(), "audit: filter: ")}
	}
	return f, nil
}

// parseWhen parses a time flag: RFC 3339, or a Go duration meaning that long before now.
func parseWhen(name, s string, now time.Time) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	if d, err := time.ParseDuration(s); err == nil {
		if d < 0 {
			return time.Time{}, configErrorf("%s %s: a duration ago must not be negative", name, s)
		}
		return now.Add(-d), nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, configErrorf("%s %q: want RFC 3339 (2026-03-01T12:00:00Z) or a duration ago (24h)", name, s)
	}
	return t, nil
}

// recordPrinter prints records as an aligned table or as their JSON lines.
type recordPrinter struct {
	json   bool
	out    io.Writer
	tw     *tabwriter.Writer
	header bool
	err    error
}

func newRecordPrinter(format string, out io.Writer) (*recordPrinter, error) {
	switch format {
	case "table":
		return &recordPrinter{out: out, tw: tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)}, nil
	case "json":
		return &recordPrinter{json: true, out: out}, nil
	}
	return nil, configErrorf("--format %q: want table or json", format)
}

// print prints one record; after a write error it prints nothing more.
func (p *recordPrinter) print(e *audit.Entry) {
	if p.err != nil {
		return
	}
	if p.json {
		_, p.err = fmt.Fprintf(p.out, "%s\n", e.Raw)
		return
	}
	if !p.header {
		fmt.Fprintln(p.tw, "TIME\tKIND\tSERVER\tMETHOD\tRESULT\tCODE\tPATHS\tREASONS")
		p.header = true
	}
	r := &e.Record
	result := r.Outcome
	if r.Allow != nil {
		result = "deny"
		if *r.Allow {
			result = "allow"
		}
	}
	details := r.Reasons
	if len(details) == 0 && r.Detail != "" {
		details = []string{r.Detail}
	}
	fmt.Fprintf(p.tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", shortTime(r.Time), cell(string(r.Kind)), cell(r.Server),
		cell(r.Method), cell(result), cell(r.Code), cells(r.Paths, ", "), cells(details, "; "))
}

// flush writes out the table rows printed so far and returns the first write error.
func (p *recordPrinter) flush() error {
	if p.tw != nil && p.err == nil {
		p.err = p.tw.Flush()
	}
	if p.err != nil {
		return fmt.Errorf("write: %w", p.err)
	}
	return nil
}

// shortTime shows a record time to the millisecond.
func shortTime(s string) string {
	t, err := time.Parse(audit.TimeLayout, s)
	if err != nil {
		return cell(s)
	}
	return t.Format("2006-01-02T15:04:05.000Z")
}

// cell makes a value safe to print in a table: "-" when empty, and quoted with escapes when
// it holds anything but printable characters (a server name or a path from the trail must not
// reach the terminal as control characters, nor break the columns with a tab).
func cell(s string) string {
	if s == "" {
		return "-"
	}
	for _, r := range s {
		if !unicode.IsGraphic(r) || r == '\t' {
			return strconv.QuoteToGraphic(s)
		}
	}
	return s
}

// cells joins values made safe with cell.
func cells(vs []string, sep string) string {
	if len(vs) == 0 {
		return "-"
	}
	out := make([]string, len(vs))
	for i, v := range vs {
		out[i] = cell(v)
	}
	return strings.Join(out, sep)
}

// readProblems counts the lines that could not be read, and reports each on stderr.
type readProblems struct {
	stderr io.Writer
	n      int
}

// report prints a line or file of the trail that could not be read, and returns nil; any
// other error means the reading stopped (ctx ended), and is returned.
func (rp *readProblems) report(err error) error {
	var rerr *audit.ReadError
	if !errors.As(err, &rerr) {
		return err
	}
	rp.n++
	fmt.Fprintln(rp.stderr, "fsbroker:", err)
	return nil
}

// result ends a reading command: an exit status of 1 when some lines could not be read.
func (rp *readProblems) result() error {
	if rp.n == 0 {
		return nil
	}
	fmt.Fprintf(rp.stderr, "fsbroker: %d line(s) or file(s) of the trail could not be read as records; run \"fsbroker audit verify\"\n", rp.n)
	return &exitCodeError{code: exitFailure}
}

// auditVerify registers the flags of `fsbroker audit verify` and returns what runs it.
func auditVerify(fs *pflag.FlagSet) func(ctx context.Context, pos []string, stdout, stderr io.Writer) error {
	var (
		tf        trailFlags
		kf        keyFlags
		pubs      []string
		witnesses []string
	)
	tf.register(fs)
	kf.register(fs, true)
	fs.Func("witness", "a `FILE` of witness lines (a copy of syslog, journalctl -o cat output, an --audit-witness file) to check the trail's end against; repeatable", func(v string) error {
		witnesses = append(witnesses, v)
		return nil
	})
	fs.Func("checkpoint-pub", "a trusted checkpoint public key `FILE` (PEM); repeatable; default: the checkpoint.pub beside the trail", func(v string) error {
		pubs = append(pubs, v)
		return nil
	})
	asJSON := fs.Bool("json", false, "print the report as JSON")
	return func(ctx context.Context, pos []string, stdout, stderr io.Writer) error {
		if err := tf.applyConfig(); err != nil {
			return err
		}
		path, err := tf.path(pos)
		if err != nil {
			return err
		}
		if tf.stateDir == "" && kf.key == "" && os.Getenv(auditKeyEnv) == "" {
			// As the broker that wrote it: its key is in its state directory, the trail's
			// parent in the default layout.
			tf.stateDir = trailStateDir(path)
		}
		macKeys, keySource, err := kf.loadFrom(&tf)
		if err != nil {
			return err
		}
		keys := audit.VerifyKeys{MAC: macKeys}
		if len(pubs) == 0 {
			dir := path
			if fi, err := os.Stat(path); err == nil && !fi.IsDir() {
				dir = filepath.Dir(path)
			}
			p := filepath.Join(dir, audit.PublicKeyFile)
			published, err := audit.LoadPublishedKeys(dir) // checkpoint.pub, and those retired by a rotation
			if err != nil {
				return configErrorf("no checkpoint public key: %v; give a trusted copy with --checkpoint-pub FILE", err)
			}
			keys.Checkpoint = published
			if !*asJSON {
				fmt.Fprintf(stderr, "fsbroker: note: checkpoints checked against %s, which is only as trustworthy as the log directory; give a trusted copy with --checkpoint-pub\n", p)
			}
		}
		for _, p := range pubs {
			pub, err := audit.LoadPublicKey(p)
			if err != nil {
				return configErrorf("--checkpoint-pub: %v", err)
			}
			keys.Checkpoint = append(keys.Checkpoint, pub)
		}
		var opts []audit.VerifyOption
		if len(witnesses) > 0 {
			wl, err := readWitnesses(witnesses, keys)
			if err != nil {
				return err
			}
			opts = append(opts, audit.AgainstWitness(wl))
		}
		rep, err := verifyInterruptibly(ctx, path, keys, opts...)
		if ctx.Err() != nil {
			return fmt.Errorf("verify: %w", ctx.Err())
		}
		if err != nil {
			return configErrorf("cannot verify %s: %v", path, err)
		}
		if ids := wrongKey(&rep); ids != nil {
			// Not a sign of tampering: the key given is not this trail's.
			given := audit.MACKeyID(macKeys[0])
			for _, k := range macKeys[1:] {
				given += ", --old-key " + audit.MACKeyID(k)
			}
			return configErrorf("%s is under audit key %s, but the key given (%s) has id %s: nothing could be verified. "+
				"Give the key of the broker that wrote the trail: --key FILE, $%s, or --state-dir DIR (its state directory, which holds %s)",
				path, strings.Join(ids, " and "), keySource, given, auditKeyEnv, audit.DefaultKeyFile)
		}
		if *asJSON {
			b, err := json.MarshalIndent(rep, "", "  ")
			if err != nil {
				return fmt.Errorf("encode the report: %w", err)
			}
			if _, err := fmt.Fprintf(stdout, "%s\n", b); err != nil {
				return fmt.Errorf("write: %w", err)
			}
		} else if err := printReport(stdout, path, &rep); err != nil {
			return fmt.Errorf("write: %w", err)
		}
		if !rep.OK || rep.Segments == 0 {
			return &exitCodeError{code: exitFailure}
		}
		return nil
	}
}

// verifyInterruptibly runs audit.Verify, which takes no context, and returns early when ctx
// ends (SIGINT or SIGTERM) so a long verification can be stopped; the process then exits
// without waiting for it.
func verifyInterruptibly(ctx context.Context, path string, keys audit.VerifyKeys, opts ...audit.VerifyOption) (audit.Report, error) {
	type result struct {
		rep audit.Report
		err error
	}
	done := make(chan result, 1)
	go func() {
		rep, err := audit.Verify(path, keys, opts...)
		done <- result{rep, err}
	}()
	select {
	case <-ctx.Done():
		return audit.Report{}, ctx.Err()
	case r := <-done:
		return r.rep, r.err
	}
}

// printReport prints a verification report for a person.
func printReport(w io.Writer, path string, rep *audit.Report) error {
	var b strings.Builder
	counts := fmt.Sprintf("%d segment(s), %d record(s) and %d checkpoint(s) verified", rep.Segments, rep.Records, rep.Checkpoints)
	torn, tampered, unknownKey := 0, 0, false
	for _, p := range rep.Problems {
		if p.Kind.Tampering() {
			tampered++
		} else {
			torn++
		}
		unknownKey = unknownKey || p.Kind == audit.ProblemUnknownKey
	}
	switch {
	case rep.Segments == 0 && tampered == 0:
		fmt.Fprintf(&b, "%s: no segment files (*.jsonl): nothing was verified\n", path)
	case rep.OK:
		fmt.Fprintf(&b, "%s: intact: %s\n", path, counts)
	case tampered > 0:
		fmt.Fprintf(&b, "%s: NOT INTACT: signs of tampering in %d segment(s) (or damage that cannot be told apart from it)\n", path, tampered)
		fmt.Fprintf(&b, "%s\n", counts)
		fmt.Fprintf(&b, "first bad record: %s\n", rep.Problem)
	default:
		fmt.Fprintf(&b, "%s: TORN TAIL: %d segment(s) end in an unfinished write, as a broker that crashed or was killed mid-write leaves it. Not tampering: every record before it verifies.\n", path, torn)
		fmt.Fprintf(&b, "%s\n", counts)
		fmt.Fprintf(&b, "first torn line: %s\n", rep.Problem)
	}
	if len(rep.Problems) > 0 {
		fmt.Fprintf(&b, "problems (the first of each segment):\n")
		for _, p := range rep.Problems {
			what := "tampering"
			if !p.Kind.Tampering() {
				what = "torn: a crash, not tampering"
			}
			fmt.Fprintf(&b, "  %s [%s]\n", p, what)
		}
	}
	if unknownKey {
		fmt.Fprintf(&b, "hint: some segments are under a key that was not given: pass keys from before a rotation with --old-key FILE, and checkpoint keys with --checkpoint-pub FILE\n")
	}
	if rep.Witness != nil {
		printWitness(&b, rep.Witness)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// readWitnesses reads the witness files of --witness; one that cannot be read stops the check.
func readWitnesses(files []string, keys audit.VerifyKeys) (*audit.WitnessLog, error) {
	wl := audit.NewWitnessLog(keys)
	for _, name := range files {
		f, err := os.Open(name)
		if err != nil {
			return nil, configErrorf("--witness: %v", err)
		}
		err = wl.Add(name, f)
		f.Close()
		if err != nil {
			return nil, configErrorf("--witness: %v", err)
		}
	}
	return wl, nil
}

// printWitness says what the witness lines showed.
func printWitness(b *strings.Builder, wr *audit.WitnessReport) {
	fmt.Fprintf(b, "witness: %d line(s) of this trail in %d file(s): %d of the %d segment(s) the witness saw hold everything it saw",
		wr.TrailLines, wr.Files, wr.Confirmed, wr.Segments)
	if wr.RetentionRemoved > 0 {
		fmt.Fprintf(b, ", %d were deleted by retention after it", wr.RetentionRemoved)
	}
	fmt.Fprintln(b)
	if wr.OtherTrails > 0 {
		fmt.Fprintf(b, "witness: %d line(s) of other trails (other audit keys) ignored\n", wr.OtherTrails)
	}
	if wr.Refused > 0 {
		fmt.Fprintf(b, "witness: %d line(s) refused, not used (forged, malformed, or signed with a key no broker of this trail used):\n", wr.Refused)
		for _, e := range wr.RefusedExamples {
			fmt.Fprintf(b, "  %s\n", cell(e))
		}
	}
	if wr.TrailLines == 0 {
		fmt.Fprintf(b, "warning: the witness files hold no line of this trail: the trail's end is not proven (are the brokers started with --audit-witness, and is this the right file?)\n")
	}
}

// auditQuery registers the flags of `fsbroker audit query` and returns what runs it.
func auditQuery(fs *pflag.FlagSet) func(ctx context.Context, pos []string, stdout, stderr io.Writer) error {
	var (
		tf trailFlags
		ff filterFlags
	)
	tf.register(fs)
	ff.register(fs, true)
	format := fs.String("format", "table", "output `FORMAT`: table, or json (the record lines as they are in the trail)")
	limit := fs.Int("limit", 0, "print at most `N` records (0: all)")
	return func(ctx context.Context, pos []string, stdout, stderr io.Writer) error {
		if err := tf.applyConfig(); err != nil {
			return err
		}
		if *limit < 0 {
			return configErrorf("--limit %d: must not be negative", *limit)
		}
		p, r, err := openTrail(&tf, &ff, pos, *format, stdout)
		if err != nil {
			return err
		}
		problems := &readProblems{stderr: stderr}
		n := 0
		var stopped error
		for e, err := range r.Entries(ctx) {
			if err != nil {
				if stopped = problems.report(err); stopped != nil {
					break
				}
				continue
			}
			p.print(&e)
			n++
			if n == *limit || p.err != nil {
				break
			}
		}
		if err := p.flush(); err != nil {
			return err
		}
		if stopped != nil {
			return fmt.Errorf("query: %w", stopped)
		}
		if n == 0 {
			fmt.Fprintln(stderr, "fsbroker: no records match")
		}
		return problems.result()
	}
}

// openTrail resolves the trail, the filter and the output format of a reading command.
func openTrail(tf *trailFlags, ff *filterFlags, pos []string, format string, stdout io.Writer) (*recordPrinter, *audit.Reader, error) {
	p, err := newRecordPrinter(format, stdout)
	if err != nil {
		return nil, nil, err
	}
	f, err := ff.filter(time.Now())
	if err != nil {
		return nil, nil, err
	}
	path, err := tf.path(pos)
	if err != nil {
		return nil, nil, err
	}
	r, err := audit.NewReader(path, f)
	if err != nil {
		return nil, nil, configErrorf("audit trail %s: %v", path, err)
	}
	return p, r, nil
}

// auditTail registers the flags of `fsbroker audit tail` and returns what runs it.
func auditTail(fs *pflag.FlagSet) func(ctx context.Context, pos []string, stdout, stderr io.Writer) error {
	var (
		tf trailFlags
		ff filterFlags
	)
	tf.register(fs)
	ff.register(fs, true)
	format := fs.String("format", "table", "output `FORMAT`: table, or json (the record lines as they are in the trail)")
	n := fs.IntP("lines", "n", 10, "print the last `N` records")
	follow := fs.BoolP("follow", "f", false, "follow: print new records as they are appended, until interrupted")
	return func(ctx context.Context, pos []string, stdout, stderr io.Writer) error {
		if err := tf.applyConfig(); err != nil {
			return err
		}
		if *n < 0 {
			return configErrorf("-n %d: must not be negative", *n)
		}
		p, r, err := openTrail(&tf, &ff, pos, *format, stdout)
		if err != nil {
			return err
		}
		problems := &readProblems{stderr: stderr}
		// The last n records: a ring.
		last := make([]audit.Entry, 0, min(*n, 4096))
		next := 0
		var stopped error
		for e, err := range r.Entries(ctx) {
			switch {
			case err != nil:
				stopped = problems.report(err)
			case *n == 0:
			case len(last) < *n:
				last = append(last, e)
			default:
				last[next] = e
				next = (next + 1) % *n
			}
			if stopped != nil {
				break
			}
		}
		if stopped != nil {
			if *follow {
				return nil // interrupted
			}
			return fmt.Errorf("tail: %w", stopped)
		}
		for i := range last {
			p.print(&last[(next+i)%len(last)])
		}
		if err := p.flush(); err != nil {
			return err
		}
		if !*follow {
			return problems.result()
		}
		tick := time.NewTicker(followInterval)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return nil
			case <-tick.C:
			}
			for e, err := range r.Entries(ctx) {
				if err != nil {
					if problems.report(err) != nil {
						return nil // interrupted
					}
					continue
				}
				if p.print(&e); p.err != nil {
					break
				}
			}
			if err := p.flush(); err != nil {
				return err
			}
		}
	}
}

// auditExport registers the flags of `fsbroker audit export` and returns what runs it.
func auditExport(fs *pflag.FlagSet) func(ctx context.Context, pos []string, stdout, stderr io.Writer) error {
	var (
		tf trailFlags
		ff filterFlags
	)
	tf.register(fs)
	ff.register(fs, false)
	format := fs.String("format", "opa", "export `FORMAT`: opa (OPA decision-log events, one JSON object a line)")
	return func(ctx context.Context, pos []string, stdout, stderr io.Writer) error {
		if err := tf.applyConfig(); err != nil {
			return err
		}
		if *format != "opa" {
			return configErrorf("--format %q: want opa", *format)
		}
		f, err := ff.filter(time.Now())
		if err != nil {
			return err
		}
		path, err := tf.path(pos)
		if err != nil {
			return err
		}
		enc := json.NewEncoder(stdout)
		enc.SetEscapeHTML(false)
		problems := &readProblems{stderr: stderr}
		for ev, err := range audit.ExportOPA(ctx, path, audit.OPAOptions{Filter: f, Version: brokerVersion()}) {
			if err != nil {
				if stopped := problems.report(err); stopped != nil {
					return fmt.Errorf("export: %w", stopped)
				}
				continue
			}
			if err := enc.Encode(ev); err != nil {
				return fmt.Errorf("write: %w", err)
			}
		}
		return problems.result()
	}
}

// auditHash registers the flags of `fsbroker audit hash PATH` and returns what runs it.
func auditHash(fs *pflag.FlagSet) func(ctx context.Context, pos []string, stdout, stderr io.Writer) error {
	var (
		tf trailFlags
		kf keyFlags
	)
	tf.registerState(fs)
	kf.register(fs, false)
	return func(_ context.Context, pos []string, stdout, stderr io.Writer) error {
		if err := tf.applyConfig(); err != nil {
			return err
		}
		if len(pos) != 1 || pos[0] == "" {
			return configErrorf("audit hash: give one PATH, got %q", pos)
		}
		p := pos[0]
		if !filepath.IsAbs(p) {
			abs, err := filepath.Abs(p)
			if err != nil {
				return configErrorf("audit hash: %s: %v", p, err)
			}
			p = abs
			fmt.Fprintf(stderr, "fsbroker: hashing %s (the relative path made absolute; symlinks not resolved)\n", p)
		}
		keys, err := kf.load(&tf)
		if err != nil {
			return err
		}
		if _, err := fmt.Fprintln(stdout, audit.PathDigest(keys[0], p)); err != nil {
			return fmt.Errorf("write: %w", err)
		}
		return nil
	}
}
