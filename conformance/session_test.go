// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

//go:build unix

package conformance

import (
	"strings"
	"testing"
)

// scriptedBroker is a broker command that is a shell script: it sends initialize, takes the
// result and sends notifications/initialized, pings and writes the runner's answer to its
// stderr, then writes two lines that are not JSON-RPC 2.0 messages (not JSON; an error reply
// with no id member) and one that is, and reads its stdin to the end.
var scriptedBroker = []string{"/bin/sh", "-c", `
printf '%s\n' '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"sh","version":"0"}}}'
read -r result
printf '%s\n' '{"jsonrpc":"2.0","method":"notifications/initialized"}'
printf '%s\n' '{"jsonrpc":"2.0","id":"p","method":"ping"}'
read -r pong
printf 'pong: %s\n' "$pong" >&2
printf '%s\n' 'not json'
printf '%s\n' '{"jsonrpc":"2.0","error":{"code":-32600,"message":"no id"}}'
printf '%s\n' '{"jsonrpc":"2.0","method":"notifications/x"}'
while read -r line; do :; done
`, "scripted-broker"}

// The runner answers the broker's ping and still offers it to an expectRequest step, and it
// fails a case for each stdout line that is not one JSON-RPC 2.0 message, and for nothing
// else.
func TestSessionHoldsTheBrokerToJSONRPC(t *testing.T) {
	c, err := ParseCase("cases/x/t.yaml", []byte("name: t\ndescription: d\ntags: [s2-lifecycle]\nroots: [{path: p}]\n"+
		"steps:\n"+
		"  - expectRequest: {method: ping}\n"+
		"  - expectStderr: {regex: 'pong: \\{\"id\":\"p\",\"jsonrpc\":\"2.0\",\"result\":\\{\\}\\}'}\n"+
		"  - expectNotification: {method: notifications/x}\n"))
	if err != nil {
		t.Fatal(err)
	}
	r := &Runner{Broker: scriptedBroker}
	res := r.RunCase(t.Context(), c)
	if len(res.Failures) != 2 ||
		!strings.Contains(res.Failures[0], "stdout line is not a JSON-RPC message: ") || !strings.Contains(res.Failures[0], "not json") ||
		!strings.Contains(res.Failures[1], "stdout line is not a JSON-RPC message: ") || !strings.Contains(res.Failures[1], `"message":"no id"`) {
		t.Fatalf("failures %q, want the two lines that are not JSON-RPC messages\n%s", res.Failures, res.Report(true))
	}
}
