package model

import (
	"encoding/base64"
	"encoding/json"
	"regexp"
	"strings"
	"unicode/utf8"
)

// Form is what the engine reads of a form template (seeds/003 表单模版): the context paths its fields are bound to,
// which of them the person filling it may change, and which hold files. The rest (labels, options, layout) is
// the UI's. A form is a start trigger's `form` (what the initiator fills) or an approval node's `form` (how the
// approver sees the context, and which fields they may change).
type Form struct {
	Kind   string      `json:"kind"` // "components" (the default) or "html"
	Fields []FormField `json:"fields"`
}

// FormField is one field of a component form.
type FormField struct {
	ID       string `json:"id"`
	Type     string `json:"type"`
	Label    string `json:"label"`
	Field    string `json:"field"` // dotted context path the value is read from and written to
	Readonly bool   `json:"readonly"`
}

// Form field types that hold files: `attachment` (today's, files inline as data: URLs) and `file`/`image` (ids
// of uploaded attachments).
var fileFieldTypes = map[string]bool{"attachment": true, "file": true, "image": true}

// IsFile reports whether the field holds files.
func (f FormField) IsFile() bool { return fileFieldTypes[f.Type] }

// fieldPathRe is the shape of a bound field's path: dot-separated names of letters, digits, '_' and '-' (the
// designer accepts nothing else), so a path never carries gjson/sjson syntax.
var fieldPathRe = regexp.MustCompile(`^[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*$`)

// ParseForm reads a form template. It returns nil when there is none, when it is an HTML template, or when it has
// no field bound to a valid context path: for the engine such a node has no form.
func ParseForm(raw json.RawMessage) *Form {
	if len(raw) == 0 {
		return nil
	}
	var f Form
	if err := json.Unmarshal(raw, &f); err != nil || f.Kind == "html" {
		return nil
	}
	bound := f.Fields[:0:0]
	for _, x := range f.Fields {
		if x.Field != "" && fieldPathRe.MatchString(x.Field) {
			bound = append(bound, x)
		}
	}
	if len(bound) == 0 {
		return nil
	}
	f.Fields = bound
	return &f
}

// Field returns the bound field at path, or nil.
func (f *Form) Field(path string) *FormField {
	if f == nil {
		return nil
	}
	for i := range f.Fields {
		if f.Fields[i].Field == path {
			return &f.Fields[i]
		}
	}
	return nil
}

// Editable reports whether path is a field the filler may change (bound and not read-only).
func (f *Form) Editable(path string) bool {
	x := f.Field(path)
	return x != nil && !x.Readonly
}

// EditableUnder reports whether an editable field lies below path ("applicant" for "applicant.name").
func (f *Form) EditableUnder(path string) bool {
	if f == nil {
		return false
	}
	for _, x := range f.Fields {
		if !x.Readonly && strings.HasPrefix(x.Field, path+".") {
			return true
		}
	}
	return false
}

// MaxFilesPerField bounds the files of one file field.
const MaxFilesPerField = 50

var (
	mimeRe         = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9!#$&^_.+-]{0,126}/[A-Za-z0-9][A-Za-z0-9!#$&^_.+-]{0,126}$`)
	attachmentIDRe = regexp.MustCompile(`^[A-Za-z0-9_-]{1,128}$`)
	// dataURLRe is a base64 data: URL: media type, optional parameters, ";base64," and the data.
	dataURLRe = regexp.MustCompile(`^data:([A-Za-z0-9][A-Za-z0-9!#$&^_.+-]{0,126}/[A-Za-z0-9][A-Za-z0-9!#$&^_.+-]{0,126})?((?:;[A-Za-z0-9_.-]+=[A-Za-z0-9_.+-]+)*);base64,([A-Za-z0-9+/]*={0,2})$`)
)

// fileKeys are the keys a file value may have: the inline form {name, size, type, data_url} and the uploaded
// attachment form {id, name, size, content_type, sha256}.
var fileKeys = map[string]bool{"id": true, "name": true, "size": true, "type": true, "content_type": true, "data_url": true, "sha256": true}

