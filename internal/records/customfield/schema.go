package customfield

// This file states each type's values as JSON Schema (2020-12, the
// dialect of OpenAPI 3.1), for the workspace's own OpenAPI document
// (product.md, "Custom fields": typed documents). The schemas say what
// the checks in values.go accept and what answers carry; what JSON Schema
// cannot say (trimming, significant digits, the text rules) stays in the
// description of the types in docs/api.md.

// MaxEmail is the length bound of an email value, a contact's email's.
const MaxEmail = 254

// Schema is the JSON Schema of d's values: its JSON type, format, enum of
// option values, bounds; the label is the title and the description the
// description, so that generated types document the field. With nullable
// the schema also admits null, which a create reads as "no value" and a
// merge patch as "clear".
func (d Definition) Schema(nullable bool) map[string]any {
	s := d.valueSchema()
	s["title"] = d.Label
	if d.Description != "" {
		s["description"] = d.Description
	}
	if nullable {
		s["type"] = []any{s["type"], "null"}
		if e, ok := s["enum"].([]any); ok {
			s["enum"] = append(e, nil)
		}
	}
	return s
}

// ParamSchema is the JSON Schema of the value of d's equality filter
// (customFields.<key>=) and, for ordered types, of its bounds: one value
// of the type, a multiselect field's one option.
func (d Definition) ParamSchema() map[string]any {
	if d.Type == MultiSelect {
		return map[string]any{"type": "string", "enum": d.optionValues()}
	}
	return d.valueSchema()
}

func (d Definition) valueSchema() map[string]any {
	switch d.Type {
	case Number:
		return map[string]any{"type": "number"}
	case Boolean:
		return map[string]any{"type": "boolean"}
	case Date:
		return map[string]any{"type": "string", "format": "date"}
	case DateTime:
		return map[string]any{"type": "string", "format": "date-time"}
	case Select:
		return map[string]any{"type": "string", "enum": d.optionValues()}
	case MultiSelect:
		return map[string]any{
			"type":        "array",
			"items":       map[string]any{"type": "string", "enum": d.optionValues()},
			"uniqueItems": true, "minItems": 1, "maxItems": MaxChoices,
		}
	case URL:
		return map[string]any{"type": "string", "format": "uri", "maxLength": MaxURL}
	case Email:
		return map[string]any{"type": "string", "format": "email", "maxLength": MaxEmail}
	default: // Text
		return map[string]any{"type": "string", "maxLength": MaxText}
	}
}

// optionValues are d's option values, in the order values are answered.
func (d Definition) optionValues() []any {
	out := make([]any, len(d.Options))
	for i, o := range d.Options {
		out[i] = o.Value
	}
	return out
}
