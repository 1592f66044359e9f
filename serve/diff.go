// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package serve

import (
	"strconv"
	"strings"
)

// This file is a port of the parts of jsdiff 8.0.4 (npm "diff") that the
// reference's edit_file uses: createTwoFilesPatch with its defaults (line
// diff, 4 lines of context): diff/base.js (its Myers variant, whose choices
// between equally short scripts decide which lines a hunk shows),
// diff/line.js (the tokenizer) and patch/create.js (hunks and format). No
// Go diff library pairs lines the way jsdiff does, and a different pairing
// gives a different patch, so the port follows the JavaScript step by step.

// diffComponent is a run of tokens that are common, added or removed; a
// path's components form a list from its last one backwards, as in jsdiff.
type diffComponent struct {
	count   int
	added   bool
	removed bool
	prev    *diffComponent
	lines   []string // set by buildValues
}

// diffPath is a furthest-reaching path on one diagonal.
type diffPath struct {
	oldPos int
	last   *diffComponent
}

// tokenizeLines is line.js's tokenize: each line with its terminator ("\n"
// or "\r\n"), the last one without when the text does not end in one.
func tokenizeLines(value string) []string {
	var tokens []string
	for len(value) > 0 {
		i := strings.IndexByte(value, '\n')
		if i < 0 {
			tokens = append(tokens, value)
			break
		}
		tokens = append(tokens, value[:i+1])
		value = value[i+1:]
	}
	return tokens
}

// diffLineTokens is base.js's diffWithOptionsObj for line tokens, without a
// maximum edit length or time limit: the list of common, removed and added
// runs turning oldTokens into newTokens.
func diffLineTokens(oldTokens, newTokens []string) []*diffComponent {
	newLen, oldLen := len(newTokens), len(oldTokens)
	maxEditLength := newLen + oldLen
	// bestPath[k+offset] is the path on diagonal k (nil: none).
	offset := maxEditLength + 1
	bestPath := make([]*diffPath, 2*offset+1)
	bestPath[offset] = &diffPath{oldPos: -1}
	newPos := extractCommon(bestPath[offset], newTokens, oldTokens, 0)
	if bestPath[offset].oldPos+1 >= oldLen && newPos+1 >= newLen {
		return buildValues(bestPath[offset].last, newTokens, oldTokens)
	}
	minDiagonal, maxDiagonal := -maxEditLength-1, maxEditLength+1
	for editLength := 1; editLength <= maxEditLength; editLength++ {
		for diagonal := max(minDiagonal, -editLength); diagonal <= min(maxDiagonal, editLength); diagonal += 2 {
			removePath, addPath := bestPath[diagonal-1+offset], bestPath[diagonal+1+offset]
			if removePath != nil {
				bestPath[diagonal-1+offset] = nil
			}
			canAdd := false
			if addPath != nil {
				addPathNewPos := addPath.oldPos - diagonal
				canAdd = 0 <= addPathNewPos && addPathNewPos < newLen
			}
			canRemove := removePath != nil && removePath.oldPos+1 < oldLen
			if !canAdd && !canRemove {
				bestPath[diagonal+offset] = nil
				continue
			}
			var basePath *diffPath
			if !canRemove || (canAdd && removePath.oldPos < addPath.oldPos) {
				basePath = addToPath(addPath, true, false, 0)
			} else {
				basePath = addToPath(removePath, false, true, 1)
			}
			newPos = extractCommon(basePath, newTokens, oldTokens, diagonal)
			if basePath.oldPos+1 >= oldLen && newPos+1 >= newLen {
				return buildValues(basePath.last, newTokens, oldTokens)
			}
			bestPath[diagonal+offset] = basePath
			if basePath.oldPos+1 >= oldLen {
				maxDiagonal = min(maxDiagonal, diagonal-1)
			}
			if newPos+1 >= newLen {
				minDiagonal = max(minDiagonal, diagonal+1)
			}
		}
	}
	// Unreachable: an edit script of length oldLen+newLen always exists.
	return nil
}

// addToPath is base.js's addToPath: one more added or removed token.
func addToPath(p *diffPath, added, removed bool, oldPosInc int) *diffPath {
	last := p.last
	if last != nil && last.added == added && last.removed == removed {
		return &diffPath{oldPos: p.oldPos + oldPosInc,
			last: &diffComponent{count: last.count + 1, added: added, removed: removed, prev: last.prev}}
	}
	return &diffPath{oldPos: p.oldPos + oldPosInc,
		last: &diffComponent{count: 1, added: added, removed: removed, prev: last}}
}

// extractCommon is base.js's extractCommon: follow the diagonal while the
// tokens are equal; returns the new position.
func extractCommon(p *diffPath, newTokens, oldTokens []string, diagonal int) int {
	oldPos := p.oldPos
	newPos := oldPos - diagonal
	common := 0
	for newPos+1 < len(newTokens) && oldPos+1 < len(oldTokens) && oldTokens[oldPos+1] == newTokens[newPos+1] {
		newPos++
		oldPos++
		common++
	}
	if common > 0 {
		p.last = &diffComponent{count: common, prev: p.last}
	}
	p.oldPos = oldPos
	return newPos
}

