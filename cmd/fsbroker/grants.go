package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/fsbroker/fsbroker/audit"
	"github.com/fsbroker/fsbroker/broker"
	"github.com/fsbroker/fsbroker/broker/grants"
	"github.com/fsbroker/fsbroker/broker/roots"
	"github.com/fsbroker/fsbroker/schema"
)

const grantsUsage = `Usage: fsbroker grants COMMAND [flags]

Show and revoke the consent grants the broker keeps in <state-dir>/grants:
which MCP server may read, or read and write, which paths (mount-relative, as
"proj/docs"; a grant covers its path and everything beneath it). The state
directory is --state-dir, else the stateDir of the --config FILE, else the
default: the broker resolves it the same way, so --config FILE alone finds the
grants of a broker started with that file.

Commands:
  list   [--server S] [--root DIR] [--json]        the grants, by server and path
  revoke [--server S] [--path P] [--id ID] [--all] take grants away, also from running brokers

Run "fsbroker help grants COMMAND" for a command's flags.
`

const grantsListHelp = `Usage: fsbroker grants list [flags]

Print the consent grants: server, access (read, or write which includes read),
path, the root directory its mount named when it was granted, when granted,
when it expires, the consent provider that granted it, and its id (for
fsbroker grants revoke --id). Expired grants are shown, marked expired, until
the broker next changes that server's grants; they grant nothing.

A grant counts only while its mount names the directory it was granted under
(the same path, device and inode). Given the broker's roots (--config FILE,
whose roots are read, and --root flags, as the broker takes them), list marks
each grant whose root changed or whose mount is not configured; a grant from
before grants recorded their root is marked too: it covers nothing.

Exit status: 0 ok (no grants included); 1 a grants file could not be read (the
others are printed; the broker grants nothing from such a file); 2 bad flags.
`

const grantsRevokeHelp = `Usage: fsbroker grants revoke [flags]

Revoke the grants that match every selector given: --server (one server's),
--path (those on PATH and beneath it), --id (one grant). --all, alone, revokes
every grant of every server. A running broker refuses new requests under a
revoked grant within 1 second, and ends the server's watches under it.

A grant cannot be narrowed: revoking proj/dir leaves a grant on proj whole, and
it still covers proj/dir. When --path matches no grant but a broader one covers
the path, revoke names it; revoke that one (--id) to take the path away.

Exit status: 0 revoked; 1 nothing matched, or a grants file could not be read
or changed; 2 bad flags.
`

// grantsCommands is `fsbroker grants list|revoke`.
var grantsCommands = &commandGroup{name: "grants", usage: grantsUsage, cmds: []subcommand{
	{"list", func(_ context.Context, args []string, stdout, stderr io.Writer) error {
		return grantsList(args, stdout, stderr)
	}},
	{"revoke", func(_ context.Context, args []string, stdout, stderr io.Writer) error {
		return grantsRevoke(args, stdout, stderr)
	}},
}}

// runGrants runs `fsbroker grants list|revoke`.
func runGrants(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return grantsCommands.run(ctx, args, stdout, stderr)
}

// newGrantsFlagSet returns the flag set of `fsbroker grants NAME` with the flags that locate
// the state directory, bound to tf (whose applyConfig and state resolve it as the audit
// commands and the broker do).
func newGrantsFlagSet(name, help string, out io.Writer, tf *trailFlags) *flag.FlagSet {
	fs := flag.NewFlagSet("fsbroker grants "+name, flag.ContinueOnError)
	fs.SetOutput(out)
	fs.Usage = func() {
		fmt.Fprint(out, help, "\nFlags:\n")
		fs.PrintDefaults()
	}
	fs.StringVar(&tf.stateDir, "state-dir", "", "the broker's state `DIR` (the grants are in DIR/grants); default the config file's stateDir, else $XDG_STATE_HOME/fsbroker or ~/.local/state/fsbroker")
	fs.StringVar(&tf.configPath, "config", "", "the broker's config `FILE`: its stateDir stands in for --state-dir when that is not given (nothing else in it is used)")
	return fs
}

// parseGrantsFlags parses a grants command's flags (it takes no arguments) and returns the
// grants directory.
func parseGrantsFlags(fs *flag.FlagSet, args []string, tf *trailFlags) (string, error) {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return "", errHelpShown
		}
		return "", &configError{msg: err.Error()}
	}
	if fs.NArg() > 0 {
		return "", configErrorf("%s: unexpected argument %q (every selector is a flag)", fs.Name(), fs.Arg(0))
	}
	if err := tf.applyConfig(); err != nil {
		return "", err
	}
	state, err := tf.state()
	if err != nil {
		return "", err
	}
	return filepath.Join(state, grants.DirName), nil
}

