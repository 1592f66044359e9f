// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package audit

import "strings"

// TruncateDetail shortens msg to fit a record's detail (MaxDetail bytes),
// ending it with "..." when it was cut, and never inside a UTF-8 sequence.
func TruncateDetail(msg string) string {
	if len(msg) <= MaxDetail {
		return msg
	}
	return strings.ToValidUTF8(msg[:MaxDetail-3], "") + "..."
}
