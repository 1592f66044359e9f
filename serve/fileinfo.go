// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package serve

import (
	"fmt"
	"io/fs"
	"strconv"
	"strings"
	"time"

	"github.com/fsbroker/fsbroker/broker/corridor"
	"github.com/fsbroker/fsbroker/broker/executor"
)

// FileInfo is what get_file_info reports, from a stat of the real path (a
// link reports its target). The times carry the location the dates are
// written in (the reference uses its process's time zone).
type FileInfo struct {
	Size     int64
	Created  time.Time // birth time; the Unix epoch where the file system has none
	Modified time.Time
	Accessed time.Time
	IsDir    bool
	IsFile   bool
	Mode     fs.FileMode // only the permission bits are shown
}

// fileInfoOf is what get_file_info shows of the corridor's stat, its dates
// in the process's time zone (TZ, as the reference's). A time the platform
// or file system does not report is the Unix epoch, as the reference shows
// a birth time the kernel leaves zero.
func fileInfoOf(st corridor.StatResult) FileInfo {
	at := func(t time.Time) time.Time {
		if t.IsZero() {
			t = time.Unix(0, 0)
		}
		return t.In(time.Local)
	}
	return FileInfo{Size: st.Size, Created: at(st.Born), Modified: at(st.Modified), Accessed: at(st.Accessed),
		IsDir: st.Type == executor.TypeDirectory, IsFile: st.Type == executor.TypeFile, Mode: st.Mode}
}

// FileInfoText is get_file_info's result text: "key: value" lines in the
// reference's order (size, created, modified, accessed, isDirectory,
// isFile, permissions), dates as JavaScript's Date.prototype.toString,
// permissions as the last three octal digits.
func FileInfoText(info FileInfo) string {
	return strings.Join([]string{
		"size: " + strconv.FormatInt(info.Size, 10),
		"created: " + JSDateString(info.Created),
		"modified: " + JSDateString(info.Modified),
		"accessed: " + JSDateString(info.Accessed),
		"isDirectory: " + strconv.FormatBool(info.IsDir),
		"isFile: " + strconv.FormatBool(info.IsFile),
		fmt.Sprintf("permissions: %03o", info.Mode.Perm()),
	}, "\n")
}

// zoneNames are the long English names ICU gives time zones in the root
// locale, by Go's abbreviation, for the zones a host is likely to run in.
// A zone not here is written with its abbreviation.
var zoneNames = map[string]string{
	"UTC":  "Coordinated Universal Time",
	"GMT":  "Greenwich Mean Time",
	"EST":  "Eastern Standard Time",
	"EDT":  "Eastern Daylight Time",
	"CST":  "Central Standard Time",
	"CDT":  "Central Daylight Time",
	"MST":  "Mountain Standard Time",
	"MDT":  "Mountain Daylight Time",
	"PST":  "Pacific Standard Time",
	"PDT":  "Pacific Daylight Time",
	"CET":  "Central European Standard Time",
	"CEST": "Central European Summer Time",
	"BST":  "British Summer Time",
	"JST":  "Japan Standard Time",
}

// JSDateString is JavaScript's Date.prototype.toString of t in t's
// location, seconds truncated: "Fri Jan 02 2026 03:04:05 GMT+0000
// (Coordinated Universal Time)".
func JSDateString(t time.Time) string {
	abbrev, offset := t.Zone()
	sign := '+'
	if offset < 0 {
		sign = '-'
		offset = -offset
	}
	name, ok := zoneNames[abbrev]
	if !ok {
		name = abbrev
	}
	year := t.Year()
	yearText := fmt.Sprintf("%04d", year)
	if year < 0 {
		yearText = fmt.Sprintf("-%06d", -year)
	}
	return fmt.Sprintf("%s %s %02d %s %02d:%02d:%02d GMT%c%02d%02d (%s)",
		t.Weekday().String()[:3], t.Month().String()[:3], t.Day(), yearText,
		t.Hour(), t.Minute(), t.Second(), sign, offset/3600, offset%3600/60, name)
}