// openGrants opens the grants directory, or returns nil when it does not exist (no grants;
// a read-only command does not create it).
func openGrants(dir string) (*grants.Store, error) {
	if _, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	s, err := grants.Open(dir)
	if err != nil {
		return nil, configErrorf("--state-dir: %v", err)
	}
	return s, nil
}

// grantsList runs `fsbroker grants list`.
func grantsList(args []string, stdout, stderr io.Writer) error {
	var tf trailFlags
	fs := newGrantsFlagSet("list", grantsListHelp, stderr, &tf)
	server := fs.String("server", "", "only the grants of the server `ID` (its pinned id, else its declared name)")
	asJSON := fs.Bool("json", false, "print a JSON array of grants (id, server, access, path, root when known, rootStatus, granted, expires when set, by, expired)")
	var rootFlags []string
	fs.Func("root", "a root `DIR` of the broker, as its --root (DIR:rw allowed); repeatable: grants whose root changed are marked", func(v string) error {
		rootFlags = append(rootFlags, v)
		return nil
	})
	dir, err := parseGrantsFlags(fs, args, &tf)
	if err != nil {
		return err
	}
	current, err := brokerRoots(tf.configPath, rootFlags)
	if err != nil {
		return err
	}
	s, err := openGrants(dir)
	if err != nil {
		return err
	}
	var (
		gs      []grants.Grant
		readErr error
	)
	if s != nil {
		defer s.Close()
		if *server != "" {
			gs, readErr = listBoth(s, *server)
		} else {
			gs, readErr = s.ListAll()
		}
		if errors.Is(readErr, grants.ErrInvalid) {
			return configErrorf("--server: %v", readErr)
		}
	}
	now := time.Now()
	if *asJSON {
		err = printGrantsJSON(stdout, gs, current, now)
	} else if len(gs) > 0 {
		err = printGrants(stdout, gs, current, now)
	}
	if err != nil {
		return fmt.Errorf("write: %w", err)
	}
	if readErr != nil {
		return grantsReadFailure(stderr, readErr)
	}
	if len(gs) == 0 && !*asJSON {
		fmt.Fprintln(stderr, "fsbroker: no grants in", dir)
	}
	return nil
}

// grantsReadFailure reports grants files that could not be read or changed, and ends the
// command with status 1.
func grantsReadFailure(stderr io.Writer, err error) error {
	for _, line := range strings.Split(err.Error(), "\n") {
		fmt.Fprintln(stderr, "fsbroker:", line)
	}
	if errors.Is(err, grants.ErrCorrupt) {
		fmt.Fprintln(stderr, "fsbroker: the broker grants nothing from a corrupt file: restore it, or remove it to revoke all of that server's grants")
	}
	return &exitCodeError{code: exitFailure}
}

