// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package schema

import (
	"encoding/json"
	"slices"
	"testing"
)

// TestConfigAuditWitness checks the shapes audit.witness accepts: the specs the broker parses,
// and nothing else (an unknown scheme, a network address without a port, an empty file path).
func TestConfigAuditWitness(t *testing.T) {
	v := newValidator(t)
	for _, tc := range []struct {
		doc  string
		want []string
	}{
		{`{"audit":{"witness":["syslog"]}}`, nil},
		{`{"audit":{"witness":["syslog:udp://127.0.0.1:514","syslog:tcp://logs.example.com:6514"]}}`, nil},
		{`{"audit":{"witness":["syslog:unixgram:///run/systemd/journal/syslog","syslog:unix:///dev/log"]}}`, nil},
		{`{"audit":{"witness":["file:/var/log/fsbroker/witness.log","file:witness.log"]}}`, nil},
		{`{"audit":{"witness":[]}}`, nil},
		{`{"audit":{"witness":"syslog"}}`, []string{"/audit/witness"}},
		{`{"audit":{"witness":["syslog:udp://127.0.0.1"]}}`, []string{"/audit/witness/0"}},
		{`{"audit":{"witness":["syslog:http://x:1"]}}`, []string{"/audit/witness/0"}},
		{`{"audit":{"witness":["file:"]}}`, []string{"/audit/witness/0"}},
		{`{"audit":{"witness":["syslog","journald"]}}`, []string{"/audit/witness/1"}},
		{`{"audit":{"witness":["syslog:unixgram://relative"]}}`, []string{"/audit/witness/0"}},
	} {
		got := pointers(t, v.ValidateConfig(json.RawMessage(tc.doc)))
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s: pointers %q, want %q", tc.doc, got, tc.want)
		}
	}
}
