// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/fsbroker/fsbroker/audit"
	"github.com/fsbroker/fsbroker/broker"
	"github.com/fsbroker/fsbroker/broker/grants"
	"github.com/fsbroker/fsbroker/broker/roots"
	"github.com/fsbroker/fsbroker/schema"
)

const grantsLong = `Show and take back the consent the broker keeps in <state-dir>/grants: grants
(which MCP server may read, or read and write, which paths: mount-relative, as
"proj/docs"; a grant covers its path and everything beneath it), and blocks of
the operator's pre-approvals (roots[].consent: preapproved in the config file).
The state directory is --state-dir, else the stateDir of the --config FILE,
else the default: the broker resolves it the same way, so --config FILE alone
finds the grants of a broker started with that file. See docs/consent.md.`

const grantsExample = `  # What each server may read and write
  fsbroker grants list

  # Take a server's access to a path away, in running brokers too (within 1 s)
  fsbroker grants revoke --server notes --path proj/private

  # Lift the blocks of pre-approved access revoke made for a server
  fsbroker grants restore --server notes`

const grantsListHelp = `Print the consent grants: server (as the audit trail names it: the pinned id,
or the name the server declared; IDENTITY says which), access (read, or write
which includes read), path, the root directory its mount named when it was granted, when granted,
when it expires, the consent provider that granted it, and its id (for
fsbroker grants revoke --id). Expired grants are shown, marked expired, until
the broker next changes that server's grants; they grant nothing.

Then the roots the operator pre-approves (from --config FILE), which every
server may use without a grant, and the blocks that take that pre-approved
access away (fsbroker grants revoke): for one server or every server, on a
path and beneath it or on every path, when and by whom, and the id for
fsbroker grants restore --id. A grant covers its path, block or not.

A grant counts only while its mount names the directory it was granted under
(the same path, device and inode). Given the broker's roots (--config FILE,
whose roots are read, and --root flags, as the broker takes them), list marks
each grant whose root changed or whose mount is not configured; a grant from
before grants recorded their root is marked too: it covers nothing.

--json prints one object: {"grants": [...], "preapprovals": [...], "blocks": [...]}.

Exit status: 0 ok (nothing listed included); 1 a grants file could not be read
(the others are printed; the broker grants nothing from such a file, and treats
a file of blocks it cannot read as blocking); 2 bad flags.
`

const grantsRevokeHelp = `Take consent away. The grants that match every selector given are revoked:
--server (one server's), --path (those on PATH and beneath it), --id (one
grant); --all, alone, revokes every grant of every server. And, unless --id is
given, the operator's pre-approved access is blocked for the same selection:
--server S blocks S (on --path P and beneath it, else everywhere), --path P
alone blocks every server there (servers never seen included), --all blocks
every server everywhere. A block is kept in the state directory, restarts
included, until fsbroker grants restore lifts it; a server that asks again and
is approved holds a grant, which covers, block or not.

A running broker refuses new requests under a revoked grant or a block within
1 second, and ends the server's watches there. Each revocation and each new
block is recorded in the audit trail. --config FILE and --root DIR name the
broker's roots, so that a block records which directory its path's mount
named.

A grant cannot be narrowed: revoking proj/dir leaves a grant on proj whole, and
it still covers proj/dir. When such a broader grant remains, revoke names it;
revoke that one (--id) to take the path away.

Exit status: 0 revoked or blocked; 1 nothing matched (--id), a broader grant
still covers the path, a grants file could not be read or changed, or the audit
trail could not record it; 2 bad flags.
`

const grantsRestoreHelp = `Lift the blocks of pre-approved access (made by fsbroker grants revoke) that
match every selector given: --server (the blocks of one server, not those for
every server), --path (the blocks on PATH and beneath it, not a broader one),
--id (one block); --all, alone, lifts every block. Running brokers allow the
pre-approved access again within 1 second. Each lifted block is recorded in the
audit trail.

When a block that was not selected still applies to the server or path (a
block for every server, a broader path), restore names it; lift that one
(--id) too.

Exit status: 0 lifted; 1 nothing matched, a grants file could not be read or
changed, or the audit trail could not record it; 2 bad flags.
`

