package model

import (
	"fmt"
	"strings"
)

// Title patterns (Definition.TitlePattern): the title of an instance written with placeholders in braces.

// The placeholders a title pattern may use besides paths into the request's data.
const (
	TitleInitiator = "initiator" // the initiator's display name (their user name when they have none)
	TitleTemplate  = "template"  // the template's name, in the pattern's language
	TitleDate      = "date"      // the start date, YYYY-MM-DD
)

// MaxTitleLen bounds a rendered title, in characters: longer ones are cut and end in "…".
const MaxTitleLen = 200

// TitlePart is one piece of a parsed title pattern: literal text, or a placeholder (Placeholder set).
type TitlePart struct {
	Text        string
	Placeholder string
}

// IsBuiltinTitlePlaceholder reports whether name is {initiator}, {template} or {date} rather than a data path.
func IsBuiltinTitlePlaceholder(name string) bool {
	return name == TitleInitiator || name == TitleTemplate || name == TitleDate
}

// ParseTitlePattern splits a title pattern into text and placeholders. A placeholder is a builtin name or a
// dotted path into the data (letters, digits, '_' and '-' between dots); "{{" and "}}" stand for braces. It
// returns an error describing the first malformed placeholder or stray brace.
func ParseTitlePattern(p string) ([]TitlePart, error) {
	var parts []TitlePart
	var text strings.Builder
	flush := func() {
		if text.Len() > 0 {
			parts = append(parts, TitlePart{Text: text.String()})
			text.Reset()
		}
	}
	for i := 0; i < len(p); i++ {
		c := p[i]
		switch {
		case c == '{' && i+1 < len(p) && p[i+1] == '{':
			text.WriteByte('{')
			i++
		case c == '}' && i+1 < len(p) && p[i+1] == '}':
			text.WriteByte('}')
			i++
		case c == '}':
			return nil, fmt.Errorf("a '}' at character %d closes no placeholder (write }} for a brace)", len([]rune(p[:i]))+1)
		case c == '{':
			end := strings.IndexByte(p[i+1:], '}')
			if end < 0 {
				return nil, fmt.Errorf("the placeholder at character %d is not closed with '}' (write {{ for a brace)", len([]rune(p[:i]))+1)
			}
			name := strings.TrimSpace(p[i+1 : i+1+end])
			if !IsBuiltinTitlePlaceholder(name) && !fieldPathRe.MatchString(name) {
				return nil, fmt.Errorf("placeholder {%s} is neither {initiator}, {template}, {date} nor a path into the data such as {days} or {leave.type}", p[i+1:i+1+end])
			}
			flush()
			parts = append(parts, TitlePart{Placeholder: name})
			i += end + 1
		default:
			text.WriteByte(c)
		}
	}
	flush()
	return parts, nil
}