// buildValues is base.js's buildValues: the components in order, each with
// its lines.
func buildValues(last *diffComponent, newTokens, oldTokens []string) []*diffComponent {
	var components []*diffComponent
	for c := last; c != nil; c = c.prev {
		components = append(components, c)
	}
	for i, j := 0, len(components)-1; i < j; i, j = i+1, j-1 {
		components[i], components[j] = components[j], components[i]
	}
	newPos, oldPos := 0, 0
	for _, c := range components {
		if !c.removed {
			c.lines = newTokens[newPos : newPos+c.count]
			newPos += c.count
			if !c.added {
				oldPos += c.count
			}
		} else {
			c.lines = oldTokens[oldPos : oldPos+c.count]
			oldPos += c.count
		}
	}
	return components
}

// diffHunk is one hunk of a structured patch.
type diffHunk struct {
	oldStart, oldLines, newStart, newLines int
	lines                                  []string
}

// patchContext is createTwoFilesPatch's default number of context lines.
const patchContext = 4

// structuredHunks is create.js's structuredPatch (its
// diffLinesResultToPatch): the hunks with context, lines without their
// newline, "\ No newline at end of file" after a last line that had none.
func structuredHunks(oldStr, newStr string) []diffHunk {
	diff := diffLineTokens(tokenizeLines(oldStr), tokenizeLines(newStr))
	diff = append(diff, &diffComponent{}) // the empty sentinel create.js appends
	contextLines := func(lines []string) []string {
		out := make([]string, len(lines))
		for n, l := range lines {
			out[n] = " " + l
		}
		return out
	}
	var hunks []diffHunk
	oldRangeStart, newRangeStart, oldLine, newLine := 0, 0, 1, 1
	var curRange []string
	for i, current := range diff {
		lines := current.lines
		if current.added || current.removed {
			if oldRangeStart == 0 {
				oldRangeStart, newRangeStart = oldLine, newLine
				if i > 0 {
					prev := diff[i-1].lines
					curRange = contextLines(prev[max(0, len(prev)-patchContext):])
					oldRangeStart -= len(curRange)
					newRangeStart -= len(curRange)
				}
			}
			for _, l := range lines {
				if current.added {
					curRange = append(curRange, "+"+l)
				} else {
					curRange = append(curRange, "-"+l)
				}
			}
			if current.added {
				newLine += len(lines)
			} else {
				oldLine += len(lines)
			}
			continue
		}
		if oldRangeStart != 0 {
			if len(lines) <= patchContext*2 && i < len(diff)-2 {
				curRange = append(curRange, contextLines(lines)...)
			} else {
				contextSize := min(len(lines), patchContext)
				curRange = append(curRange, contextLines(lines[:contextSize])...)
				hunks = append(hunks, diffHunk{
					oldStart: oldRangeStart, oldLines: oldLine - oldRangeStart + contextSize,
					newStart: newRangeStart, newLines: newLine - newRangeStart + contextSize,
					lines: curRange,
				})
				oldRangeStart, newRangeStart, curRange = 0, 0, nil
			}
		}
		oldLine += len(lines)
		newLine += len(lines)
	}
	for h := range hunks {
		var out []string
		for _, l := range hunks[h].lines {
			if strings.HasSuffix(l, "\n") {
				out = append(out, l[:len(l)-1])
			} else {
				out = append(out, l, `\ No newline at end of file`)
			}
		}
		hunks[h].lines = out
	}
	return hunks
}

// CreateTwoFilesPatch is jsdiff's createTwoFilesPatch(oldName, newName,
// oldStr, newStr, oldHeader, newHeader) with its defaults: "Index:" (when
// the names are equal), a line of 67 '=', the "---" and "+++" headers (a TAB
// before each header text), then the hunks, every line ending in "\n".
func CreateTwoFilesPatch(oldName, newName, oldStr, newStr, oldHeader, newHeader string) string {
	var b strings.Builder
	if oldName == newName {
		b.WriteString("Index: " + oldName + "\n")
	}
	b.WriteString(strings.Repeat("=", 67) + "\n")
	b.WriteString("--- " + oldName + "\t" + oldHeader + "\n")
	b.WriteString("+++ " + newName + "\t" + newHeader + "\n")
	for _, h := range structuredHunks(oldStr, newStr) {
		oldStart, newStart := h.oldStart, h.newStart
		if h.oldLines == 0 {
			oldStart--
		}
		if h.newLines == 0 {
			newStart--
		}
		b.WriteString("@@ -" + strconv.Itoa(oldStart) + "," + strconv.Itoa(h.oldLines) +
			" +" + strconv.Itoa(newStart) + "," + strconv.Itoa(h.newLines) + " @@\n")
		for _, l := range h.lines {
			b.WriteString(l + "\n")
		}
	}
	return b.String()
}