// newGrantsCommand returns `fsbroker grants list|revoke|restore`.
func newGrantsCommand() *cobra.Command {
	return newGroupCommand(&cobra.Command{
		Use:     "grants COMMAND",
		Short:   "show and take back consent grants, and block pre-approved roots (list, revoke, restore)",
		Long:    grantsLong,
		Example: grantsExample,
	},
		leafCommand(&cobra.Command{
			Use:   "list",
			Short: "print the grants, the pre-approved roots and the blocks",
			Long:  grantsListHelp,
			Example: `  fsbroker grants list
  fsbroker grants list --config /etc/fsbroker/fsbroker.yaml --server notes --json`,
			Args: noArgs,
		}, grantsList),
		leafCommand(&cobra.Command{
			Use:   "revoke",
			Short: "take grants away and block pre-approved access, in running brokers too",
			Long:  grantsRevokeHelp,
			Example: `  fsbroker grants revoke --server notes
  fsbroker grants revoke --path proj/private
  fsbroker grants revoke --id 3f2a9c`,
			Args: noArgs,
		}, grantsRevoke),
		leafCommand(&cobra.Command{
			Use:   "restore",
			Short: "lift blocks of pre-approved access",
			Long:  grantsRestoreHelp,
			Example: `  fsbroker grants restore --server notes
  fsbroker grants restore --all`,
			Args: noArgs,
		}, grantsRestore),
	)
}

// registerGrantsState registers the flags of a grants command that locate the state directory,
// bound to tf (whose applyConfig and state resolve it as the audit commands and the broker do).
func registerGrantsState(fs *pflag.FlagSet, tf *trailFlags) {
	fs.StringVar(&tf.stateDir, "state-dir", "", "the broker's state `DIR` (the grants are in DIR/grants); default the config file's stateDir, else $XDG_STATE_HOME/fsbroker or ~/.local/state/fsbroker")
	fs.StringVar(&tf.configPath, "config", "", "the broker's config `FILE`: its stateDir stands in for --state-dir when that is not given, and its roots are the broker's roots")
}

// rootFlag registers --root on a grants command: the broker's roots besides the config file's.
func rootFlag(fs *pflag.FlagSet, dst *[]string, use string) {
	fs.Func("root", "a root `DIR` of the broker, as its --root (DIR:rw allowed); repeatable: "+use, func(v string) error {
		*dst = append(*dst, v)
		return nil
	})
}

// grantsDir resolves the grants directory once a grants command's flags are parsed.
func grantsDir(tf *trailFlags) (string, error) {
	if err := tf.applyConfig(); err != nil {
		return "", err
	}
	state, err := tf.state()
	if err != nil {
		return "", err
	}
	return filepath.Join(state, grants.DirName), nil
}

// selectorFlags registers the selectors of revoke and restore in f, and --audit in tf: help
// holds the usage of --server, --path, --id and --all, then what --audit records.
func selectorFlags(fs *pflag.FlagSet, f *grants.RevokeFilter, tf *trailFlags, help [5]string) {
	fs.StringVar(&f.Server, "server", "", help[0])
	fs.StringVar(&f.Path, "path", "", help[1])
	fs.StringVar(&f.ID, "id", "", help[2])
	fs.BoolVar(&f.All, "all", false, help[3])
	fs.StringVar(&tf.auditPath, "audit", "", "the audit trail `DIR` to record "+help[4]+" in (as the brokers' --audit); default the config file's audit.dir, else <state-dir>/audit")
}

// selectorsDir is grantsDir for revoke and restore, which then checks the selectors in f
// (selectors).
func selectorsDir(tf *trailFlags, verb, what string, f *grants.RevokeFilter) (string, error) {
	dir, err := grantsDir(tf)
	if err != nil {
		return "", err
	}
	return dir, selectors(verb, what, f)
}

