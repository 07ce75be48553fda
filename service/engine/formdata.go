package engine

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"log/slog"
	"sort"

	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"

	"github.com/halley-bpm/halley/model"
)

// What an approver's data may change (API.md, "Security changes"). An approver decides on the request as it was
// made: they may fill in the fields of their node's form that are not read-only, and nothing else — not the
// amount, not who approves next. Without a node form their data is theirs alone, under context.<node_id>, where
// conditions and output mappings read it as <node_id>.field. The initiator's resubmit task (after a return to
// start) edits the request itself: the start form's fields, or any top-level field when the start has no form.
// Plugins are admin code and keep merging their output into the context as before.

// fieldChange is one changed field, as the history (and the audit) records it.
type fieldChange struct {
	Path   string          `json:"path"`
	Before json.RawMessage `json:"before"`
	After  json.RawMessage `json:"after"`
}

// maxRecordedValue is the largest value a change records verbatim; a bigger one (a file as a data: URL) is
// recorded by size and SHA-256.
const maxRecordedValue = 4096

func recorded(raw string) json.RawMessage {
	if raw == "" {
		return json.RawMessage("null")
	}
	if len(raw) <= maxRecordedValue {
		return json.RawMessage(raw)
	}
	h := sha256.Sum256([]byte(raw))
	b, _ := json.Marshal(map[string]any{"size": len(raw), "sha256": hex.EncodeToString(h[:])})
	return b
}

// applyDecisionData writes an approve's data into the context as the task's form allows, and records each
// changed field (before and after) as a context.changed history item. 422 field_not_editable names the first
// field the data may not change; 422 invalid_file a file field whose value is not a list of files.
func (s *step) applyDecisionData(t *model.Task, data json.RawMessage) error {
	if len(data) == 0 || string(data) == "null" {
		return nil
	}
	var patch map[string]json.RawMessage
	if err := json.Unmarshal(data, &patch); err != nil {
		return model.CodedError(model.EINVALID, "invalid_data", "data must be a JSON object")
	}
	if len(patch) == 0 {
		return nil
	}
	var (
		changes []fieldChange
		err     error
	)
	switch form := s.taskForm(t); {
	case form != nil:
		changes, err = s.writeFormFields(form, "", patch)
	case t.Kind == model.TaskKindResubmit:
		changes, err = s.writeTopLevel(patch)
	default:
		changes, err = s.writeUnderNode(t.NodeID, patch)
	}
	if err != nil {
		if de, ok := err.(*model.Error); ok && de.Code == "field_not_editable" {
			// Refused, so nothing is stored; the log keeps who tried what.
			s.e.log.WarnContext(s.ctx, "engine: approve data refused", slog.String("instance_id", s.inst.ID), slog.String("task_id", t.ID),
				slog.String("actor", s.actor), slog.Any("field", de.Details["field"]))
		}
		return err
	}
	if len(changes) > 0 {
		s.history("context.changed", t.NodeID, t.ID, "", map[string]any{"changes": changes})
	}
	return nil
}

// taskForm is the form a task's data goes through: the start form for a resubmit task, else the node's form
// (nil when it has none, or none with bound fields).
func (s *step) taskForm(t *model.Task) *model.Form {
	if t.Kind == model.TaskKindResubmit {
		if tr := s.c.Def.Start().Trigger; tr.Kind == model.TriggerForm {
			return model.ParseForm(tr.Form)
		}
		return nil
	}
	if n := s.c.Def.Node(t.NodeID); n != nil {
		return model.ParseForm(n.Form)
	}
	return nil
}

// notEditable is the error for a field the data may not change.
func notEditable(path, why string) error {
	return model.CodedError(model.EUNPROCESSABLE, "field_not_editable", "field %q is not editable here: %s", path, why).
		WithDetails(map[string]any{"field": path})
}

