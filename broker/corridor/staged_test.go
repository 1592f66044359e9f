// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package corridor

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/fsbroker/fsbroker/broker/executor"
)

// TestStagedWriteStartedAsTheSessionEndsIsAborted: a stage whose first chunk
// is still being handled when the table closes is aborted by its starter;
// one started after is refused before it creates anything.
func TestStagedWriteStartedAsTheSessionEndsIsAborted(t *testing.T) {
	f := newFixture(t)
	c := f.corridor(t)
	ctx := context.Background()
	target := func(name string) executor.Target { return f.target(t, c, "rw/"+name) }
	opts := executor.WriteOptions{Create: true}
	const starters = 8
	for round := range 40 {
		table := newStageTable(time.Minute)
		var wg sync.WaitGroup
		for i := range starters {
			tg := target(fmt.Sprintf("r%d-%d.bin", round, i%3)) // some share a path
			wg.Go(func() {
				_, _, _ = table.write(ctx, f.exec, tg, []byte("x"), 0, false, opts)
			})
		}
		table.close()
		wg.Wait()
		if left := tempFiles(t, f.rw); len(left) != 0 || table.len() != 0 {
			t.Fatalf("round %d: %d staged writes and temporary files %v after the table closed", round, table.len(), left)
		}
	}
	// The path itself, made to happen: the session ends after a first
	// chunk's stage (and its temporary file) was made, before it entered the
	// table. Its starter aborts it.
	table := newStageTable(time.Minute)
	made := make(chan struct{})
	table.beforeInstall = func() {
		if len(tempFiles(t, f.rw)) != 1 {
			t.Errorf("the stage being installed has no temporary file: %v", tempFiles(t, f.rw))
		}
		close(made)
		table.close()
	}
	if _, _, err := table.write(ctx, f.exec, target("closing.bin"), []byte("x"), 0, false, opts); err == nil {
		t.Error("a staged write was installed in a table that closed meanwhile")
	}
	select {
	case <-made:
	default:
		t.Fatal("the first chunk never reached its stage's installation")
	}
	if left := tempFiles(t, f.rw); len(left) != 0 || table.len() != 0 {
		t.Fatalf("%d staged writes and temporary files %v after a stage was refused by a closed table", table.len(), left)
	}

	table = newStageTable(time.Minute)
	table.close()
	if _, _, err := table.write(ctx, f.exec, target("late.bin"), []byte("x"), 0, false, opts); err == nil {
		t.Error("a staged write started after the session ended")
	}
	if left := tempFiles(t, f.rw); len(left) != 0 {
		t.Errorf("temporary files %v", left)
	}
}