// selectors checks the selectors of revoke and restore (what names the verb's objects): --all
// alone, or at least one of --server, --path and --id; a path with a trailing "/" is the path.
func selectors(verb, what string, f *grants.RevokeFilter) error {
	if f.Path != "" && strings.Trim(f.Path, "/") != "" {
		f.Path = strings.TrimRight(f.Path, "/") // "proj/dir/" is proj/dir
	}
	switch {
	case f.All && (f.Server != "" || f.Path != "" || f.ID != ""):
		return configErrorf("grants %s: --all %s every %s; it cannot be combined with --server, --path or --id", verb, verb+"s", what)
	case !f.All && f.Server == "" && f.Path == "" && f.ID == "":
		return configErrorf("grants %s: give --server, --path or --id (or --all, alone, for every %s)", verb, what)
	}
	if f.Path != "" {
		if err := grants.ValidPath(f.Path); err != nil {
			return configErrorf("--path %q: want a mount-relative path such as proj/dir: %v", f.Path,
				strings.TrimPrefix(err.Error(), grants.ErrInvalid.Error()+": "))
		}
	}
	return nil
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

// grantsList registers the flags of `fsbroker grants list` and returns what runs it.
func grantsList(fs *pflag.FlagSet) func(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var tf trailFlags
	registerGrantsState(fs, &tf)
	server := fs.String("server", "", "only the grants and blocks of the server `ID` (its pinned id, else its declared name), and the blocks for every server")
	asJSON := fs.Bool("json", false, `print one JSON object: "grants" (id, access, path, root when known, granted, expires when set, by, server and pinned (named as in the audit trail), rootStatus, expired), "preapprovals" (mount, path, access) and "blocks" (id, path when not every path, root when known, blocked, by, server, pinned, everyServer)`)
	var rootFlags []string
	rootFlag(fs, &rootFlags, "grants whose root changed are marked")
	return func(_ context.Context, _ []string, stdout, stderr io.Writer) error {
		dir, err := grantsDir(&tf)
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
			bs      []grants.Block
			readErr error
		)
		if s != nil {
			defer s.Close()
			var gErr, bErr error
			if *server != "" {
				gs, gErr = listBoth(s, *server)
				bs, bErr = blocksBoth(s, *server)
			} else {
				gs, gErr = s.ListAll()
				bs, bErr = s.ListBlocks()
			}
			readErr = errors.Join(gErr, bErr)
			if errors.Is(readErr, grants.ErrInvalid) {
				return configErrorf("--server: %v", readErr)
			}
		}
		pre := preapprovals(current)
		now := time.Now()
		if *asJSON {
			err = printListJSON(stdout, gs, pre, bs, current, now)
		} else {
			err = printList(stdout, gs, pre, bs, current, now)
		}
		if err != nil {
			return fmt.Errorf("write: %w", err)
		}
		if readErr != nil {
			return grantsReadFailure(stderr, readErr)
		}
		if len(gs) == 0 && len(pre) == 0 && len(bs) == 0 && !*asJSON {
			fmt.Fprintln(stderr, "fsbroker: no grants, pre-approvals or blocks in", dir)
		}
		return nil
	}
}

// grantsReadFailure reports grants files that could not be read or changed, and ends the
// command with status 1.
func grantsReadFailure(stderr io.Writer, err error) error {
	for _, line := range strings.Split(err.Error(), "\n") {
		fmt.Fprintln(stderr, "fsbroker:", line)
	}
	if errors.Is(err, grants.ErrCorrupt) {
		fmt.Fprintln(stderr, "fsbroker: the broker grants nothing from a corrupt file, and treats a corrupt file of blocks as blocking: restore it, or remove it to revoke all of that server's grants and lift its blocks")
	}
	return &exitCodeError{code: exitFailure}
}

