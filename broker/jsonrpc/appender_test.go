// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package jsonrpc

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
)

// appended is a result that encodes itself: {"echo":PARAMS,"pad":"ppp..."}.
type appended struct {
	params string
	pad    int
}

func (a appended) AppendJSON(b []byte) []byte {
	b = append(b, `{"echo":`...)
	b = append(b, a.params...)
	b = append(b, `,"pad":"`...)
	b = append(b, strings.Repeat("p", a.pad)...)
	return append(b, `"}`...)
}

// TestConnAppendedResults: results that encode themselves (ResultAppender)
// are sent whole, each with its own id, string or number; reply buffers are
// reused from one reply to the next, so a short reply after a long one, and
// many of them pipelined, must each come out intact.
func TestConnAppendedResults(t *testing.T) {
	const n = 400
	p := newTestPeer(t, 0)
	handler := func(_ context.Context, req *Message) (any, error) {
		i, err := strconv.Atoi(string(req.Params))
		if err != nil {
			return nil, err
		}
		return appended{params: string(req.Params), pad: (n - i) * 97 % 20000}, nil
	}
	c := NewConn(p.stream, handler, nil, nullLogger())
	serve(t, context.Background(), c, p)
	idOf := func(i int) string {
		if i%2 == 0 {
			return strconv.Itoa(i)
		}
		return strconv.Quote(fmt.Sprintf("s<%d>", i)) // escaped on the way back as it came
	}
	go func() {
		for i := range n {
			line := `{"jsonrpc":"2.0","id":` + idOf(i) + `,"method":"m","params":` + strconv.Itoa(i) + "}\n"
			if _, err := p.in.Write([]byte(line)); err != nil {
				return
			}
		}
	}()
	seen := make(map[string]bool, n)
	for range n {
		m := p.read(t)
		var i int
		var pad string
		if _, err := fmt.Sscanf(compact(t, m.Result), `{"echo":%d,"pad":%q}`, &i, &pad); err != nil {
			t.Fatalf("reply %s: %v", m.raw, err)
		}
		if want := StringID(fmt.Sprintf("s<%d>", i)); i%2 == 1 && string(m.ID) != string(want) {
			t.Fatalf("reply %s: id %s, want %s", m.raw, m.ID, want)
		}
		if i%2 == 0 && string(m.ID) != strconv.Itoa(i) {
			t.Fatalf("reply %s: id %s, want %d", m.raw, m.ID, i)
		}
		if len(pad) != (n-i)*97%20000 || strings.Trim(pad, "p") != "" {
			t.Fatalf("reply to %d: pad of %d bytes, want %d", i, len(pad), (n-i)*97%20000)
		}
		if seen[string(m.ID)] {
			t.Fatalf("second reply for id %s", m.ID)
		}
		seen[string(m.ID)] = true
	}
}
