// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package serve

import (
	"math"
	"math/big"
	"slices"
	"sort"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"

	"golang.org/x/text/collate"
	"golang.org/x/text/language"
)

// Entry is one directory entry as the listing tools see it: its name, whether
// it is a real directory (a symlink, even to a directory, is not), and for
// list_directory_with_sizes the size stat reports for it (following links; 0
// when stat fails).
type Entry struct {
	Name  string
	IsDir bool
	Size  int64
}

// sortByBytes orders entries as Node's readdir gives them (libuv sorts
// scandir with strcmp: byte order), keeping the caller's slice intact: the
// caller's slice itself is returned when it is in that order already (the
// executor lists a directory's names in byte order), so the result is not
// to be changed.
func sortByBytes(entries []Entry) []Entry {
	if slices.IsSortedFunc(entries, func(a, b Entry) int { return strings.Compare(a.Name, b.Name) }) {
		return entries
	}
	out := append([]Entry(nil), entries...)
	sort.SliceStable(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// entryName is the name as Node holds it: invalid UTF-8 bytes are U+FFFD.
func entryName(e Entry) string {
	if utf8.ValidString(e.Name) {
		return e.Name
	}
	return DecodeText([]byte(e.Name))
}

// ListingText is list_directory's result text: "[DIR] name" for a real
// directory, "[FILE] name" for anything else, in byte order, one a line, no
// trailing newline ("" for an empty directory).
func ListingText(entries []Entry) string {
	var b strings.Builder
	size := 0
	for _, e := range entries {
		size += len("[FILE] ") + len(e.Name) + len("\n")
	}
	b.Grow(size)
	for n, e := range sortByBytes(entries) {
		if n > 0 {
			b.WriteByte('\n')
		}
		if e.IsDir {
			b.WriteString("[DIR] ")
		} else {
			b.WriteString("[FILE] ")
		}
		b.WriteString(entryName(e))
	}
	return b.String()
}

// ListingWithSizesText is list_directory_with_sizes' result text. sortBy
// "size" orders by size, largest first (directories take part with their
// stat size), ties in byte order; anything else orders by name with the
// root-locale collation of JavaScript's localeCompare, ties in byte order.
// Each line is "[FILE] " + name padded to 30 UTF-16 units + " " + size
// padded on the left to 10, or "[DIR] " + padded name + " " (a trailing
// space, no size); then a blank line, "Total: F files, D directories" and
// "Combined size: S" (files only).
func ListingWithSizesText(entries []Entry, sortBy string) string {
	sorted := sortByBytes(entries)
	if sortBy == "size" {
		sorted = slices.Clone(sorted)
		sort.SliceStable(sorted, func(i, j int) bool { return sorted[i].Size > sorted[j].Size })
	} else {
		c := collate.New(language.Und)
		names := make(map[int]string, len(sorted))
		for n := range sorted {
			names[n] = entryName(sorted[n])
		}
		idx := make([]int, len(sorted))
		for n := range idx {
			idx[n] = n
		}
		sort.SliceStable(idx, func(i, j int) bool { return c.CompareString(names[idx[i]], names[idx[j]]) < 0 })
		reordered := make([]Entry, len(sorted))
		for n, k := range idx {
			reordered[n] = sorted[k]
		}
		sorted = reordered
	}
	lines := make([]string, 0, len(sorted)+3)
	var files, dirs int
	var total int64
	for _, e := range sorted {
		name := jsPadEnd(entryName(e), 30)
		if e.IsDir {
			dirs++
			lines = append(lines, "[DIR] "+name+" ")
			continue
		}
		files++
		total += e.Size
		lines = append(lines, "[FILE] "+name+" "+jsPadStart(FormatSize(e.Size), 10))
	}
	lines = append(lines, "",
		"Total: "+strconv.Itoa(files)+" files, "+strconv.Itoa(dirs)+" directories",
		"Combined size: "+FormatSize(total))
	return strings.Join(lines, "\n")
}

// FormatSize is the reference's formatSize: "0 B" for 0 or less, whole bytes
// below 1024 ("512 B"), else the value in KB, MB, GB or TB (the unit from
// floor(ln(b)/ln(1024)), TB the largest) with two decimals, rounded half up
// on the exact binary value as JavaScript's toFixed(2) does (1152 bytes is
// "1.13 KB"; 1048575 is "1024.00 KB").
func FormatSize(size int64) string {
	units := []string{"B", "KB", "MB", "GB", "TB"}
	if size <= 0 {
		return "0 B"
	}
	i := int(math.Floor(math.Log(float64(size)) / math.Log(1024)))
	if i <= 0 {
		return strconv.FormatInt(size, 10) + " B"
	}
	unit := min(i, len(units)-1)
	return jsToFixed2(float64(size)/math.Pow(1024, float64(unit))) + " " + units[unit]
}

// jsToFixed2 is JavaScript's x.toFixed(2) for 0 <= x < 1e21: the integer n
// nearest to x*100 computed exactly, the larger on a tie.
func jsToFixed2(x float64) string {
	r := new(big.Rat).SetFloat64(x)
	r.Mul(r, big.NewRat(100, 1))
	r.Add(r, big.NewRat(1, 2))
	n := new(big.Int).Quo(r.Num(), r.Denom()) // floor, as r >= 0
	digits := n.String()
	for len(digits) < 3 {
		digits = "0" + digits
	}
	return digits[:len(digits)-2] + "." + digits[len(digits)-2:]
}

// utf16Len is the length of s in UTF-16 code units (JavaScript's length).
func utf16Len(s string) int {
	n := 0
	for _, r := range s {
		n += utf16.RuneLen(r)
	}
	return n
}

// jsPadEnd is JavaScript's s.padEnd(width) with spaces.
func jsPadEnd(s string, width int) string {
	if pad := width - utf16Len(s); pad > 0 {
		return s + strings.Repeat(" ", pad)
	}
	return s
}

// jsPadStart is JavaScript's s.padStart(width) with spaces.
func jsPadStart(s string, width int) string {
	if pad := width - utf16Len(s); pad > 0 {
		return strings.Repeat(" ", pad) + s
	}
	return s
}