// grantsRevoke runs `fsbroker grants revoke`: it blocks the pre-approved access the selectors
// name (not with --id), then revokes the grants they match, so that at no moment does the
// server hold more than before; then it records both in the audit trail.
func grantsRevoke(fs *pflag.FlagSet) func(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var (
		tf        trailFlags
		f         grants.RevokeFilter
		rootFlags []string
	)
	registerGrantsState(fs, &tf)
	selectorFlags(fs, &f, &tf, [5]string{
		"the grants of the server `ID` (its pinned id, else its declared name), and its pre-approved access",
		"the grants on the mount-relative `PATH` (proj/dir) and beneath it, not a broader grant; and pre-approved access there",
		"the grant `ID` (from fsbroker grants list); no block is made",
		"every grant of every server, and every server's pre-approved access (alone: not with another selector)",
		"the revocations and blocks"})
	rootFlag(fs, &rootFlags, "a block records the directory its path's mount names")
	return func(_ context.Context, _ []string, stdout, stderr io.Writer) error {
		dir, err := selectorsDir(&tf, "revoke", "grant", &f)
		if err != nil {
			return err
		}
		current, err := brokerRoots(tf.configPath, rootFlags)
		if err != nil {
			return err
		}
		blocks := blocksOf(f, current, revokeTool+" by "+operator())
		var s *grants.Store
		if len(blocks) > 0 {
			// A block needs the grants directory: made in an existing state directory only, so
			// that a mistyped --state-dir is not taken for a new one.
			if _, err := os.Stat(filepath.Dir(dir)); err != nil {
				return configErrorf("--state-dir %s: %v", filepath.Dir(dir), err)
			}
			if s, err = grants.Open(dir); err != nil {
				return configErrorf("--state-dir: %v", err)
			}
		} else if s, err = openGrants(dir); err != nil {
			return err
		}
		if s == nil {
			fmt.Fprintln(stderr, "fsbroker: no grant matches: there are no grants in", dir)
			return &exitCodeError{code: exitFailure}
		}
		defer s.Close()
		r := revoke(s, f, blocks)
		revoked, added, kept := r.revoked, r.added, r.kept
		if errors.Is(r.revokeErr, grants.ErrInvalid) {
			return &configError{msg: r.revokeErr.Error()}
		}
		if len(revoked) > 0 {
			fmt.Fprintf(stdout, "revoked %d grant(s):\n", len(revoked))
			if err := printGrants(stdout, revoked, nil, time.Now()); err != nil {
				return fmt.Errorf("write: %w", err)
			}
		}
		for _, part := range []struct {
			title string
			bs    []grants.Block
		}{{"blocked pre-approved access", added}, {"already blocked", kept}} {
			if len(part.bs) > 0 {
				fmt.Fprintf(stdout, "%s (fsbroker grants restore lifts a block):\n", part.title)
				if err := printBlocks(stdout, part.bs); err != nil {
					return fmt.Errorf("write: %w", err)
				}
			}
		}
		if recs := r.records(revokeTool); len(recs) > 0 {
			if err := recordGrantChanges(&tf, recs); err != nil {
				fmt.Fprintln(stderr, "fsbroker: the grants are revoked and the blocks in place, but the audit trail does not show it:", err)
				return &exitCodeError{code: exitFailure}
			}
		}
		if err := errors.Join(append(r.blockErrs, r.revokeErr)...); err != nil {
			return grantsReadFailure(stderr, err)
		}
		broader := f.Path != "" && explainBroader(s, f, stderr)
		switch {
		case len(revoked) == 0 && len(added) == 0 && len(kept) == 0:
			fmt.Fprintln(stderr, "fsbroker: no grant matches")
			return &exitCodeError{code: exitFailure}
		case broader:
			return &exitCodeError{code: exitFailure}
		}
		return nil
	}
}

// The tools that change grants, as their records and blocks name them.
const (
	revokeTool  = "fsbroker grants revoke"
	restoreTool = "fsbroker grants restore"
)

// revocation is what revoke did.
type revocation struct {
	revoked     []grants.Grant
	added, kept []grants.Block // blocks made, and blocks that were there already
	blockErrs   []error
	revokeErr   error
}

// revoke makes blocks, then revokes the grants f matches: so that at no moment does the
// server hold more than before. It is grants revoke's change, and fsbroker console's revoke
// button's; the records are the caller's to write (records).
func revoke(s *grants.Store, f grants.RevokeFilter, blocks []grants.Block) revocation {
	var r revocation
	for _, b := range blocks {
		stored, isNew, err := s.Block(b)
		switch {
		case err != nil:
			r.blockErrs = append(r.blockErrs, err)
		case isNew:
			r.added = append(r.added, stored)
		default:
			r.kept = append(r.kept, stored)
		}
	}
	r.revoked, r.revokeErr = revokeBoth(s, f)
	return r
}

