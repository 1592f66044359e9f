// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package jsonrpc

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"testing/iotest"
)

// FuzzDecode feeds arbitrary bytes to Decode. Its seed corpus is in
// testdata/fuzz/FuzzDecode. Invariants: Decode never panics; it returns
// exactly one of a *Message or a *DecodeError; a DecodeError is -32700 (for
// exactly the inputs that are not valid JSON) or -32600, with id null or a
// valid string or number id; a Message is exactly one kind and well formed;
// and re-encoding it through the package's own wire shapes decodes to the same
// message.
func FuzzDecode(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := Decode(data)
		switch {
		case m != nil && err == nil:
			checkAccepted(t, data, m)
		case m == nil && err != nil:
			de, ok := err.(*DecodeError)
			if !ok || de == nil || de.Err == nil {
				t.Fatalf("error is %T %v, want a non-nil *DecodeError", err, err)
			}
			checkDecodeError(t, data, de)
		default:
			t.Fatalf("Decode returned (%v, %v): want exactly one of a message and an error", m, err)
		}
	})
}

func checkDecodeError(t *testing.T, data []byte, de *DecodeError) {
	t.Helper()
	switch de.Err.Code {
	case CodeParseError:
		if de.ID != NullID {
			t.Errorf("parse error with id %q", de.ID)
		}
		if json.Valid(data) {
			t.Errorf("parse error for valid JSON")
		}
	case CodeInvalidRequest:
		if !json.Valid(data) {
			t.Errorf("invalid request (not parse error) for invalid JSON")
		}
	default:
		t.Errorf("decode error code %d", de.Err.Code)
	}
	if de.Err.Message == "" {
		t.Error("decode error without a message")
	}
	if de.ID != NullID {
		checkID(t, de.ID)
	}
	if b, err := json.Marshal(errorResponse{JSONRPC: Version, ID: de.ID, Error: de.Err}); err != nil || !json.Valid(b) {
		t.Errorf("the reply for a decode error cannot be encoded: %v", err)
	}
}

// checkID: a present id is the compact text of a JSON string or number, and
// parses back to itself.
func checkID(t *testing.T, id ID) {
	t.Helper()
	if !json.Valid([]byte(id)) {
		t.Fatalf("id %q is not valid JSON", id)
	}
	back, err := ParseID(json.RawMessage(id))
	if err != nil || back != id {
		t.Fatalf("id %q parses back as %q, %v", id, back, err)
	}
}

func checkAccepted(t *testing.T, data []byte, m *Message) {
	t.Helper()
	if !json.Valid(data) {
		t.Fatalf("accepted invalid JSON")
	}
	kinds := 0
	for _, k := range []bool{m.IsRequest(), m.IsNotification(), m.IsResponse()} {
		if k {
			kinds++
		}
	}
	if kinds != 1 {
		t.Fatalf("message %+v is %d kinds", m, kinds)
	}
	if !m.ID.IsZero() {
		if m.ID != NullID {
			checkID(t, m.ID)
		} else if !m.IsResponse() || m.Error == nil {
			t.Fatalf("only an error reply may have id null: %+v", m)
		}
	}
	if m.Params != nil && (!json.Valid(m.Params) || string(m.Params) == "null") {
		t.Fatalf("params %q", m.Params)
	}

	var wire any
	switch {
	case m.IsRequest() || m.IsNotification():
		if m.Result != nil || m.Error != nil {
			t.Fatalf("request with a result or error: %+v", m)
		}
		var params any
		if m.Params != nil {
			params = m.Params
		}
		wire = request{JSONRPC: Version, ID: m.ID, Method: m.Method, Params: params}
	case m.Error != nil:
		if m.Result != nil || m.Params != nil {
			t.Fatalf("error reply with a result or params: %+v", m)
		}
		wire = errorResponse{JSONRPC: Version, ID: m.ID, Error: m.Error}
	default:
		if m.Result == nil || !json.Valid(m.Result) || m.ID.IsZero() || m.Params != nil {
			t.Fatalf("malformed result reply: %+v", m)
		}
		wire = resultResponse{JSONRPC: Version, ID: m.ID, Result: m.Result}
	}
	b, err := json.Marshal(wire)
	if err != nil {
		t.Fatalf("re-encode %+v: %v", m, err)
	}
	again, err := Decode(b)
	if err != nil {
		t.Fatalf("re-encoded message %s is refused: %v", b, err)
	}
	if again.ID != m.ID || again.Method != m.Method {
		t.Fatalf("re-encoded message %s has id %q method %q, want %q %q", b, again.ID, again.Method, m.ID, m.Method)
	}
	sameJSON(t, "params", again.Params, m.Params)
	sameJSON(t, "result", again.Result, m.Result)
	if (again.Error == nil) != (m.Error == nil) {
		t.Fatalf("re-encoded error %+v, want %+v", again.Error, m.Error)
	}
	if m.Error != nil {
		if again.Error.Code != m.Error.Code || again.Error.Message != m.Error.Message {
			t.Fatalf("re-encoded error %+v, want %+v", again.Error, m.Error)
		}
		d1, _ := again.Error.Data.(json.RawMessage)
		d2, _ := m.Error.Data.(json.RawMessage)
		sameJSON(t, "error data", d1, d2)
	}
}

