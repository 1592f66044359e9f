// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package grants

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// AllServers is the Server of a block for every server, those the Store has
// never seen included.
const AllServers = ""

// Block takes an operator's pre-approval away from a server, or from every
// server, on a path and everything beneath it (on every path when Path is
// empty), until it is removed (Restore). It covers nothing a grant covers:
// a server that asks again and is approved holds a grant, and the grant
// covers, block or not. Blocks are kept with the server's grants, or, for
// every server, in a file of their own, so they survive restarts and reach
// running brokers as grant changes do.
type Block struct {
	// ID names the block, for Restore and the audit trail; the Store assigns
	// it.
	ID string `json:"id"`
	// Server is the server identity the block applies to; AllServers: every
	// server.
	Server string `json:"server"`
	// Path is the mount-relative path blocked, with everything beneath it;
	// empty: every path.
	Path string `json:"path,omitempty"`
	// Root is the root Path's mount named when the block was made, when the
	// blocker knew it (zero otherwise). It says which directory was meant;
	// the block applies to Path whatever directory its mount names now, so
	// that it holds until it is removed.
	Root Root `json:"root,omitzero"`
	// Blocked is when the block was made (UTC).
	Blocked time.Time `json:"blocked"`
	// By says who made it.
	By string `json:"by"`
}

// EveryServer reports whether the block applies to every server.
func (b Block) EveryServer() bool { return b.Server == AllServers }

// CoversPath reports whether the block covers p: it blocks every path, or its
// path is p or an ancestor of p at a segment boundary.
func (b Block) CoversPath(p string) bool { return b.Path == "" || coversPath(b.Path, p) }

// Mount returns the mount the block's path starts with ("" for a block of
// every path).
func (b Block) Mount() string {
	m, _, _ := strings.Cut(b.Path, "/")
	return m
}

// checkNewBlock validates a block to be added and fills in its defaults.
func checkNewBlock(b *Block, now time.Time) error {
	if b.ID != "" {
		return invalidf("the Store assigns IDs; got %q", b.ID)
	}
	if b.Server != AllServers {
		if err := validServer(b.Server); err != nil {
			return err
		}
	}
	if b.Path != "" {
		if err := ValidPath(b.Path); err != nil {
			return err
		}
	}
	if b.Root.Known() {
		if b.Path == "" {
			return invalidf("a block of every path has no root")
		}
		if err := validRoot(b.Root); err != nil {
			return err
		}
	} else if b.Root != (Root{}) {
		return invalidf("a root without a path: %+v", b.Root)
	}
	if err := validBy(b.By); err != nil {
		return err
	}
	if b.Blocked.IsZero() {
		b.Blocked = now
	}
	b.Blocked = b.Blocked.UTC()
	return nil
}

// scope returns the entry that keeps the blocks of server: the server's, or
// the every-server entry for AllServers.
func (s *Store) scope(server string) (*entry, error) {
	if server != AllServers {
		return s.entry(server)
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return nil, ErrClosed
	}
	return s.every, nil
}

// Block adds b, a block of b.Server (AllServers: every server) on b.Path
// (empty: every path). It needs a By; Blocked defaults to the Store's clock;
// a Root needs a Path. When the same scope already holds a block on the same
// path, that block stays as it is and is returned with added false. The
// block is on disk when Block returns without error.
func (s *Store) Block(b Block) (stored Block, added bool, err error) {
	e, err := s.scope(b.Server)
	if err != nil {
		return Block{}, false, err
	}
	if err := checkNewBlock(&b, s.now()); err != nil {
		return Block{}, false, e.fail("block", err)
	}
	err = s.update(e, func(c contents) (contents, bool, error) {
		if i := slices.IndexFunc(c.blocks, func(o Block) bool { return o.Path == b.Path }); i >= 0 {
			stored = c.blocks[i]
			return c, false, nil
		}
		if len(c.blocks) >= s.maxGrants {
			return contents{}, false, fmt.Errorf("%w: the limit is %d blocks", ErrTooMany, s.maxGrants)
		}
		b.ID = newID(func(id string) bool { return slices.ContainsFunc(c.blocks, func(o Block) bool { return o.ID == id }) })
		stored, added = b, true
		c.blocks = append(slices.Clone(c.blocks), b)
		return c, true, nil
	})
	if err != nil {
		return Block{}, false, e.fail("block", err)
	}
	return stored, added, nil
}