// records are the audit records of what the revocation changed, made with tool.
func (r *revocation) records(tool string) []audit.Record {
	return append(revocationRecords(r.revoked, tool), blockRecords("grants/revoke", false, r.added, tool)...)
}

// blocksOf returns the blocks a revocation with f makes: none for --id (it names one grant);
// for --all one for every server on every path; for --server S one for each identity S
// names (the pinned id and the declared name), on --path or every path; for --path alone one
// for every server there. A path's block records the root its mount names in current (the
// broker's roots, nil when not given).
func blocksOf(f grants.RevokeFilter, current *roots.Set, by string) []grants.Block {
	if f.ID != "" {
		return nil
	}
	b := grants.Block{Server: grants.AllServers, By: by}
	if !f.All {
		b.Path = f.Path
	}
	if current != nil && b.Path != "" {
		if r, ok := current.ByMount(b.Mount()); ok {
			b.Root = grants.RootOf(r)
		}
	}
	if f.Server == "" {
		return []grants.Block{b}
	}
	var out []grants.Block
	for _, key := range serverKeys(f.Server) {
		b.Server = key
		out = append(out, b)
	}
	return out
}

// operator names who runs the command, for a block's By and the audit trail: the user name
// and uid.
func operator() string {
	u, err := user.Current()
	if err != nil {
		return fmt.Sprintf("uid %d", os.Getuid())
	}
	return fmt.Sprintf("%s (uid %s)", u.Username, u.Uid)
}

// grantsRestore registers the flags of `fsbroker grants restore` and returns what runs it.
func grantsRestore(fs *pflag.FlagSet) func(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var (
		tf trailFlags
		f  grants.RevokeFilter
	)
	registerGrantsState(fs, &tf)
	selectorFlags(fs, &f, &tf, [5]string{
		"the blocks of the server `ID` (its pinned id, else its declared name); not those for every server",
		"the blocks on the mount-relative `PATH` (proj/dir) and beneath it; not a broader block",
		"the block `ID` (from fsbroker grants list)",
		"every block (alone: not with another selector)",
		"the restores"})
	return func(_ context.Context, _ []string, stdout, stderr io.Writer) error {
		dir, err := selectorsDir(&tf, "restore", "block", &f)
		if err != nil {
			return err
		}
		s, err := openGrants(dir)
		if err != nil {
			return err
		}
		if s == nil {
			fmt.Fprintln(stderr, "fsbroker: no block matches: there are no grants or blocks in", dir)
			return &exitCodeError{code: exitFailure}
		}
		defer s.Close()
		restored, restoreErr := restoreBoth(s, f)
		if errors.Is(restoreErr, grants.ErrInvalid) {
			return &configError{msg: restoreErr.Error()}
		}
		if len(restored) > 0 {
			fmt.Fprintf(stdout, "lifted %d block(s):\n", len(restored))
			if err := printBlocks(stdout, restored); err != nil {
				return fmt.Errorf("write: %w", err)
			}
			if err := recordGrantChanges(&tf, blockRecords("grants/restore", true, restored, restoreTool)); err != nil {
				fmt.Fprintln(stderr, "fsbroker: the blocks are lifted, but the audit trail does not show it:", err)
				return &exitCodeError{code: exitFailure}
			}
		}
		if restoreErr != nil {
			return grantsReadFailure(stderr, restoreErr)
		}
		if len(restored) == 0 {
			fmt.Fprintln(stderr, "fsbroker: no block matches")
		}
		explainRemainingBlocks(s, f, stderr) // what is left blocks, which errs on the safe side: a note
		if len(restored) == 0 {
			return &exitCodeError{code: exitFailure}
		}
		return nil
	}
}

// explainBroader names the grants that cover f.Path from above, which a revocation of the
// path does not touch, and reports whether there are any.
func explainBroader(s *grants.Store, f grants.RevokeFilter, stderr io.Writer) bool {
	var gs []grants.Grant
	if f.Server != "" {
		gs, _ = listBoth(s, f.Server)
	} else {
		gs, _ = s.ListAll()
	}
	found := false
	for _, g := range gs {
		if g.Path == f.Path || !g.CoversPath(f.Path) || f.ID != "" && g.ID != f.ID {
			continue
		}
		found = true
		name, kind := serverIdentity(g.Server)
		fmt.Fprintf(stderr, "fsbroker: but the %s grant %s of server %s (%s) on %s covers %s and everything beneath it; a grant cannot be narrowed: to take %s away, revoke that grant (fsbroker grants revoke --id %s)\n",
			g.Access, g.ID, name, kind, cell(g.Path), cell(f.Path), cell(f.Path), g.ID)
	}
	return found
}

