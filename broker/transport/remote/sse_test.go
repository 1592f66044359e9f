// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package remote

import (
	"errors"
	"io"
	"strings"
	"testing"
	"time"
)

func TestRemoteEventReader(t *testing.T) {
	long := strings.Repeat("x", 70<<10) // longer than the read buffer
	tests := []struct {
		name   string
		max    int
		bodies []string // one stream, reconnected between bodies
		want   []string // dispatched events: name + " " + data, or "too large"
		lastID string
		retry  time.Duration
	}{
		{name: "one message", bodies: []string{"data: {\"a\":1}\n\n"}, want: []string{"message {\"a\":1}"}},
		{name: "CRLF and no space", bodies: []string{"data:{}\r\n\r\n"}, want: []string{"message {}"}},
		{name: "multi-line data", bodies: []string{"data: a\ndata: b\n\n"}, want: []string{"message a\nb"}},
		{name: "comments and unknown fields", bodies: []string{": hi\nfoo: bar\ndata: x\n\n"}, want: []string{"message x"}},
		{name: "event name", bodies: []string{"event: prime\nid: 7\ndata: \n\nevent: message\ndata: y\n\n"},
			want: []string{"prime ", "message y"}, lastID: "7"},
		{name: "id-only priming event", bodies: []string{"id: p0\n\ndata: z\n\n"}, want: []string{"message z"}, lastID: "p0"},
		{name: "retry", bodies: []string{"retry: 250\n\n", "retry: x\n\n"}, retry: 250 * time.Millisecond},
		{name: "half event at the end is dropped", bodies: []string{"data: a\n\ndata: b\n"}, want: []string{"message a"}},
		{name: "id survives reconnection", bodies: []string{"id: e1\ndata: a\n\n", "data: b\n\n"},
			want: []string{"message a", "message b"}, lastID: "e1"},
		{name: "empty id resets", bodies: []string{"id: e1\ndata: a\n\nid\ndata: b\n\n"},
			want: []string{"message a", "message b"}, lastID: ""},
		{name: "id with NUL ignored", bodies: []string{"id: e1\n\nid: a\x00b\n\n"}, lastID: "e1"},
		{name: "too large, then fine", max: 8, bodies: []string{"data: 123456789\n\ndata: 12345678\n\n"},
			want: []string{"too large", "message 12345678"}},
		{name: "too large over lines", max: 8, bodies: []string{"data: 1234\ndata: 5678\n\n"}, want: []string{"too large"}},
		{name: "long line", bodies: []string{"data: " + long + "\r\n\r\n"}, want: []string{"message " + long}},
		{name: "long comment", bodies: []string{":" + long + "\ndata: a\n\n"}, want: []string{"message a"}},
		{name: "CR split from its LF", bodies: []string{"data: " + strings.Repeat("y", 64<<10-7) + "\r\n\n"},
			want: []string{"message " + strings.Repeat("y", 64<<10-7)}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			max := tc.max
			if max == 0 {
				max = 1 << 20
			}
			er := newEventReader(max)
			var got []string
			for _, body := range tc.bodies {
				er.reset(strings.NewReader(body))
				for {
					ev, err := er.next()
					if errors.Is(err, io.EOF) {
						break
					}
					if err != nil {
						t.Fatal(err)
					}
					if ev.tooLarge {
						got = append(got, "too large")
						continue
					}
					got = append(got, ev.name+" "+string(ev.data))
				}
			}
			if strings.Join(got, "|") != strings.Join(tc.want, "|") {
				t.Errorf("events = %.200q, want %.200q", got, tc.want)
			}
			if er.lastID != tc.lastID {
				t.Errorf("last id = %q, want %q", er.lastID, tc.lastID)
			}
			if er.retry != tc.retry {
				t.Errorf("retry = %s, want %s", er.retry, tc.retry)
			}
		})
	}
}
