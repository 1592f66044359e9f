// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package runtime

import (
	"github.com/fsbroker/fsbroker/audit"
	"github.com/fsbroker/fsbroker/broker/roots"
)

// openWitnesses opens the audit witnesses cfg.Audit.Witnesses names. A spec that does not parse, or a witness file
// inside the state directory, the audit directory or a root, read-only ones
// included (where what the witness must outlast could reach it), is a
// configuration error; on any error the witnesses opened so far are closed.
func openWitnesses(cfg Config, set *roots.Set) (_ []audit.Witness, err error) {
	if len(cfg.Audit.Witnesses) == 0 {
		return nil, nil
	}
	type place struct{ what, dir string }
	places := []place{{"state directory", cfg.StateDir}, {"audit directory", cfg.Audit.DirIn(cfg.StateDir)}}
	for _, r := range set.All() {
		// A read-only root too: another local process that swaps entries in
		// a root could empty the witness, or swap it for a link to a file
		// outside every root that the broker would then append to.
		places = append(places, place{"root " + r.Mount, r.Path})
	}
	var opened []audit.Witness
	defer func() {
		if err != nil {
			closeWitnesses(opened)
		}
	}()
	for _, spec := range cfg.Audit.Witnesses {
		ws, err := audit.ParseWitnessSpec(spec, cfg.Audit.WitnessBase)
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
		opened = append(opened, wit)
	}
	return opened, nil
}

// closeWitnesses closes witnesses that no audit writer took.
func closeWitnesses(ws []audit.Witness) {
	for _, w := range ws {
		_ = w.Close()
	}
}