// explainRemainingBlocks names the blocks left after a restore with f that still apply to what
// it named: for the server (its own, and those for every server) or any server, on the path
// (above it, on it or beneath it) or anywhere. A restore of one --id, or of --all, names
// nothing.
func explainRemainingBlocks(s *grants.Store, f grants.RevokeFilter, stderr io.Writer) {
	if f.All || f.Server == "" && f.Path == "" {
		return
	}
	var bs []grants.Block
	if f.Server != "" {
		bs, _ = blocksBoth(s, f.Server)
	} else {
		bs, _ = s.ListBlocks()
	}
	area := grants.Block{Path: f.Path} // every path when no --path
	for _, b := range bs {
		if !b.CoversPath(f.Path) && (b.Path == "" || !area.CoversPath(b.Path)) {
			continue // elsewhere
		}
		whose := "(every server)"
		if name, kind := blockServer(b); !b.EveryServer() {
			whose = name + " (" + kind + ")"
		}
		fmt.Fprintf(stderr, "fsbroker: but the block %s of %s on %s still applies there; lift it with fsbroker grants restore --id %s\n",
			b.ID, whose, blockPath(b), b.ID)
	}
}

// brokerRoots resolves the roots of the broker a grants command is told of: the config file's,
// then the --root flags; nil when neither gives any (the roots are then unknown).
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
	fmt.Fprintln(tw, "SERVER\tIDENTITY\tACCESS\tPATH\tROOT\tGRANTED\tEXPIRES\tBY\tID")
	for _, g := range gs {
		expires := "never"
		if !g.Expires.IsZero() {
			expires = g.Expires.UTC().Format(time.RFC3339)
			if !g.Live(now) {
				expires += " (expired)"
			}
		}
		_, root := rootStatus(g, current)
		name, kind := serverIdentity(g.Server)
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", name, kind, g.Access, cell(g.Path), root,
			g.Granted.UTC().Format(time.RFC3339), expires, cell(g.By), g.ID)
	}
	return tw.Flush()
}

// preapproval is a root the operator pre-approves, as list shows it.
type preapproval struct {
	Mount  string `json:"mount"`
	Path   string `json:"path"`
	Access string `json:"access"`
}

// preapprovals returns the pre-approved roots of current (nil: none known).
func preapprovals(current *roots.Set) []preapproval {
	var out []preapproval
	if current == nil {
		return out
	}
	for _, r := range current.All() {
		if !r.Preapproved {
			continue
		}
		access := string(grants.Read)
		if r.Writable {
			access = string(grants.Write)
		}
		out = append(out, preapproval{Mount: r.Mount, Path: r.Path, Access: access})
	}
	return out
}

// printList prints list's tables: the grants (the table alone when there is nothing else),
// then, each under a heading, the pre-approved roots and the blocks.
func printList(w io.Writer, gs []grants.Grant, pre []preapproval, bs []grants.Block, current *roots.Set, now time.Time) error {
	if len(gs) > 0 {
		if err := printGrants(w, gs, current, now); err != nil {
			return err
		}
	}
	if len(pre) > 0 {
		if len(gs) > 0 {
			fmt.Fprintln(w)
		}
		fmt.Fprintln(w, "pre-approved roots (every server may use them without a grant, where no block applies):")
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "MOUNT\tACCESS\tROOT")
		for _, p := range pre {
			fmt.Fprintf(tw, "%s\t%s\t%s\n", cell(p.Mount), p.Access, cell(p.Path))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	if len(bs) > 0 {
		if len(gs) > 0 || len(pre) > 0 {
			fmt.Fprintln(w)
		}
		fmt.Fprintln(w, "blocks (pre-approved access taken away; a grant still covers; fsbroker grants restore lifts a block):")
		return printBlocks(w, bs)
	}
	return nil
}

// printBlocks prints blocks as an aligned table.
func printBlocks(w io.Writer, bs []grants.Block) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "SERVER\tIDENTITY\tPATH\tROOT\tBLOCKED\tBY\tID")
	for _, b := range bs {
		root := "-"
		if b.Root.Known() {
			root = cell(b.Root.Path)
		}
		name, kind := blockServer(b)
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", name, kind, blockPath(b), root,
			b.Blocked.UTC().Format(time.RFC3339), cell(b.By), b.ID)
	}
	return tw.Flush()
}