// CheckFileValue validates the value of a file field: a list of files, each an uploaded attachment's id (a
// string, or an object with "id") or an inline file whose data_url is a base64 data: URL. Anything a browser
// could follow as a link (javascript:, http:, a data: URL that is not base64 data) is refused: the value is shown
// to approvers as a download. It returns an EUNPROCESSABLE error with code invalid_file naming the field.
func CheckFileValue(path string, raw json.RawMessage) error {
	bad := func(format string, args ...any) error {
		args = append([]any{path}, args...)
		return CodedError(EUNPROCESSABLE, "invalid_file", "field %q: "+format, args...).WithDetails(map[string]any{"field": path})
	}
	if s := strings.TrimSpace(string(raw)); s == "" || s == "null" {
		return nil
	}
	var items []json.RawMessage
	if err := json.Unmarshal(raw, &items); err != nil {
		return bad("must be a list of files")
	}
	if len(items) > MaxFilesPerField {
		return bad("holds %d files; at most %d are allowed", len(items), MaxFilesPerField)
	}
	for i, it := range items {
		var id string
		if json.Unmarshal(it, &id) == nil {
			if !attachmentIDRe.MatchString(id) {
				return bad("file %d is not an attachment id", i+1)
			}
			continue
		}
		var m map[string]json.RawMessage
		if err := json.Unmarshal(it, &m); err != nil || m == nil {
			return bad("file %d must be an attachment id or an object", i+1)
		}
		for k := range m {
			if !fileKeys[k] {
				return bad("file %d has an unknown key %q", i+1, k)
			}
		}
		str := func(k string, max int) (string, error) {
			v, ok := m[k]
			if !ok {
				return "", nil
			}
			var s string
			if err := json.Unmarshal(v, &s); err != nil || len(s) > max || !utf8.ValidString(s) || strings.ContainsFunc(s, isControl) {
				return "", bad("file %d: %s must be a string of at most %d characters", i+1, k, max)
			}
			return s, nil
		}
		if _, err := str("name", 255); err != nil {
			return err
		}
		for _, k := range []string{"type", "content_type"} {
			s, err := str(k, 255)
			if err != nil {
				return err
			}
			if s != "" && !mimeRe.MatchString(s) {
				return bad("file %d: %s %q is not a media type", i+1, k, s)
			}
		}
		if v, ok := m["size"]; ok {
			var n float64
			if err := json.Unmarshal(v, &n); err != nil || n < 0 {
				return bad("file %d: size must be a number of bytes", i+1)
			}
		}
		if _, err := str("sha256", 64); err != nil {
			return err
		}
		id, err := str("id", 128)
		if err != nil {
			return err
		}
		if id != "" && !attachmentIDRe.MatchString(id) {
			return bad("file %d: id is not an attachment id", i+1)
		}
		du, ok := m["data_url"]
		if !ok {
			if id == "" {
				return bad("file %d has neither an id nor a data_url", i+1)
			}
			continue
		}
		var s string
		if err := json.Unmarshal(du, &s); err != nil {
			return bad("file %d: data_url must be a string", i+1)
		}
		sm := dataURLRe.FindStringSubmatch(s)
		if sm == nil {
			return bad("file %d: data_url must be a base64 data: URL (data:<type>;base64,...)", i+1)
		}
		if _, err := base64.StdEncoding.DecodeString(sm[3]); err != nil {
			return bad("file %d: data_url holds invalid base64", i+1)
		}
	}
	return nil
}

func isControl(r rune) bool { return r < 0x20 || r == 0x7f }

// CheckAttachmentIDs validates a list of attachment ids (the attachments of an approve or reject comment): at most
// MaxFilesPerField, each of an id's shape. EINVALID invalid_attachments naming the field.
func CheckAttachmentIDs(field string, ids []string) error {
	if len(ids) > MaxFilesPerField {
		return CodedError(EINVALID, "invalid_attachments", "%s holds %d files; at most %d are allowed", field, len(ids), MaxFilesPerField).
			WithDetails(map[string]any{"field": field})
	}
	for i, id := range ids {
		if !attachmentIDRe.MatchString(id) {
			return CodedError(EINVALID, "invalid_attachments", "%s: file %d is not an attachment id", field, i+1).
				WithDetails(map[string]any{"field": field})
		}
	}
	return nil
}
