// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package audit

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"
)

// encodeCases are records with every field set, none set, and the values
// that need escaping.
var encodeCases = []Record{
	{},
	{V: 1, Seq: 7, Time: "2026-11-22T09:00:00.000000000Z", Kind: KindDecision, Server: "s<1>", SessionID: "x",
		DecisionID: "d-1", Method: "files/read", Operation: "read", Paths: []string{"/a/\"b\"", "/c\u2028"},
		Allow: Bool(false), Code: "PERMISSION_DENIED", Reasons: []string{"secrets: \".env\" & more"},
		PolicyRevision: "rev", LatencyUs: 12, Prev: "ab"},
	{V: 1, Seq: 1 << 63, Kind: KindOutcome, Outcome: "ok", Bytes: 1 << 40, DurationUs: -3, Errno: 2, Detail: "bad \xff",
		Paths: []string{}, Reasons: []string{}, Allow: Bool(true)},
	{V: 1, Kind: KindSegmentStart, Segment: "seg", PrevSegment: "p", KeyID: "k", MACKeyID: "m", ProtocolVersion: "2025-11-25",
		Transport: "stdio", Mac: "ff"},
	{V: 1, Kind: KindRetention, Removed: []RemovedSegment{{Segment: "a", LastSeq: 3, LastMAC: "x"}, {Segment: "<b>"}}},
}

// TestAppendJSONMatchesMarshal: a record's hand-written encoding is byte for
// byte json.Marshal's.
func TestAppendJSONMatchesMarshal(t *testing.T) {
	for i, r := range encodeCases {
		want, err := json.Marshal(&r)
		if err != nil {
			t.Fatal(err)
		}
		if got := r.appendJSON(nil); !bytes.Equal(got, want) {
			t.Errorf("record %d:\n got %s\nwant %s", i, got, want)
		}
	}
}

// FuzzAppendJSON compares the hand-written encoding with json.Marshal for
// records built from any strings and numbers.
func FuzzAppendJSON(f *testing.F) {
	f.Add("2026-11-22T09:00:00Z", "decision", "/a", "reason", "detail", int64(5), uint64(9), true, 0)
	f.Add("", "", "", "", "\xff<&>", int64(-1), uint64(0), false, 3)
	f.Fuzz(func(t *testing.T, s1, s2, s3, s4, s5 string, n int64, seq uint64, allow bool, shape int) {
		r := Record{V: int(n), Seq: seq, Time: s1, Kind: Kind(s2), Server: s3, Method: s4, Detail: s5,
			Code: s1, Outcome: s2, Prev: s3, Mac: s4, LatencyUs: n, Bytes: -n, Errno: int(n >> 32)}
		if shape&1 != 0 {
			r.Paths, r.Reasons = []string{s1, s2}, []string{s5}
		}
		if shape&2 != 0 {
			r.Allow = Bool(allow)
		}
		if shape&4 != 0 {
			r.Removed = []RemovedSegment{{Segment: s4, LastSeq: seq, LastMAC: s5}}
		}
		want, err := json.Marshal(&r)
		if err != nil {
			t.Fatal(err)
		}
		if got := r.appendJSON(nil); !bytes.Equal(got, want) {
			t.Fatalf("got %s\nwant %s", got, want)
		}
	})
}

// TestAppendJSONCoversEveryField sets every field of a Record (and of a
// RemovedSegment) to a value that is not zero, by reflection, and compares
// the hand-written encoding with json.Marshal: a field added to Record but
// not to appendJSON would vanish from the trail with valid MACs, and fails
// here.
func TestAppendJSONCoversEveryField(t *testing.T) {
	var r Record
	fill(t, reflect.ValueOf(&r).Elem())
	want, err := json.Marshal(&r)
	if err != nil {
		t.Fatal(err)
	}
	if got := r.appendJSON(nil); !bytes.Equal(got, want) {
		t.Fatalf("a record with every field set:\n got %s\nwant %s", got, want)
	}
}

// fill sets every field of the struct v to a non-zero value.
func fill(t *testing.T, v reflect.Value) {
	t.Helper()
	for i := range v.NumField() {
		f := v.Field(i)
		name := v.Type().Field(i).Name
		switch f.Kind() {
		case reflect.String:
			f.SetString("<" + name + ">")
		case reflect.Int, reflect.Int64:
			f.SetInt(int64(i + 1))
		case reflect.Uint64:
			f.SetUint(uint64(i + 1))
		case reflect.Bool:
			f.SetBool(true)
		case reflect.Pointer:
			p := reflect.New(f.Type().Elem())
			if p.Elem().Kind() != reflect.Bool {
				t.Fatalf("field %s: fill does not know pointers to %s", name, p.Elem().Kind())
			}
			p.Elem().SetBool(false) // non-nil: set, whatever its value
			f.Set(p)
		case reflect.Slice:
			s := reflect.MakeSlice(f.Type(), 2, 2)
			for j := range 2 {
				switch e := s.Index(j); e.Kind() {
				case reflect.String:
					e.SetString(name + "-" + string(rune('a'+j)))
				case reflect.Struct:
					fill(t, e)
				default:
					t.Fatalf("field %s: fill does not know slices of %s", name, e.Kind())
				}
			}
			f.Set(s)
		default:
			t.Fatalf("field %s: fill does not know %s", name, f.Kind())
		}
	}
}

// TestFormatTimeMatchesLayout: the digit-by-digit formatTime writes what
// time.Format does with TimeLayout, for times across the whole range of years
// (outside 0-9999 it is time.Format itself) and in any location.
func TestFormatTimeMatchesLayout(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	east := time.FixedZone("east", 5*3600+1800)
	times := []time.Time{
		{}, time.Unix(0, 0), time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.UTC),
		time.Date(-1, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(10000, 1, 1, 0, 0, 0, 1, time.UTC),
		time.Date(2026, 11, 22, 0, 30, 0, 7, east),
	}
	for range 20000 {
		times = append(times, time.Unix(rng.Int64N(400*365*86400)-100*365*86400, rng.Int64N(1e9)).In(east))
	}
	for _, tm := range times {
		if got, want := formatTime(tm), tm.UTC().Format(TimeLayout); got != want {
			t.Fatalf("formatTime(%v) = %q, want %q", tm, got, want)
		}
	}
}

// BenchmarkRecordAppendJSON is the cost of encoding a decision record and an outcome record,
// the two records of every request.
func BenchmarkRecordAppendJSON(b *testing.B) {
	for _, kind := range []Kind{KindDecision, KindOutcome} {
		b.Run(string(kind), func(b *testing.B) {
			r := sampleRecord(kind, 1)
			r.V, r.Seq, r.Time, r.Prev = 1, 12345, "2026-11-22T09:00:00.000000000Z", strings.Repeat("ab", 32)
			buf := r.appendJSON(nil)
			b.SetBytes(int64(len(buf)))
			b.ReportAllocs()
			for b.Loop() {
				buf = r.appendJSON(buf[:0])
			}
		})
	}
}
