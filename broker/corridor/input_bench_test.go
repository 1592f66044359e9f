// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package corridor

import (
	"strings"
	"testing"
)

// BenchmarkParamsWithoutContent is the cost of cutting the content out of a files/write's
// params (4 KiB of content) for the policy input.
func BenchmarkParamsWithoutContent(b *testing.B) {
	params := []byte(`{"path":"proj/src/pkg/main.go","content":"` + strings.Repeat(`x\"y\\z `, 4096/7) + `","encoding":"utf-8","offset":0,"final":true}`)
	b.SetBytes(int64(len(params)))
	b.ReportAllocs()
	for b.Loop() {
		if paramsWithoutContent(params) == nil {
			b.Fatal("no params")
		}
	}
}
