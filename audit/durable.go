// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package audit

import (
	"fmt"

	"github.com/fsbroker/fsbroker/internal/atomicfile"
)

// replaceSidecar replaces path, a file beside a segment (its checkpoint or its prev note),
// with data through internal/atomicfile: atomically, and durably (the file and the directory
// fsynced) unless the writer's sync mode is none.
func (w *Writer) replaceSidecar(path string, data []byte) error {
	var opts []atomicfile.Option
	if w.cfg.sync == SyncNone {
		opts = append(opts, atomicfile.WithoutFsync())
	}
	if err := atomicfile.WriteFile(path, data, 0o644, opts...); err != nil {
		return fmt.Errorf("audit: %w", err)
	}
	return nil
}

// syncDir fsyncs the audit directory, so that a new segment's name, or a removal, survives a
// power failure.
func syncDir(dir string) error {
	if err := atomicfile.SyncDir(dir); err != nil {
		return fmt.Errorf("audit: %w", err)
	}
	return nil
}
