// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package serve

import (
	"strings"
	"unicode"
)

// EditNoMatchError is edit_file's refusal of an edit whose text is not in
// the file, exactly nor line by line with whitespace trimmed. Nothing is
// written when any edit fails.
type EditNoMatchError struct {
	OldText string // as sent
}

// Error returns the reference's text: "Could not find exact match for
// edit:\n" and the oldText as sent.
func (e *EditNoMatchError) Error() string {
	return "Could not find exact match for edit:\n" + e.OldText
}

// ApplyEdits applies edit_file's edits, in order, to the decoded file
// content (DecodeText), as the reference's applyFileEdits does. It returns
// the original with CRLF made LF (what the diff starts from) and the
// modified text (what is written, LF line endings throughout). For each
// edit, with CRLF made LF in both texts: the first exact occurrence of
// oldText is replaced literally (an empty oldText matches at the start);
// failing that, the first window of lines equal to oldText's lines after
// trimming JavaScript whitespace is replaced by newText's lines re-indented
// as the reference does; failing that, *EditNoMatchError.
func ApplyEdits(content string, edits []Edit) (original, modified string, err error) {
	original = NormalizeLineEndings(content)
	modified = original
	for _, e := range edits {
		oldText := NormalizeLineEndings(e.OldText)
		newText := NormalizeLineEndings(e.NewText)
		if i := strings.Index(modified, oldText); i >= 0 {
			modified = modified[:i] + newText + modified[i+len(oldText):]
			continue
		}
		oldLines := strings.Split(oldText, "\n")
		contentLines := strings.Split(modified, "\n")
		matched := false
		for i := 0; i <= len(contentLines)-len(oldLines); i++ {
			if !linesMatchTrimmed(oldLines, contentLines[i:i+len(oldLines)]) {
				continue
			}
			originalIndent := jsLeadingSpace(contentLines[i])
			newLines := strings.Split(newText, "\n")
			for j, line := range newLines {
				if j == 0 {
					newLines[j] = originalIndent + jsTrimStart(line)
					continue
				}
				var oldIndent string
				if j < len(oldLines) {
					oldIndent = jsLeadingSpace(oldLines[j])
				}
				newIndent := jsLeadingSpace(line)
				if oldIndent != "" && newIndent != "" {
					relative := utf16Len(newIndent) - utf16Len(oldIndent)
					newLines[j] = originalIndent + strings.Repeat(" ", max(0, relative)) + jsTrimStart(line)
				}
			}
			replaced := append(append(append([]string(nil), contentLines[:i]...), newLines...), contentLines[i+len(oldLines):]...)
			modified = strings.Join(replaced, "\n")
			matched = true
			break
		}
		if !matched {
			return "", "", &EditNoMatchError{OldText: e.OldText}
		}
	}
	return original, modified, nil
}

// linesMatchTrimmed reports whether each old line equals its content line
// after JavaScript's trim() of both.
func linesMatchTrimmed(oldLines, contentLines []string) bool {
	for j, l := range oldLines {
		if jsTrim(l) != jsTrim(contentLines[j]) {
			return false
		}
	}
	return true
}

// isJSSpace reports whether r is JavaScript whitespace (trim() and \s):
// TAB, LF, VT, FF, CR, space, U+00A0, U+FEFF, the Zs characters, U+2028
// and U+2029. Go's unicode.IsSpace differs (U+0085 in, U+FEFF out).
func isJSSpace(r rune) bool {
	switch r {
	case '\t', '\n', '\v', '\f', '\r', ' ', 0xA0, 0xFEFF, 0x2028, 0x2029:
		return true
	}
	return unicode.Is(unicode.Zs, r)
}

func jsTrim(s string) string { return strings.TrimFunc(s, isJSSpace) }

func jsTrimStart(s string) string { return strings.TrimLeftFunc(s, isJSSpace) }

// jsLeadingSpace is the match of /^\s*/.
func jsLeadingSpace(s string) string { return s[:len(s)-len(jsTrimStart(s))] }

// EditDiffText is edit_file's result text: jsdiff's patch of original
// against modified under the real path (headers "original" and
// "modified"), fenced as a diff block with the fewest backticks (three or
// more) that the patch does not contain in a row, then a blank line.
func EditDiffText(realPath, original, modified string) string {
	patch := CreateTwoFilesPatch(realPath, realPath, NormalizeLineEndings(original), NormalizeLineEndings(modified), "original", "modified")
	ticks := 3
	for strings.Contains(patch, strings.Repeat("`", ticks)) {
		ticks++
	}
	fence := strings.Repeat("`", ticks)
	return fence + "diff\n" + patch + fence + "\n\n"
}
