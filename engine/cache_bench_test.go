// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package engine

import (
	"encoding/json"
	"testing"
)

// BenchmarkBatchKeyOf is the cost of the batch cache's key of a listing page's input (1,000
// entries): a scan of the document for its time member, and a hash of the rest.
func BenchmarkBatchKeyOf(b *testing.B) {
	doc, err := json.Marshal(visibleInput(b, listingPage()...))
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(doc)))
	b.ReportAllocs()
	for b.Loop() {
		if _, tv, ok := batchKeyOf(visibleQuery, json.RawMessage(doc)); !ok || tv == nil {
			b.Fatal("no key")
		}
	}
}
