package template

import (
	"encoding/json"

	"github.com/halley-bpm/halley/model"
	"github.com/halley-bpm/halley/service/condition"
)

// formLabels is what a diagram reads of a component form: its fields' paths, labels and options, in every
// language (the labels are the UI's; docs/templates.md "Labels in two languages").
type formLabels struct {
	Kind   string `json:"kind"`
	Fields []struct {
		Type    string                            `json:"type"`
		Field   string                            `json:"field"`
		Label   string                            `json:"label"`
		I18n    map[string]struct{ Label string } `json:"i18n"`
		Options []struct {
			Label string                            `json:"label"`
			Value any                               `json:"value"`
			I18n  map[string]struct{ Label string } `json:"i18n"`
		} `json:"options"`
	} `json:"fields"`
}

// ConditionFields names the context paths a definition's forms bind, in lang: each path by its field's label in
// lang (else its plain label) and its string options by theirs. The start form comes first, then the approval
// nodes' forms; the first field of a path wins — the fields the designer's condition builder offers.
func ConditionFields(d *model.Definition, lang string) map[string]condition.Field {
	var forms []json.RawMessage
	if s := d.Start(); s != nil {
		forms = append(forms, s.Trigger.Form)
	}
	for i := range d.Nodes {
		if d.Nodes[i].Type == model.NodeApproval {
			forms = append(forms, d.Nodes[i].Form)
		}
	}
	out := map[string]condition.Field{}
	for _, raw := range forms {
		var f formLabels
		if len(raw) == 0 || json.Unmarshal(raw, &f) != nil || f.Kind == "html" {
			continue
		}
		for _, x := range f.Fields {
			if x.Field == "" || x.Type == "description" {
				continue
			}
			if _, seen := out[x.Field]; seen {
				continue
			}
			fl := condition.Field{Label: x.Label}
			if t := x.I18n[lang].Label; t != "" {
				fl.Label = t
			}
			for _, o := range x.Options {
				v, ok := o.Value.(string)
				if !ok {
					continue
				}
				l := o.Label
				if t := o.I18n[lang].Label; t != "" {
					l = t
				}
				if l == "" {
					continue
				}
				if fl.Options == nil {
					fl.Options = map[string]string{}
				}
				fl.Options[v] = l
			}
			out[x.Field] = fl
		}
	}
	return out
}
