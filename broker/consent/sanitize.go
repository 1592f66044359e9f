// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package consent

import (
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Limits on what the prompt shows of the server's message.
const (
	maxMessageRunes = 1000
	maxMessageLines = 20
	maxNameRunes    = 80
)

// stripTerminal removes from s everything a terminal would act on rather than
// show: escape sequences (CSI, OSC, DCS and the other string sequences, two-
// and three-character escapes) in their 7-bit (ESC ...) and 8-bit (C1) forms,
// the remaining C0 and C1 control characters and DEL, and Unicode format
// characters (bidirectional overrides and isolates, zero-width characters),
// which can make the text read differently from what it is. Line breaks
// (\n, \r\n, \r, U+2028, U+2029) become \n, a tab becomes a space, and
// invalid UTF-8 becomes U+FFFD.
func stripTerminal(s string) string {
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		i += size
		switch {
		case r == 0x1b: // ESC
			if i >= len(s) {
				continue
			}
			next, n := utf8.DecodeRuneInString(s[i:])
			switch next {
			case '[':
				i = skipCSI(s, i+n)
			case ']', 'P', 'X', '^', '_':
				i = skipString(s, i+n)
			default:
				// nF escapes: intermediates 0x20-0x2F, then one final byte.
				for i < len(s) && s[i] >= 0x20 && s[i] <= 0x2f {
					i++
				}
				if i < len(s) {
					_, n = utf8.DecodeRuneInString(s[i:])
					i += n
				}
			}
		case r == 0x9b: // C1 CSI
			i = skipCSI(s, i)
		case r == 0x9d || r == 0x90 || r == 0x98 || r == 0x9e || r == 0x9f: // C1 OSC, DCS, SOS, PM, APC
			i = skipString(s, i)
		case r == '\r':
			if i < len(s) && s[i] == '\n' {
				i++
			}
			b.WriteByte('\n')
		case r == '\n' || r == '\u2028' || r == '\u2029':
			b.WriteByte('\n')
		case r == '\t':
			b.WriteByte(' ')
		case r == utf8.RuneError && size == 1:
			b.WriteRune(utf8.RuneError)
		case r < 0x20 || (r >= 0x7f && r <= 0x9f) || unicode.Is(unicode.Cf, r):
			// dropped
		case unicode.IsGraphic(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// skipCSI returns the index after a control sequence whose parameters start
// at i: parameter and intermediate bytes (0x20-0x3F), then a final byte
// (0x40-0x7E). A sequence cut short by another byte ends before that byte.
func skipCSI(s string, i int) int {
	for i < len(s) && s[i] >= 0x20 && s[i] <= 0x3f {
		i++
	}
	if i < len(s) && s[i] >= 0x40 && s[i] <= 0x7e {
		i++
	}
	return i
}

// skipString returns the index after a string sequence (OSC, DCS, SOS, PM,
// APC) whose body starts at i: up to and including BEL, ESC \ or the C1
// string terminator, or to the end of s.
func skipString(s string, i int) int {
	for i < len(s) {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == 0x07 || r == 0x9c:
			return i + n
		case r == 0x1b:
			if i+1 < len(s) && s[i+1] == '\\' {
				return i + 2
			}
			return i + 1
		}
		i += n
	}
	return i
}

// messageLines is the server's message as the prompt shows it: stripped of
// anything a terminal acts on, trailing blanks and runs of blank lines
// removed, and cut to maxMessageLines lines and maxMessageRunes characters.
// truncated says whether anything was cut.
func messageLines(msg string) (lines []string, truncated bool) {
	text := strings.TrimSpace(stripTerminal(msg))
	if text == "" {
		return nil, false
	}
	if utf8.RuneCountInString(text) > maxMessageRunes {
		text, truncated = string([]rune(text)[:maxMessageRunes]), true
	}
	blank := false
	for _, line := range strings.Split(text, "\n") {
		line = strings.TrimRightFunc(line, unicode.IsSpace)
		if line == "" {
			if blank {
				continue
			}
			blank = true
		} else {
			blank = false
		}
		if len(lines) == maxMessageLines {
			return lines, true
		}
		lines = append(lines, line)
	}
	return lines, truncated
}

// quoted shows a short untrusted string (a declared name or version) in
// double quotes, every character that is not plainly visible escaped (so a
// name with an escape or a bidi override shows as odd, not as another name),
// cut to maxNameRunes characters.
func quoted(s string) string {
	cut := ""
	if utf8.RuneCountInString(s) > maxNameRunes {
		s, cut = string([]rune(s)[:maxNameRunes]), "..."
	}
	return strconv.QuoteToGraphic(s) + cut
}

// showPath shows a requested path: as it is when every character is plainly
// visible, else quoted with the others escaped. Paths are canonical, so they
// hold no ASCII control characters, but C1 controls and format characters
// are valid UTF-8 and may be in a file's name.
func showPath(p string) string {
	for _, r := range p {
		if !unicode.IsGraphic(r) || r == utf8.RuneError || (unicode.IsSpace(r) && r != ' ') {
			return strconv.QuoteToGraphic(p)
		}
	}
	return p
}

// oneLine is s for a log line: stripped like a message, line breaks turned
// into spaces, cut to n bytes at a character boundary.
func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(stripTerminal(s)), " ")
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "..."
}
