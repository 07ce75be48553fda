package model

// MaxDocumentDepth bounds the nesting of the JSON documents Halley stores for callers (contexts, approve data,
// callback and message payloads, form values): deeper documents serve no process and make every later read of
// the context (conditions, gjson paths, the UI's renderer) pay for them.
const MaxDocumentDepth = 64

// DocumentDepth returns how deeply arrays and objects nest in a JSON document (0 for a scalar). It assumes valid
// JSON and does not validate it.
func DocumentDepth(raw []byte) int {
	depth, max, inString, escaped := 0, 0, false, false
	for _, c := range raw {
		switch {
		case inString:
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
		case c == '"':
			inString = true
		case c == '{' || c == '[':
			depth++
			if depth > max {
				max = depth
			}
		case c == '}' || c == ']':
			depth--
		}
	}
	return max
}

// CheckDocumentDepth returns an EINVALID error (code too_deep) when raw nests deeper than MaxDocumentDepth; what
// names the document in the message ("context", "data").
func CheckDocumentDepth(what string, raw []byte) error {
	if d := DocumentDepth(raw); d > MaxDocumentDepth {
		return CodedError(EINVALID, "too_deep", "%s nests %d levels deep; at most %d are allowed", what, d, MaxDocumentDepth).
			WithDetails(map[string]any{"max_depth": MaxDocumentDepth})
	}
	return nil
}