// grantsRevoke runs `fsbroker grants revoke`.
func grantsRevoke(args []string, stdout, stderr io.Writer) error {
	var (
		tf trailFlags
		f  grants.RevokeFilter
	)
	fs := newGrantsFlagSet("revoke", grantsRevokeHelp, stderr, &tf)
	fs.StringVar(&f.Server, "server", "", "the grants of the server `ID` (its pinned id, else its declared name)")
	fs.StringVar(&f.Path, "path", "", "the grants on the mount-relative `PATH` (proj/dir) and beneath it; not a broader grant")
	fs.StringVar(&f.ID, "id", "", "the grant `ID` (from fsbroker grants list)")
	fs.BoolVar(&f.All, "all", false, "every grant of every server (alone: not with another selector)")
	fs.StringVar(&tf.auditPath, "audit", "", "the audit trail `DIR` to record the revocations in (as the brokers' --audit); default the config file's audit.dir, else <state-dir>/audit")
	dir, err := parseGrantsFlags(fs, args, &tf)
	if err != nil {
		return err
	}
	if f.Path != "" && strings.Trim(f.Path, "/") != "" {
		f.Path = strings.TrimRight(f.Path, "/") // "proj/dir/" is proj/dir
	}
	switch {
	case f.All && (f.Server != "" || f.Path != "" || f.ID != ""):
		return configErrorf("grants revoke: --all revokes every grant; it cannot be combined with --server, --path or --id")
	case !f.All && f.Server == "" && f.Path == "" && f.ID == "":
		return configErrorf("grants revoke: give --server, --path or --id (or --all, alone, for every grant)")
	}
	if f.Path != "" {
		if err := grants.ValidPath(f.Path); err != nil {
			return configErrorf("--path %q: want a mount-relative path such as proj/dir: %v", f.Path,
				strings.TrimPrefix(err.Error(), grants.ErrInvalid.Error()+": "))
		}
	}
	s, err := openGrants(dir)
	if err != nil {
		return err
	}
	if s == nil {
		fmt.Fprintln(stderr, "fsbroker: no grant matches: there are no grants in", dir)
		return &exitCodeError{code: exitFailure}
	}
	defer s.Close()
	revoked, revokeErr := revokeBoth(s, f)
	if errors.Is(revokeErr, grants.ErrInvalid) {
		return &configError{msg: revokeErr.Error()}
	}
	if len(revoked) > 0 {
		fmt.Fprintf(stdout, "revoked %d grant(s):\n", len(revoked))
		if err := printGrants(stdout, revoked, nil, time.Now()); err != nil {
			return fmt.Errorf("write: %w", err)
		}
	}
	if len(revoked) > 0 {
		if err := recordRevocations(&tf, revoked); err != nil {
			fmt.Fprintln(stderr, "fsbroker: the grants are revoked, but the audit trail does not show it:", err)
			return &exitCodeError{code: exitFailure}
		}
	}
	if revokeErr != nil {
		return grantsReadFailure(stderr, revokeErr)
	}
	if len(revoked) > 0 {
		return nil
	}
	fmt.Fprintln(stderr, "fsbroker: no grant matches")
	if f.Path != "" {
		explainBroader(s, f, stderr)
	}
	return &exitCodeError{code: exitFailure}
}

// explainBroader names the grants that cover f.Path from above, which a revocation of the
// path does not touch.
func explainBroader(s *grants.Store, f grants.RevokeFilter, stderr io.Writer) {
	var gs []grants.Grant
	if f.Server != "" {
		gs, _ = listBoth(s, f.Server)
	} else {
		gs, _ = s.ListAll()
	}
	for _, g := range gs {
		if g.Path == f.Path || !g.CoversPath(f.Path) || f.ID != "" && g.ID != f.ID {
			continue
		}
		fmt.Fprintf(stderr, "fsbroker: but the %s grant %s of server %s on %s covers %s and everything beneath it; a grant cannot be narrowed: to take %s away, revoke that grant (fsbroker grants revoke --id %s)\n",
			g.Access, g.ID, cell(g.Server), cell(g.Path), cell(f.Path), cell(f.Path), g.ID)
	}
}

// brokerRoots resolves the roots of the broker a grants command is told of: the config
// file's, then the --root flags; nil when neither gives any (the roots are then unknown).
func brokerRoots(configPath string, flags []string) (*roots.Set, error) {
	var specs []roots.Spec
	if configPath != "" {
		v, err := schema.New()
		if err != nil {
			return nil, fmt.Errorf("compile schemas: %w", err)
		}
		cfg, err := loadConfig(configPath, v)
		if err != nil {
			return nil, err
		}
		specs = cfg.rootSpecs(configPath)
	}
	for _, f := range flags {
		spec, err := roots.ParseFlag(f)
		if err != nil {
			return nil, &configError{msg: err.Error()}
		}
		specs = append(specs, spec)
	}
	if len(specs) == 0 {
		return nil, nil
	}
	set, err := roots.New(specs)
	if err != nil {
		return nil, &configError{msg: err.Error()}
	}
	return set, nil
}

// The states of a grant's root, as list --json names them.
const (
	rootSame      = "same"      // its mount names the directory it was granted under
	rootChanged   = "changed"   // its mount names another directory now: the grant counts for nothing
	rootUnmounted = "unmounted" // no root has its mount now
	rootUnknown   = "unknown"   // granted before grants recorded their root: it covers nothing
	rootUnchecked = "unchecked" // the broker's roots were not given
)

// rootStatus compares a grant's root with the root its mount names in current (nil: not
// known), and describes it for the table.
func rootStatus(g grants.Grant, current *roots.Set) (status, note string) {
	switch {
	case !g.Root.Known():
		return rootUnknown, "unknown (granted before grants recorded their root: covers nothing)"
	case current == nil:
		return rootUnchecked, cell(g.Root.Path)
	}
	r, ok := current.ByMount(g.Mount())
	switch {
	case !ok:
		return rootUnmounted, cell(g.Root.Path) + " (no root is mounted as " + cell(g.Mount()) + " now)"
	case g.Root.Same(grants.RootOf(r)):
		return rootSame, cell(g.Root.Path)
	case r.Path != g.Root.Path:
		return rootChanged, cell(g.Root.Path) + " (root changed: " + cell(g.Mount()) + " is " + cell(r.Path) + " now; covers nothing)"
	}
	return rootChanged, cell(g.Root.Path) + " (root changed: another directory at that path now; covers nothing)"
}

