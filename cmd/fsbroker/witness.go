package main

import (
	"path/filepath"

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
// or a root, read-only ones included (where what the witness must outlast could reach it), is a
// configuration error.
func witnessOptions(o *options, set *roots.Set, log hclog.Logger) ([]audit.Option, error) {
	if len(o.auditWitness) == 0 {
		return nil, nil
	}
	type place struct{ what, dir string }
	places := []place{{"state directory", o.stateDir}, {"audit directory", o.auditDirOrDefault()}}
	for _, r := range set.All() {
		// A read-only root too: another local process that swaps entries in
		// a root could empty the witness, or swap it for a link to a file
		// outside every root that the broker would then append to.
		places = append(places, place{"root " + r.Mount, r.Path})
	}
	opts := []audit.Option{audit.WithLogger(log)}
	for _, spec := range o.auditWitness {
		ws, err := audit.ParseWitnessSpec(spec, o.witnessBase)
		if err != nil {
			return nil, configErrorf("--audit-witness: %v", err)
		}
		if ws.Path != "" {
			real, _, err := resolveExisting(ws.Path)
			if err != nil {
				return nil, configErrorf("--audit-witness %s: %v", ws, err)
			}
			for _, p := range places {
				dir, _, err := resolveExisting(p.dir)
				if err != nil {
					return nil, configErrorf("the %s %s: %v", p.what, p.dir, err)
				}
				if within(real, dir) {
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
