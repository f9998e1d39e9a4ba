// Package customfield holds a workspace's custom field definitions as the
// rest of the service sees them (product.md, "Custom fields"): typed
// fields of its own on contacts and leads. Definitions are rows of
// custom_fields (migration 00170); a record's values are a JSON object
// from key to value in its custom_fields column, stored as answered, so
// that an equality filter is a containment an index serves.
//
// The definitions' API (CustomFieldService) and the values' checks build
// on the types here; Live is the one read of the definitions a record's
// values are checked against and answered with.
package customfield

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/svat/partnerapi/db"
	"github.com/svat/partnerapi/db/dbsqlc"
)

// Object is the kind of record a field belongs to.
type Object string

// The objects that carry custom fields.
const (
	Contact Object = "contact"
	Lead    Object = "lead"
)

// Type is a field's type: what its values must be.
type Type string

// The types, as the API spells them (and the custom_fields CHECK).
const (
	Text        Type = "text"
	Number      Type = "number"
	Boolean     Type = "boolean"
	Date        Type = "date"
	DateTime    Type = "datetime"
	Select      Type = "select"
	MultiSelect Type = "multiselect"
	URL         Type = "url"
	Email       Type = "email"
)

// Types lists every type, in the order the API documents them.
var Types = []Type{Text, Number, Boolean, Date, DateTime, Select, MultiSelect, URL, Email}

// HasOptions reports whether values of t are option values.
func (t Type) HasOptions() bool { return t == Select || t == MultiSelect }

// Ordered reports whether values of t compare with .gte and .lte filters.
func (t Type) Ordered() bool { return t == Number || t == Date || t == DateTime }

// Option is one value a select or multiselect field may hold.
type Option struct {
	Value string `json:"value"`
	Label string `json:"label"`
}

// Limits of definitions (product.md).
const (
	MaxPerObject   = 100
	MaxKeyLen      = 40
	MaxLabel       = 100
	MaxDescription = 500
	MaxOptions     = 200
	MaxOptionValue = 64
	MaxOptionLabel = 100
)

// Definition is one custom field of a workspace.
type Definition struct {
	WorkspaceID uuid.UUID
	ID          uuid.UUID
	Object      Object
	Key         string
	Label       string
	Type        Type
	// Options are the select types' values, in the order values are
	// answered; nil for the other types.
	Options     []Option
	Required    bool
	Description string
	CreatedAt   time.Time
	UpdatedAt   time.Time

	// field and contactField are the names its values' problems are
	// reported under, made once with the definition (FromRow) rather than
	// for every value checked: "customFields.<key>" and, on a lead's
	// inline contact, "contact.customFields.<key>".
	field, contactField string
}

// fieldName is the name of d's value in a record's member prefix ("" or
// "contact.").
func (d Definition) fieldName(prefix string) string {
	switch {
	case prefix == "" && d.field != "":
		return d.field
	case prefix == "contact." && d.contactField != "":
		return d.contactField
	}
	return prefix + "customFields." + d.Key
}

// Option returns the option of value, if the field has it.
func (d Definition) Option(value string) (Option, bool) {
	for _, o := range d.Options {
		if o.Value == value {
			return o, true
		}
	}
	return Option{}, false
}

// FromRow turns a stored definition into a Definition.
func FromRow(r dbsqlc.CustomField) (Definition, error) {
	d := Definition{
		WorkspaceID: r.WorkspaceID, ID: r.ID, Object: Object(r.Object), Key: r.Key, Label: r.Label, Type: Type(r.Type),
		Required: r.Required, CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt,
		field: "customFields." + r.Key, contactField: "contact.customFields." + r.Key,
	}
	if r.Description != nil {
		d.Description = *r.Description
	}
	if r.Options != nil {
		if err := json.Unmarshal(r.Options, &d.Options); err != nil {
			return d, fmt.Errorf("decode options of custom field %s: %w", r.Key, err)
		}
	}
	return d, nil
}

// Live reads the workspace's definitions of object that are not deleted,
// oldest first: what a record's values are checked against and answered
// with (a deleted field's values leave every answer at once).
func Live(ctx context.Context, q db.DBTX, workspace uuid.UUID, object Object) ([]Definition, error) {
	rows, err := db.Q.CustomFieldsLive(ctx, q, dbsqlc.CustomFieldsLiveParams{WorkspaceID: workspace, Object: string(object)})
	if err != nil {
		return nil, fmt.Errorf("read custom fields: %w", err)
	}
	out := make([]Definition, 0, len(rows))
	for _, r := range rows {
		d, err := FromRow(r)
		if err != nil {
			return nil, err
		}
		out = append(out, d)
	}
	return out, nil
}

// ByKey indexes definitions by key.
func ByKey(defs []Definition) map[string]Definition {
	m := make(map[string]Definition, len(defs))
	for _, d := range defs {
		m[d.Key] = d
	}
	return m
}