// printGrants prints grants as an aligned table, each grant's root compared with the
// broker's current roots (nil: not known).
func printGrants(w io.Writer, gs []grants.Grant, current *roots.Set, now time.Time) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "SERVER\tACCESS\tPATH\tROOT\tGRANTED\tEXPIRES\tBY\tID")
	for _, g := range gs {
		expires := "never"
		if !g.Expires.IsZero() {
			expires = g.Expires.UTC().Format(time.RFC3339)
			if !g.Live(now) {
				expires += " (expired)"
			}
		}
		_, root := rootStatus(g, current)
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", cell(g.Server), g.Access, cell(g.Path), root,
			g.Granted.UTC().Format(time.RFC3339), expires, cell(g.By), g.ID)
	}
	return tw.Flush()
}

// grantJSON is a grant as list --json prints it.
type grantJSON struct {
	grants.Grant
	RootStatus string `json:"rootStatus"`
	Expired    bool   `json:"expired"`
}

// printGrantsJSON prints grants as one JSON array.
func printGrantsJSON(w io.Writer, gs []grants.Grant, current *roots.Set, now time.Time) error {
	out := make([]grantJSON, len(gs))
	for i, g := range gs {
		status, _ := rootStatus(g, current)
		out[i] = grantJSON{Grant: g, RootStatus: status, Expired: !g.Live(now)}
	}
	b, err := json.MarshalIndent(out, "", "  ")
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "%s\n", b)
	return err
}

// recordRevocations writes one grant record per revoked grant to the audit
// trail the brokers on this state directory write (in a segment of this
// process's own). The path is left out (the trail may redact paths, and the
// grant record written when consent was given holds it): the grant id links
// the two.
func recordRevocations(tf *trailFlags, revoked []grants.Grant) error {
	state, err := tf.state()
	if err != nil {
		return err
	}
	o := &options{stateDir: state, auditDir: tf.auditPath, auditSync: "always", auditSegment: audit.DefaultMaxSegmentBytes,
		auditSegmentAge: audit.DefaultMaxSegmentAge}
	w, err := openAudit(o)
	if err != nil {
		return err
	}
	for _, g := range revoked {
		server, declared := strings.CutPrefix(g.Server, broker.DeclaredPrefix)
		detail := "revoked " + g.ID + " with fsbroker grants revoke"
		if declared {
			detail += " (a declared name's grant)"
		}
		rec := audit.Record{Kind: audit.KindGrant, Server: server, Method: "grants/revoke", Operation: string(g.Access),
			Allow: audit.Bool(false), Detail: detail}
		if _, err := w.Append(context.Background(), rec); err != nil {
			w.Close()
			return err
		}
	}
	return w.Close()
}

// serverKeys are the grant-store keys --server S names: the pinned id S, and
// the declared name S (kept as broker.DeclaredPrefix+S, so that a server
// declaring a pinned id's name never holds its grants).
func serverKeys(server string) []string {
	if strings.HasPrefix(server, broker.DeclaredPrefix) {
		return []string{server}
	}
	return []string{server, broker.DeclaredPrefix + server}
}

// listBoth lists the grants of every key --server S names.
func listBoth(s *grants.Store, server string) ([]grants.Grant, error) {
	var all []grants.Grant
	var errs []error
	for _, key := range serverKeys(server) {
		gs, err := s.List(key)
		all = append(all, gs...)
		if err != nil {
			errs = append(errs, err)
		}
	}
	return all, errors.Join(errs...)
}

// revokeBoth revokes for every key --server S names.
func revokeBoth(s *grants.Store, f grants.RevokeFilter) ([]grants.Grant, error) {
	if f.Server == "" {
		return s.Revoke(f)
	}
	var all []grants.Grant
	var errs []error
	for _, key := range serverKeys(f.Server) {
		g := f
		g.Server = key
		revoked, err := s.Revoke(g)
		all = append(all, revoked...)
		if err != nil {
			errs = append(errs, err)
		}
	}
	return all, errors.Join(errs...)
}