// blockServer names a block's server for a person, as serverIdentity does: "(every server)"
// and "-" for a block of every server.
func blockServer(b grants.Block) (name, kind string) {
	if b.EveryServer() {
		return "(every server)", "-"
	}
	return serverIdentity(b.Server)
}

// serverIdentity names the server of a grant or block store key for a person as the audit
// trail names it (its pinned id, or the name it declared: broker.IdentityOf), and says which
// of the two it is: "pinned" or "declared".
func serverIdentity(key string) (name, kind string) {
	id, pinned := broker.IdentityOf(key)
	if pinned {
		return cell(id), "pinned"
	}
	return cell(id), "declared"
}

// blockPath names a block's path for a person: "(every path)" for a block of every path.
func blockPath(b grants.Block) string {
	if b.Path == "" {
		return "(every path)"
	}
	return cell(b.Path)
}

// grantJSON is a grant as list --json prints it: its server named as the audit trail names
// it, with whether that identity is pinned.
type grantJSON struct {
	grants.Grant
	Server     string `json:"server"`
	Pinned     bool   `json:"pinned"`
	RootStatus string `json:"rootStatus"`
	Expired    bool   `json:"expired"`
}

// blockJSON is a block as list --json prints it, its server named as in grantJSON.
type blockJSON struct {
	grants.Block
	Server      string `json:"server"`
	Pinned      bool   `json:"pinned"`
	EveryServer bool   `json:"everyServer"`
}

// listJSON is what list --json prints.
type listJSON struct {
	Grants       []grantJSON   `json:"grants"`
	Preapprovals []preapproval `json:"preapprovals"`
	Blocks       []blockJSON   `json:"blocks"`
}

// printListJSON prints list's result as one JSON object.
func printListJSON(w io.Writer, gs []grants.Grant, pre []preapproval, bs []grants.Block, current *roots.Set, now time.Time) error {
	out := listJSON{Grants: make([]grantJSON, len(gs)), Preapprovals: pre, Blocks: make([]blockJSON, len(bs))}
	if out.Preapprovals == nil {
		out.Preapprovals = []preapproval{}
	}
	for i, g := range gs {
		status, _ := rootStatus(g, current)
		id, pinned := broker.IdentityOf(g.Server)
		out.Grants[i] = grantJSON{Grant: g, Server: id, Pinned: pinned, RootStatus: status, Expired: !g.Live(now)}
	}
	for i, b := range bs {
		id, pinned := broker.IdentityOf(b.Server)
		out.Blocks[i] = blockJSON{Block: b, Server: id, Pinned: pinned && !b.EveryServer(), EveryServer: b.EveryServer()}
	}
	b, err := json.MarshalIndent(out, "", "  ")
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "%s\n", b)
	return err
}

// revocationRecords are the records of grants revoked with tool: one grant record each, with
// no path (the trail may redact paths, and the grant record written when consent was given
// holds it): the grant id links the two.
func revocationRecords(revoked []grants.Grant, tool string) []audit.Record {
	var recs []audit.Record
	for _, g := range revoked {
		server, pinned := broker.IdentityOf(g.Server)
		detail := "revoked " + g.ID + " with " + tool
		if !pinned {
			detail += " (a declared name's grant)"
		}
		recs = append(recs, audit.Record{Kind: audit.KindGrant, Server: server, Method: "grants/revoke", Operation: string(g.Access),
			Allow: audit.Bool(false), Detail: detail})
	}
	return recs
}