// sameJSON compares two JSON texts by value (numbers by their text).
func sameJSON(t *testing.T, what string, a, b json.RawMessage) {
	t.Helper()
	if (a == nil) != (b == nil) {
		t.Fatalf("%s: %q vs %q", what, a, b)
	}
	if a == nil {
		return
	}
	va, ea := decodeAny(a)
	vb, eb := decodeAny(b)
	if ea != nil || eb != nil {
		t.Fatalf("%s: %v / %v", what, ea, eb)
	}
	if !reflect.DeepEqual(va, vb) {
		t.Fatalf("%s changed on re-encoding: %q vs %q", what, a, b)
	}
}

func decodeAny(b []byte) (any, error) {
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var v any
	err := d.Decode(&v)
	return v, err
}

// FuzzLineStream splits arbitrary bytes into lines with a small limit, through
// readers that deliver the bytes whole, one at a time or in halves. Reads
// never panic, every message is at most the limit, has no newline and is not
// blank, and the sequence of messages and refusals is exactly what a plain
// model of the framing rules predicts.
func FuzzLineStream(f *testing.F) {
	for _, s := range []struct {
		data  string
		limit uint8
		mode  uint8
	}{
		{"{\"a\":1}\n{\"b\":2}\r\n", 8, 0},
		{"\n\n  \r\n\tx\n", 4, 1},
		{"12345678\n123456789\nok", 7, 2},
		{"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\nb", 3, 0},
		{"a\r\r\n\rb\r", 2, 1},
		{"no newline at all", 63, 3},
		{"123456789", 7, 0}, // a last line of limit+2 (a known bug: skipped)
		{"", 0, 0},
		{"\xff\xfe\n\x00\n", 1, 2},
	} {
		f.Add([]byte(s.data), s.limit, s.mode)
	}
	f.Fuzz(func(t *testing.T, data []byte, limitSeed, mode uint8) {
		limit := int(limitSeed%64) + 1
		var r io.Reader = bytes.NewReader(data)
		switch mode % 4 {
		case 1:
			r = iotest.OneByteReader(r)
		case 2:
			r = iotest.HalfReader(r)
		case 3:
			r = iotest.DataErrReader(r)
		}
		s := NewLineStream(r, io.Discard, limit)
		var got []readOutcome
		for i := 0; ; i++ {
			if i > len(data)+2 {
				t.Fatalf("no end of input after %d reads: %v", i, got)
			}
			msg, err := s.Read()
			if err != nil {
				if !errors.Is(err, ErrMessageTooLarge) && !errors.Is(err, io.EOF) {
					t.Fatalf("Read error %v", err)
				}
				got = append(got, readOutcome{err: err})
				if errors.Is(err, io.EOF) {
					break
				}
				continue
			}
			got = append(got, readOutcome{msg: string(msg)})
		}
		want := frameModel(data, limit, limit)
		for _, o := range got {
			if o.err != nil {
				continue
			}
			if len(o.msg) > limit || bytes.IndexByte([]byte(o.msg), '\n') >= 0 || len(bytes.TrimSpace([]byte(o.msg))) == 0 {
				t.Fatalf("Read returned %q with limit %d", o.msg, limit)
			}
		}
		if !sameOutcomes(got, want) {
			t.Fatalf("reads = %v, want %v", got, want)
		}
	})
}

