// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package serve

import (
	"slices"
	"testing"
)

// TestListingTextInByteOrder: list_directory's text is in byte order whether or not the
// entries come sorted, invalid UTF-8 shows as U+FFFD, and the caller's entries are left as
// they were, by ListingText and by ListingWithSizesText's size order alike.
func TestListingTextInByteOrder(t *testing.T) {
	sorted := []Entry{{Name: "B", IsDir: true, Size: 1}, {Name: "a", Size: 3}, {Name: "b\xff", Size: 2}}
	unsorted := []Entry{sorted[2], sorted[0], sorted[1]}
	const want = "[DIR] B\n[FILE] a\n[FILE] b\uFFFD"
	for _, entries := range [][]Entry{sorted, unsorted} {
		before := slices.Clone(entries)
		if got := ListingText(entries); got != want {
			t.Errorf("ListingText(%v) = %q; want %q", before, got, want)
		}
		ListingWithSizesText(entries, "size")
		if !slices.Equal(entries, before) {
			t.Errorf("the entries changed: %v; were %v", entries, before)
		}
	}
	if got := ListingText(nil); got != "" {
		t.Errorf("ListingText(nil) = %q", got)
	}
}