// blockRecords are the records of blocks made (method grants/revoke, allow false) or lifted
// (grants/restore, allow true): one grant record each, naming the block's id, its server
// (none for a block of every server) and who did it; like a revocation's, the record holds no
// path (the trail may redact paths): the block's id links it to the block, which grants list
// shows while it stands. tool is what lifted them.
func blockRecords(method string, lifted bool, bs []grants.Block, tool string) []audit.Record {
	var recs []audit.Record
	for _, b := range bs {
		server, pinned := broker.IdentityOf(b.Server)
		whose := "server " + strconv.Quote(server)
		switch {
		case b.EveryServer():
			whose = "every server"
		case !pinned:
			whose = "the declared name " + strconv.Quote(server)
		}
		where := "a path"
		if b.Path == "" {
			where = "every path"
		}
		verb, by := "blocked", b.By
		if lifted {
			verb, by = "lifted the block", tool+" by "+operator()
		}
		recs = append(recs, audit.Record{Kind: audit.KindGrant, Server: server, Method: method,
			Allow: audit.Bool(lifted), Detail: audit.TruncateDetail(fmt.Sprintf("%s %s: pre-approved access of %s to %s, with %s",
				verb, b.ID, whose, where, by))})
	}
	return recs
}

// openGrantsTrail opens the audit writer the grants commands record their
// changes with: a segment of their own in the trail of tf, synced at each
// record.
func openGrantsTrail(tf *trailFlags) (*audit.Writer, error) {
	state, err := tf.state()
	if err != nil {
		return nil, err
	}
	o := &options{stateDir: state, auditDir: tf.auditPath, auditSync: "always", auditSegment: audit.DefaultMaxSegmentBytes,
		auditSegmentAge: audit.DefaultMaxSegmentAge}
	return openAudit(o)
}

// recordGrantChanges writes records of revocations, blocks and restores to the audit trail
// the brokers on this state directory write (in a segment of this process's own).
func recordGrantChanges(tf *trailFlags, recs []audit.Record) error {
	w, err := openGrantsTrail(tf)
	if err != nil {
		return err
	}
	for _, rec := range recs {
		if _, err := w.Append(context.Background(), rec); err != nil {
			w.Close()
			return err
		}
	}
	return w.Close()
}

// serverKeys are the grant-store keys --server S names: the pinned id S, and
// the declared name S (broker.StateKeyOf keeps them apart, so that a server
// declaring a pinned id's name never holds its grants). "declared:S" names
// the declared name alone.
func serverKeys(server string) []string {
	if id, pinned := broker.IdentityOf(server); !pinned {
		return []string{broker.StateKeyOf(id, false)}
	}
	return []string{broker.StateKeyOf(server, true), broker.StateKeyOf(server, false)}
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

// blocksBoth lists the blocks that apply to a key --server S names: those for every server
// once, then each key's own.
func blocksBoth(s *grants.Store, server string) ([]grants.Block, error) {
	all, err := s.BlocksOf(grants.AllServers)
	errs := []error{err}
	for _, key := range serverKeys(server) {
		bs, err := s.BlocksOf(key)
		for _, b := range bs {
			if !b.EveryServer() {
				all = append(all, b)
			}
		}
		errs = append(errs, err)
	}
	return all, errors.Join(errs...)
}

// revokeBoth revokes for every key --server S names.
func revokeBoth(s *grants.Store, f grants.RevokeFilter) ([]grants.Grant, error) {
	return forBoth(f, s.Revoke)
}

// restoreBoth lifts blocks for every key --server S names.
func restoreBoth(s *grants.Store, f grants.RevokeFilter) ([]grants.Block, error) {
	return forBoth(f, s.Restore)
}

// forBoth runs op with f, once for each key f.Server names (once when it names none).
func forBoth[T any](f grants.RevokeFilter, op func(grants.RevokeFilter) ([]T, error)) ([]T, error) {
	if f.Server == "" {
		return op(f)
	}
	var all []T
	var errs []error
	for _, key := range serverKeys(f.Server) {
		g := f
		g.Server = key
		out, err := op(g)
		all = append(all, out...)
		if err != nil {
			errs = append(errs, err)
		}
	}
	return all, errors.Join(errs...)
}