// writeFormFields sets each field of patch (nested objects are walked down to the form's paths) that the form
// lets the filler change; any other field is refused.
func (s *step) writeFormFields(form *model.Form, prefix string, patch map[string]json.RawMessage) ([]fieldChange, error) {
	var changes []fieldChange
	for _, k := range sortedKeys(patch) {
		v := patch[k]
		path := k
		if prefix != "" {
			path = prefix + "." + k
		}
		switch f := form.Field(path); {
		case f != nil && f.Readonly:
			return nil, notEditable(path, "the form shows it read-only")
		case f != nil:
			if f.IsFile() {
				if err := model.CheckFileValue(path, v); err != nil {
					return nil, err
				}
			}
			if !validPathKey(k) {
				return nil, notEditable(path, "it is not a field of the form")
			}
			c, err := s.setField(path, v)
			if err != nil {
				return nil, err
			}
			if c != nil {
				changes = append(changes, *c)
			}
		case form.EditableUnder(path) && validPathKey(k) && bytes.HasPrefix(bytes.TrimSpace(v), []byte("{")):
			var sub map[string]json.RawMessage
			if err := json.Unmarshal(v, &sub); err != nil {
				return nil, model.CodedError(model.EINVALID, "invalid_data", "data.%s must be a JSON object", path)
			}
			more, err := s.writeFormFields(form, path, sub)
			if err != nil {
				return nil, err
			}
			changes = append(changes, more...)
		default:
			return nil, notEditable(path, "it is not a field of the form")
		}
	}
	return changes, nil
}

// writeTopLevel sets top-level fields (a resubmit of a start without a form).
func (s *step) writeTopLevel(patch map[string]json.RawMessage) ([]fieldChange, error) {
	var cur map[string]json.RawMessage
	if err := json.Unmarshal(s.inst.Context, &cur); err != nil || cur == nil {
		cur = map[string]json.RawMessage{}
	}
	changes := s.mergeInto(cur, "", patch)
	b, err := json.Marshal(cur)
	if err != nil {
		return nil, err
	}
	s.inst.Context = b
	return changes, nil
}

// writeUnderNode merges the data into the object at context.<node_id> (without a node form).
func (s *step) writeUnderNode(nodeID string, patch map[string]json.RawMessage) ([]fieldChange, error) {
	var cur map[string]json.RawMessage
	if v := gjson.GetBytes(s.inst.Context, nodeID); v.IsObject() {
		if err := json.Unmarshal([]byte(v.Raw), &cur); err != nil {
			return nil, err
		}
	}
	if cur == nil {
		cur = map[string]json.RawMessage{}
	}
	changes := s.mergeInto(cur, nodeID+".", patch)
	b, err := json.Marshal(cur)
	if err != nil {
		return nil, err
	}
	return changes, s.setContextPath(nodeID, b)
}

// mergeInto sets the keys of patch in cur and returns what changed, paths prefixed.
func (s *step) mergeInto(cur map[string]json.RawMessage, prefix string, patch map[string]json.RawMessage) []fieldChange {
	var changes []fieldChange
	for _, k := range sortedKeys(patch) {
		before, after := cur[k], patch[k]
		cur[k] = after
		if !sameJSON(before, after) {
			changes = append(changes, fieldChange{Path: prefix + k, Before: recorded(string(before)), After: recorded(string(after))})
		}
	}
	return changes
}

// setField sets the value at a form path (letters, digits, '_', '-' and dots only: no gjson syntax) and returns
// the change, or nil when the value is the same.
func (s *step) setField(path string, v json.RawMessage) (*fieldChange, error) {
	before := gjson.GetBytes(s.inst.Context, path).Raw
	if sameJSON(json.RawMessage(before), v) {
		return nil, nil
	}
	var compact bytes.Buffer
	if err := json.Compact(&compact, v); err != nil {
		return nil, model.CodedError(model.EINVALID, "invalid_data", "data.%s is not valid JSON", path)
	}
	v = compact.Bytes()
	b, err := sjson.SetRawBytes(s.inst.Context, path, v)
	if err != nil {
		return nil, model.CodedError(model.EUNPROCESSABLE, "field_not_editable", "field %q cannot be set in this context: %v", path, err).
			WithDetails(map[string]any{"field": path})
	}
	s.inst.Context = b
	return &fieldChange{Path: path, Before: recorded(before), After: recorded(string(v))}, nil
}

// validPathKey reports a key that can be one step of a form path.
func validPathKey(k string) bool {
	if k == "" || len(k) > 128 {
		return false
	}
	for _, c := range k {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// sameJSON compares two JSON values by their compact form ("" and null are the same: absent).
func sameJSON(a, b json.RawMessage) bool {
	norm := func(x json.RawMessage) string {
		if len(bytes.TrimSpace(x)) == 0 {
			return "null"
		}
		var buf bytes.Buffer
		if json.Compact(&buf, x) != nil {
			return string(x)
		}
		return buf.String()
	}
	return norm(a) == norm(b)
}

func sortedKeys(m map[string]json.RawMessage) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}