// Blocked reports whether a block covers mountPath (a canonical
// mount-relative path) for server: one of the server's own, or one for every
// server; it returns one such block. It answers from memory within the
// staleness bound, as Covers does. A corrupt or unreadable file, the
// server's or the every-server one, is an error (the caller treats the path
// as blocked).
func (s *Store) Blocked(server, mountPath string) (Block, bool, error) {
	e, err := s.entry(server)
	if err != nil {
		return Block{}, false, err
	}
	if err := ValidPath(mountPath); err != nil {
		return Block{}, false, e.fail("blocked", err)
	}
	for _, scope := range []*entry{e, s.every} {
		snap, err := s.current(scope)
		if err != nil {
			return Block{}, false, scope.fail("blocked", err)
		}
		for _, b := range snap.blocks {
			if b.CoversPath(mountPath) {
				return b, true, nil
			}
		}
	}
	return Block{}, false, nil
}

// BlocksOf returns the blocks that apply to server: the server's own, then
// those for every server, each sorted by path. With AllServers it returns
// the blocks for every server alone.
func (s *Store) BlocksOf(server string) ([]Block, error) {
	scopes := []*entry{}
	if server != AllServers {
		e, err := s.entry(server)
		if err != nil {
			return nil, err
		}
		scopes = append(scopes, e)
	}
	every, err := s.scope(AllServers)
	if err != nil {
		return nil, err
	}
	var out []Block
	for _, e := range append(scopes, every) {
		snap, err := s.current(e)
		if err != nil {
			return out, e.fail("list", err)
		}
		out = append(out, snap.blocks...)
	}
	return out, nil
}

// ListBlocks returns every block: those for every server first, then each
// server's, sorted by server, then path. Like ListAll it goes on past a
// file it cannot read, and the error names each such file.
func (s *Store) ListBlocks() ([]Block, error) {
	targets, errs, err := s.targets("")
	if err != nil {
		return nil, err
	}
	var all []Block
	for _, e := range append([]*entry{s.every}, targets...) {
		snap, err := s.current(e)
		if err != nil {
			errs = append(errs, e.fail("list", err))
			continue
		}
		all = append(all, snap.blocks...)
	}
	slices.SortFunc(all, compareServerBlocks)
	return all, errors.Join(errs...)
}

// Restore removes the blocks the filter selects and returns them, sorted as
// ListBlocks sorts. The filter selects as for Revoke: Server the blocks of
// that server (not those for every server), Path the blocks on Path and
// beneath it (a block on an ancestor, or on every path, is not selected),
// ID the block with that ID, All every block. Nothing selected is not an
// error. Like Revoke it goes on past a file it cannot read or change.
func (s *Store) Restore(f RevokeFilter) ([]Block, error) {
	if err := f.validate(); err != nil {
		return nil, &Error{Op: "restore", Server: f.Server, Err: err}
	}
	targets, errs, err := s.targets(f.Server)
	if err != nil {
		return nil, err
	}
	if f.Server == "" {
		every, err := s.scope(AllServers)
		if err != nil {
			return nil, err
		}
		targets = append([]*entry{every}, targets...)
	}
	var restored []Block
	for _, e := range targets {
		var gone []Block
		err := s.update(e, func(c contents) (contents, bool, error) {
			c.blocks, gone = partition(c.blocks, f.matchesBlock)
			return c, len(gone) > 0, nil
		})
		if err != nil {
			errs = append(errs, e.fail("restore", err))
			continue
		}
		restored = append(restored, gone...)
	}
	slices.SortFunc(restored, compareServerBlocks)
	return restored, errors.Join(errs...)
}

// matchesBlock reports whether the filter selects b.
func (f RevokeFilter) matchesBlock(b Block) bool {
	if f.All {
		return true
	}
	return (f.Server == "" || b.Server == f.Server) &&
		(f.Path == "" || b.Path != "" && coversPath(f.Path, b.Path)) &&
		(f.ID == "" || b.ID == f.ID)
}

// sortBlocks orders one scope's blocks by path ("" first), then ID.
func sortBlocks(bs []Block) { slices.SortFunc(bs, compareBlocks) }

func compareBlocks(a, b Block) int {
	return cmp.Or(strings.Compare(a.Path, b.Path), strings.Compare(a.ID, b.ID))
}

func compareServerBlocks(a, b Block) int {
	return cmp.Or(strings.Compare(a.Server, b.Server), compareBlocks(a, b))
}
