// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package corridor

import (
	"context"
	"fmt"
	"testing"

	"github.com/fsbroker/fsbroker/broker/consent"
	"github.com/fsbroker/fsbroker/broker/grants"
	"github.com/fsbroker/fsbroker/internal/cputime"
)

// BenchmarkAutoConsentFirstRead is what `fsbroker serve --consent auto` does for a file no grant
// covers yet, through the whole corridor with the built-in policies and a grant store on disk:
// the consent request (the policy's consentable rule, the automatic approval, the grant written
// and synced), then the read the grant lets through. Each iteration reads a file no earlier one
// read, and the server already holds grants=N grants on other files, as a long session leaves
// them: the cost per call should not grow with N. Besides ns/op it reports cpu-ns/op, the CPU
// time of the whole process per call, where the platform tells it.
func BenchmarkAutoConsentFirstRead(b *testing.B) {
	for _, held := range []int{100, 20000} {
		b.Run(fmt.Sprintf("grants=%d", held), func(b *testing.B) {
			files := make([]string, b.N)
			for i := range files {
				files[i] = fmt.Sprintf("proj/new/d%03d/f%06d.txt", i/100, i)
			}
			c, store, root, caller := consentCorridor(b, []grants.Option{grants.WithMaxGrants(held + b.N + 1)}, files...)
			old := make([]grants.Grant, held)
			for i := range old {
				old[i] = grants.Grant{Access: grants.Read, Path: fmt.Sprintf("proj/old/d%03d/f%06d.txt", i/100, i), Root: root, By: grants.ByAuto}
			}
			if _, err := store.Grant(caller.StateKey(), old...); err != nil {
				b.Fatal(err)
			}
			c.consent = consent.Auto{}
			ctx := context.Background()
			b.ReportAllocs()
			cpu0, haveCPU := cputime.Process()
			b.ResetTimer()
			for _, p := range files {
				r, err := c.Consent(ctx, caller, ConsentRequest{Paths: []string{p}, Access: "read", Resolve: ConsentFollowToFile})
				if err != nil || !r.Granted {
					b.Fatalf("consent to %s: %+v, %v", p, r, err)
				}
				if _, err := c.Read(ctx, caller, ReadRequest{Path: p, Length: -1, UTF8: true}); err != nil {
					b.Fatalf("read %s: %v", p, err)
				}
			}
			b.StopTimer()
			if cpu1, _ := cputime.Process(); haveCPU {
				b.ReportMetric(float64(cpu1-cpu0)/float64(b.N), "cpu-ns/op")
			}
		})
	}
}
