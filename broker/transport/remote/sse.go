// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package remote

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"strconv"
	"time"
)

// maxFieldBytes bounds the value of an event field other than data (event,
// id, retry); a longer value is ignored.
const maxFieldBytes = 4096

// event is one dispatched server-sent event.
type event struct {
	name     string // "message" unless the stream named it
	data     []byte // the data lines joined with "\n"; owned by the caller
	tooLarge bool   // the data passed the limit and was discarded
}

// eventReader reads server-sent events from one response body after
// another, as the WHATWG HTML standard interprets an event stream ("Server-sent
// events", 9.2.6), keeping the last event id and the reconnection time across
// bodies. Lines end with LF or CRLF (a bare CR is not a line ending here).
// The data of one event is bounded: beyond max bytes it is discarded and the
// event is reported as too large, so that a hostile stream cannot exhaust
// memory.
type eventReader struct {
	r   *bufio.Reader
	max int

	data    []byte // the event being read: its data lines, each followed by '\n'
	hasData bool   // a data field was seen in this event
	over    bool   // this event's data passed max
	name    []byte // its event field
	field   []byte // the value of the current non-data field

	lastID string        // the stream's last event id, sent back as Last-Event-ID
	retry  time.Duration // the reconnection time the stream asked for (0: none)
}

func newEventReader(max int) *eventReader {
	return &eventReader{max: max}
}

// reset starts reading a new body (a new connection of the same logical
// stream): an event left half-read is dropped, the last id and the retry
// time are kept.
func (er *eventReader) reset(body io.Reader) {
	if er.r == nil {
		er.r = bufio.NewReaderSize(body, 64<<10)
	} else {
		er.r.Reset(body)
	}
	er.clearEvent()
}

func (er *eventReader) clearEvent() {
	er.data = er.data[:0]
	er.hasData, er.over = false, false
	er.name = er.name[:0]
}

// next returns the next event. At the end of the body (io.EOF) or on a read
// error a half-read event is discarded, as the standard says.
func (er *eventReader) next() (event, error) {
	for {
		blank, err := er.readLine()
		if err != nil {
			er.clearEvent()
			return event{}, err
		}
		if !blank {
			continue
		}
		if !er.hasData { // nothing to dispatch (an id-only priming event, say)
			er.clearEvent()
			continue
		}
		ev := event{name: "message"}
		if len(er.name) > 0 {
			ev.name = string(er.name)
		}
		if er.over {
			ev.tooLarge = true
		} else {
			ev.data = er.data[:len(er.data)-1] // without the last line's '\n'
			er.data = nil                      // the caller owns it now
		}
		er.clearEvent()
		return ev, nil
	}
}

// readLine reads one line and applies its field. It reports a blank line
// (the end of an event).
func (er *eventReader) readLine() (blank bool, err error) {
	chunk, err := er.r.ReadSlice('\n')
	if err != nil && !errors.Is(err, bufio.ErrBufferFull) {
		return false, err // EOF or a broken connection: a partial line is dropped
	}
	complete := err == nil
	line := chunk
	if complete {
		line = trimEOL(chunk)
		if len(line) == 0 {
			return true, nil
		}
	}
	colon := bytes.IndexByte(line, ':')
	if colon < 0 && !complete {
		// A field name longer than the read buffer: no field we know.
		return false, er.skipLine()
	}
	if colon == 0 { // a comment
		if complete {
			return false, nil
		}
		return false, er.skipLine()
	}
	name, value := line, []byte(nil)
	if colon > 0 {
		name, value = line[:colon], line[colon+1:]
		if len(value) > 0 && value[0] == ' ' {
			value = value[1:]
		}
	}
	if string(name) == "data" {
		return false, er.readData(value, complete)
	}
	known := string(name) == "event" || string(name) == "id" || string(name) == "retry"
	if !known {
		if complete {
			return false, nil
		}
		return false, er.skipLine()
	}
	er.field = append(er.field[:0], value...)
	truncated := false
	for !complete {
		chunk, err = er.r.ReadSlice('\n')
		if err != nil && !errors.Is(err, bufio.ErrBufferFull) {
			return false, err
		}
		complete = err == nil
		if complete {
			chunk = trimEOL(chunk)
		}
		if len(er.field)+len(chunk) > maxFieldBytes {
			truncated = true
			continue
		}
		er.field = append(er.field, chunk...)
	}
	if truncated || len(er.field) > maxFieldBytes {
		return false, nil // an absurd value: ignored
	}
	switch string(name) {
	case "event":
		er.name = append(er.name[:0], er.field...)
	case "id":
		if bytes.IndexByte(er.field, 0) < 0 {
			er.lastID = string(er.field)
		}
	case "retry":
		if ms, err := strconv.ParseUint(string(er.field), 10, 31); err == nil && allDigits(er.field) {
			er.retry = time.Duration(ms) * time.Millisecond
		}
	}
	return false, nil
}

// readData appends a data line's value (first, the part already read) to the
// event's data, up to the limit.
func (er *eventReader) readData(first []byte, complete bool) error {
	er.hasData = true
	start := len(er.data)
	er.appendData(first)
	for !complete {
		chunk, err := er.r.ReadSlice('\n')
		if err != nil && !errors.Is(err, bufio.ErrBufferFull) {
			return err
		}
		complete = err == nil
		if complete {
			chunk = chunk[:len(chunk)-1]
			// A CR split from its LF by the buffer's edge is still part of
			// the line ending.
			if len(chunk) == 0 && !er.over && len(er.data) > start && er.data[len(er.data)-1] == '\r' {
				er.data = er.data[:len(er.data)-1]
			} else {
				chunk = bytes.TrimSuffix(chunk, []byte{'\r'})
			}
		}
		er.appendData(chunk)
	}
	er.appendData([]byte{'\n'})
	return nil
}

func (er *eventReader) appendData(p []byte) {
	if er.over {
		return
	}
	if len(er.data)+len(p) > er.max+1 { // +1: the '\n' after the last line
		er.over = true
		er.data = nil
		return
	}
	er.data = append(er.data, p...)
}

// skipLine discards the rest of the current line.
func (er *eventReader) skipLine() error {
	for {
		_, err := er.r.ReadSlice('\n')
		switch {
		case err == nil:
			return nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		default:
			return err
		}
	}
}

// trimEOL removes a line's LF or CRLF.
func trimEOL(line []byte) []byte {
	line = bytes.TrimSuffix(line, []byte{'\n'})
	return bytes.TrimSuffix(line, []byte{'\r'})
}

func allDigits(b []byte) bool {
	for _, c := range b {
		if c < '0' || c > '9' {
			return false
		}
	}
	return len(b) > 0
}
