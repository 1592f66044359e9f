// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"errors"

	"github.com/fsbroker/fsbroker/internal/jsonx"
)

// A skim finds the members of a JSON object without decoding it: replies of
// a megabyte or more come by the thousand, and decoding each in full would
// make the load generator, not the program under test, the bottleneck.
// Strings are skipped with bytes.IndexByte (jsonx.ObjectScanner); nothing is
// validated beyond the structure the skim needs. The first reply of every
// run is decoded in full (see the protocols' checks).

var errSkim = errors.New("not a JSON object")

// members calls fn with the raw key (between its quotes, escapes left as they
// are) and the raw value of each member of the JSON object obj, top level
// only, until fn returns false.
func members(obj []byte, fn func(key, val []byte) bool) error {
	s := jsonx.ScanObject(obj)
	for s.Next() {
		m := s.Member()
		if !fn(m.Name[1:len(m.Name)-1], m.Value) {
			return nil
		}
	}
	if _, ok := s.End(); !ok {
		return errSkim
	}
	return nil
}

// member returns the raw value of the member key of obj, or nil.
func member(obj []byte, key string) []byte {
	var v []byte
	members(obj, func(k, val []byte) bool {
		if string(k) == key {
			v = val
			return false
		}
		return true
	})
	return v
}