// frameModel is the framing rule written plainly: lines end at '\n' (one '\r'
// before it is part of the ending), a line over limit is refused, blank lines
// are skipped, and a last line without a newline counts as a line (refused
// over lastLimit).
func frameModel(data []byte, limit, lastLimit int) []readOutcome {
	var out []readOutcome
	for len(data) > 0 {
		var line []byte
		lim := limit
		if i := bytes.IndexByte(data, '\n'); i >= 0 {
			line, data = bytes.TrimSuffix(data[:i], []byte("\r")), data[i+1:]
		} else {
			line, data = data, nil
			lim = lastLimit
		}
		switch {
		case len(line) > lim:
			out = append(out, readOutcome{err: ErrMessageTooLarge})
		case len(bytes.TrimSpace(line)) > 0:
			out = append(out, readOutcome{msg: string(line)})
		}
	}
	return append(out, readOutcome{err: io.EOF})
}

// FuzzDecodeMatchesEncodingJSON holds Decode, which scans a message's members
// after validating it, to the decoding it replaced: encoding/json into a map
// of raw members, ids through json.Unmarshal and StringID. Both must accept
// the same messages with the same fields, and refuse the others with the same
// reply. It shares FuzzDecode's seed corpus.
func FuzzDecodeMatchesEncodingJSON(f *testing.F) {
	addDecodeSeeds(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		got, gotErr := Decode(data)
		want, wantErr := decodeWithEncodingJSON(data)
		if !reflect.DeepEqual(got, want) || !reflect.DeepEqual(gotErr, wantErr) {
			t.Fatalf("Decode(%q) = %#v, %v;\nencoding/json gives %#v, %v", data, got, gotErr, want, wantErr)
		}
	})
}

// addDecodeSeeds adds FuzzDecode's seed corpus to f.
func addDecodeSeeds(f *testing.F) {
	f.Helper()
	files, err := filepath.Glob(filepath.Join("testdata", "fuzz", "FuzzDecode", "*"))
	if err != nil {
		f.Fatal(err)
	}
	for _, name := range files {
		data, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		// A corpus file: "go test fuzz v1", then one []byte("...") line.
		_, value, ok := strings.Cut(string(data), "\n")
		value = strings.TrimSpace(value)
		if !ok || !strings.HasPrefix(value, "[]byte(") {
			f.Fatalf("%s: not a []byte corpus entry", name)
		}
		s, err := strconv.Unquote(strings.TrimSuffix(strings.TrimPrefix(value, "[]byte("), ")"))
		if err != nil {
			f.Fatalf("%s: %v", name, err)
		}
		f.Add([]byte(s))
	}
}

// decodeWithEncodingJSON is Decode as it was written with encoding/json.
func decodeWithEncodingJSON(data []byte) (*Message, error) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(data, &fields); err != nil {
		return nil, classifyUndecodable(data)
	}
	if fields == nil {
		return nil, invalid(NullID, "message must be a JSON object")
	}
	_, hasMethod := fields["method"]
	_, hasResult := fields["result"]
	_, hasError := fields["error"]
	isResponse := !hasMethod && (hasResult || hasError)
	id := ID("")
	if raw, ok := fields["id"]; ok {
		if hasError && !hasMethod && !hasResult && bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
			id = NullID
		} else {
			var err error
			if id, err = parseIDWithEncodingJSON(raw); err != nil {
				return nil, markResponse(invalid(NullID, err.Error()), isResponse)
			}
		}
	}
	m := members{jsonrpc: fields["jsonrpc"], id: fields["id"], method: fields["method"],
		params: fields["params"], result: fields["result"], error: fields["error"]}
	msg, err := decodeFields(m, id)
	if err != nil {
		return nil, markResponse(err, isResponse)
	}
	return msg, nil
}

// parseIDWithEncodingJSON is ParseID without its shortcuts for plain
// strings and plain integers.
func parseIDWithEncodingJSON(raw json.RawMessage) (ID, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) > 0 && raw[0] == '"' {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return "", fmt.Errorf(`"id" must be a string or a number`)
		}
		return StringID(s), nil
	}
	if len(raw) > 0 && (raw[0] == '-' || (raw[0] >= '0' && raw[0] <= '9')) {
		var n json.Number
		if err := json.Unmarshal(raw, &n); err != nil {
			return "", fmt.Errorf(`"id" must be a string or a number`)
		}
		return ID(n), nil
	}
	return ParseID(raw)
}
