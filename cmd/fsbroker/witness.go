package main

import (
	"errors"
	"io/fs"
	"path/filepath"
	"strings"

	"github.com/hashicorp/go-hclog"

	"github.com/fsbroker/fsbroker/audit"
	"github.com/fsbroker/fsbroker/broker/roots"
)

// auditDirOrDefault is the audit trail's directory: --audit, else <state-dir>/audit.
func (o *options) auditDirOrDefault() string {
	if o.auditDir != "" {
		return o.auditDir
	}
	return filepath.Join(o.stateDir, "audit")
}

// witnessOptions opens the audit witnesses that --audit-witness (or the config file's
// audit.witness) names, as options of the audit writer, which logs their failures to log. A
// spec that does not parse, or a witness file inside the state directory, the audit directory
// or a writable root (where what the witness must outlast could reach it), is a configuration
// error.
func witnessOptions(o *options, set *roots.Set, log hclog.Logger) ([]audit.Option, error) {
	if len(o.auditWitness) == 0 {
		return nil, nil
	}
	type place struct{ what, dir string }
	places := []place{{"state directory", o.stateDir}, {"audit directory", o.auditDirOrDefault()}}
	for _, r := range set.All() {
		if r.Writable {
			places = append(places, place{"writable root " + r.Mount, r.Path})
		}
	}
	opts := []audit.Option{audit.WithLogger(log)}
	for _, spec := range o.auditWitness {
		ws, err := audit.ParseWitnessSpec(spec, o.witnessBase)
		if err != nil {
			return nil, configErrorf("--audit-witness: %v", err)
		}
		if ws.Path != "" {
			for _, p := range places {
				if within(ws.Path, p.dir) {
					return nil, configErrorf("--audit-witness %s: the witness file is inside the %s %s: what can change the trail could change the witness too; put it elsewhere (/var/log/fsbroker/, say)",
						ws, p.what, p.dir)
				}
			}
		}
		wit, err := ws.Open()
		if err != nil {
			return nil, configErrorf("--audit-witness: %v", err)
		}
		opts = append(opts, audit.WithWitness(wit))
	}
	return opts, nil
}

// within reports whether path is dir or beneath it, once the symbolic links of both are
// resolved (as far as they exist).
func within(path, dir string) bool {
	rel, err := filepath.Rel(resolveExisting(dir), resolveExisting(path))
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))
}

// resolveExisting returns the absolute path p with the symbolic links of its longest existing
// prefix resolved; the rest is kept as written (cleaned).
func resolveExisting(p string) string {
	p, err := filepath.Abs(p)
	if err != nil {
		return p
	}
	var rest []string
	for {
		real, err := filepath.EvalSymlinks(p)
		if err == nil {
			return filepath.Join(append([]string{real}, rest...)...)
		}
		parent := filepath.Dir(p)
		if parent == p || !errors.Is(err, fs.ErrNotExist) {
			return filepath.Join(append([]string{p}, rest...)...)
		}
		rest = append([]string{filepath.Base(p)}, rest...)
		p = parent
	}
}
