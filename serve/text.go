// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package serve

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"strings"
	"unicode/utf8"

	"golang.org/x/text/encoding/unicode"
)

// textChunk is the size of the reads of head and tail (the reference's
// 1024-byte chunks: tail stops at a chunk boundary, so the chunk size shows
// in what it returns when a multi-byte character straddles one).
const textChunk = 1024

// DecodeText decodes file content as the reference does (Node's UTF-8
// decoding): valid UTF-8 unchanged, a BOM kept, each maximal invalid
// subsequence replaced by one U+FFFD (the WHATWG rule, which Go's own
// conversions do not follow).
func DecodeText(data []byte) string {
	if utf8.Valid(data) {
		return string(data)
	}
	out, err := unicode.UTF8.NewDecoder().Bytes(data)
	if err != nil {
		// The decoder replaces invalid input and never fails; this keeps
		// the content readable anyway.
		return strings.ToValidUTF8(string(data), "\uFFFD")
	}
	return string(out)
}

// NormalizeLineEndings replaces every CRLF with LF (lone CRs stay).
func NormalizeLineEndings(text string) string {
	return strings.ReplaceAll(text, "\r\n", "\n")
}

// HeadText returns the first n lines of the content r yields, as the
// reference's read_text_file with head: lines split on LF (a CR stays in its
// line), joined with LF, never the final newline; reading stops in the
// 1024-byte chunk where the n-th line ends. n may be fractional (1.5 reads
// two lines: the reference loops while it has fewer than n) or negative
// (nothing). The caller treats n == 0 as "no head".
func HeadText(r io.Reader, n float64) (string, error) {
	var lines []string
	var pending []byte // bytes after the last LF seen
	chunk := make([]byte, textChunk)
	for float64(len(lines)) < n {
		got, err := io.ReadFull(r, chunk)
		if got > 0 {
			pending = append(pending, chunk[:got]...)
			if last := bytes.LastIndexByte(pending, '\n'); last >= 0 {
				// An LF byte never sits inside a multi-byte sequence or an
				// invalid one, so decoding line by line is decoding the whole.
				for _, line := range bytes.Split(pending[:last], []byte{'\n'}) {
					lines = append(lines, DecodeText(line))
					if float64(len(lines)) >= n {
						break
					}
				}
				pending = append([]byte(nil), pending[last+1:]...)
			}
		}
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			break
		}
		if err != nil {
			return "", fmt.Errorf("serve: head: %w", err)
		}
	}
	if len(pending) > 0 && float64(len(lines)) < n {
		lines = append(lines, DecodeText(pending))
	}
	return strings.Join(lines, "\n"), nil
}

// TailText returns the last n lines of the size bytes r holds, as the
// reference's read_text_file with tail: it reads 1024-byte chunks from the
// end until it has seen n LF bytes or reached the start, decodes them,
// replaces CRLF with LF, splits on LF and keeps the last n pieces (so a file
// ending in LF yields n-1 lines and that LF). A fractional n keeps its
// integer part of pieces; a negative n yields "". The caller treats n == 0
// as "no tail".
func TailText(r io.ReaderAt, size int64, n float64) (string, error) {
	if size <= 0 {
		return "", nil
	}
	var collected []byte
	position := size
	newlines := 0
	chunk := make([]byte, textChunk)
	for position > 0 && float64(newlines) < n {
		want := int64(textChunk)
		if position < want {
			want = position
		}
		position -= want
		got, err := r.ReadAt(chunk[:want], position)
		if got == 0 {
			if err != nil && !errors.Is(err, io.EOF) {
				return "", fmt.Errorf("serve: tail: %w", err)
			}
			break
		}
		part := chunk[:got]
		collected = append(append([]byte(nil), part...), collected...)
		newlines += bytes.Count(part, []byte{'\n'})
	}
	pieces := strings.Split(NormalizeLineEndings(DecodeText(collected)), "\n")
	return strings.Join(jsSliceFrom(pieces, -n), "\n"), nil
}

// jsSliceFrom is JavaScript's array.slice(start) for a number start:
// truncated toward zero, negative counting from the end.
func jsSliceFrom(list []string, start float64) []string {
	k := math.Trunc(start)
	length := float64(len(list))
	var from float64
	if k < 0 {
		from = math.Max(length+k, 0)
	} else {
		from = math.Min(k, length)
	}
	return list[int(from):]
}

// ErrHeadAndTail is read_text_file's refusal of head and tail together
// (both non-zero), with the reference's text; the reference checks the path
// first.
var ErrHeadAndTail = errors.New("Cannot specify both head and tail parameters simultaneously")
