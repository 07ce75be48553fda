package model

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// HasControl reports whether s holds a character that has no business in a name: a control character (C0, DEL,
// C1: newlines, escapes, NUL...) or a bidirectional override or isolate (U+202A-U+202E, U+2066-U+2069), which
// make a name display as something else than it is in lists, logs and the audit log.
func HasControl(s string) bool {
	return strings.ContainsFunc(s, func(r rune) bool {
		return unicode.IsControl(r) || (r >= 0x202A && r <= 0x202E) || (r >= 0x2066 && r <= 0x2069)
	})
}

// CheckName checks a human-readable name (a display name, a token, department or template name): valid UTF-8,
// no control characters, at most max characters. An empty name passes; callers that require one say so.
// EINVALID with code invalid_<field>.
func CheckName(field, s string, max int) error {
	if !utf8.ValidString(s) || HasControl(s) {
		return CodedError(EINVALID, "invalid_"+field, "%s must not contain control characters (line breaks, tabs, escapes, direction overrides)", field)
	}
	if utf8.RuneCountInString(s) > max {
		return CodedError(EINVALID, "invalid_"+field, "%s must be at most %d characters", field, max)
	}
	return nil
}
