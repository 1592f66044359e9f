package main

import (
	"bytes"
	"errors"
	"strings"
)

// A skim finds the members of a JSON object without decoding it: replies of
// a megabyte or more come by the thousand, and decoding each in full would
// make the load generator, not the program under test, the bottleneck.
// Strings are skipped with bytes.IndexByte; nothing is validated beyond the
// structure the skim needs. The first reply of every run is decoded in full
// (see the protocols' checks).

var errSkim = errors.New("not a JSON object")

// members calls fn with the raw key (between its quotes, escapes left as they
// are) and the raw value of each member of the JSON object obj, top level
// only, until fn returns false.
func members(obj []byte, fn func(key, val []byte) bool) error {
	i := skipSpace(obj, 0)
	if i >= len(obj) || obj[i] != '{' {
		return errSkim
	}
	i = skipSpace(obj, i+1)
	if i < len(obj) && obj[i] == '}' {
		return nil
	}
	for {
		if i >= len(obj) || obj[i] != '"' {
			return errSkim
		}
		end, err := skipString(obj, i)
		if err != nil {
			return err
		}
		key := obj[i+1 : end-1]
		i = skipSpace(obj, end)
		if i >= len(obj) || obj[i] != ':' {
			return errSkim
		}
		i = skipSpace(obj, i+1)
		end, err = skipValue(obj, i)
		if err != nil {
			return err
		}
		if !fn(key, obj[i:end]) {
			return nil
		}
		i = skipSpace(obj, end)
		if i >= len(obj) {
			return errSkim
		}
		switch obj[i] {
		case '}':
			return nil
		case ',':
			i = skipSpace(obj, i+1)
		default:
			return errSkim
		}
	}
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

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// skipString returns the index just past the string that starts at b[i].
func skipString(b []byte, i int) (int, error) {
	j := i + 1
	for {
		k := bytes.IndexByte(b[j:], '"')
		if k < 0 {
			return 0, errSkim
		}
		q := j + k
		backslashes := 0
		for p := q - 1; p > i && b[p] == '\\'; p-- {
			backslashes++
		}
		if backslashes%2 == 0 {
			return q + 1, nil
		}
		j = q + 1
	}
}

// skipValue returns the index just past the value that starts at b[i].
func skipValue(b []byte, i int) (int, error) {
	if i >= len(b) {
		return 0, errSkim
	}
	switch b[i] {
	case '"':
		return skipString(b, i)
	case '{', '[':
		depth := 0
		for j := i; j < len(b); j++ {
			switch b[j] {
			case '"':
				end, err := skipString(b, j)
				if err != nil {
					return 0, err
				}
				j = end - 1
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return j + 1, nil
				}
			}
		}
		return 0, errSkim
	}
	j := i
	for j < len(b) && strings.IndexByte(",}] \t\r\n", b[j]) < 0 {
		j++
	}
	if j == i {
		return 0, errSkim
	}
	return j, nil
}
