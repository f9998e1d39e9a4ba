package customfield

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/svat/partnerapi/db"
	"github.com/svat/partnerapi/db/dbsqlc"
	customfieldv1 "github.com/svat/partnerapi/gen/partner/customfield/v1"
	"github.com/svat/partnerapi/internal/contract/apierror"
	"github.com/svat/partnerapi/internal/records/customfield"
	"github.com/svat/partnerapi/internal/records/fieldmask"
	"github.com/svat/partnerapi/internal/records/validate"
)

// updateRules are the members an update may name: key, object and type
// never change (product.md), so naming them is malformed input (400
// read_only), as every read-only member of the house is.
var updateRules = fieldmask.Rules{
	Writable: []string{"label", "description", "options", "required"},
	ReadOnly: map[string]string{
		"id": "is read-only", "object": "never changes: delete the field and define another",
		"key": "never changes: delete the field and define another", "type": "never changes: delete the field and define another",
		"created_at": "is read-only", "updated_at": "is read-only",
	},
}

// Patch is a checked update: the members named, with their new values.
type Patch struct {
	paths       map[string]bool
	label       string
	description *string
	options     []*customfieldv1.CustomFieldOption
	required    bool
}

// CheckUpdate reads an update's members from its mask (over REST, the
// merge patch's) and checks those it can without the stored field.
func CheckUpdate(mask *customfieldv1.UpdateCustomFieldRequest) (Patch, error) {
	in := mask.GetCustomField()
	if in == nil {
		in = &customfieldv1.CustomField{}
	}
	paths, err := fieldmask.Paths(mask.GetUpdateMask(), in, updateRules)
	if err != nil {
		return Patch{}, err
	}
	p := Patch{paths: paths, options: in.GetOptions(), required: in.GetRequired()}
	var v validate.Errors
	if paths["label"] {
		p.label = checkLabel(&v, in.GetLabel())
	}
	if paths["description"] {
		p.description = v.Text("description", in.Description, customfield.MaxDescription)
	}
	return p, v.Err()
}

// Update applies a patch to the locked definition cur in tx. options
// replaces the list: removing a value some record of the workspace holds
// is 409 option_in_use with recordCount. An update that changes nothing
// writes nothing (wrote is false). The caller forgets the cached
// definitions once tx has committed (customfield.Forget).
func Update(ctx context.Context, tx db.DBTX, cur dbsqlc.CustomField, p Patch) (row dbsqlc.CustomField, wrote bool, err error) {
	arg := dbsqlc.CustomFieldUpdateParams{
		WorkspaceID: cur.WorkspaceID, ID: cur.ID, Label: cur.Label, Options: cur.Options, Required: cur.Required, Description: cur.Description,
	}
	if p.paths["label"] {
		arg.Label = p.label
	}
	if p.paths["description"] {
		arg.Description = p.description
	}
	if p.paths["required"] {
		arg.Required = p.required
	}
	if p.paths["options"] {
		var v validate.Errors
		t := customfield.Type(cur.Type)
		next := checkOptions(&v, t, p.options)
		if err := v.Err(); err != nil {
			return cur, false, err
		}
		if t.HasOptions() {
			old, err := customfield.FromRow(cur)
			if err != nil {
				return cur, false, err
			}
			var removed []string
			for _, o := range old.Options {
				if !slices.ContainsFunc(next, func(n customfield.Option) bool { return n.Value == o.Value }) {
					removed = append(removed, o.Value)
				}
			}
			if len(removed) > 0 {
				n, err := holders(ctx, tx, cur, removed)
				if err != nil {
					return cur, false, err
				}
				if n > 0 {
					return cur, false, &apierror.Error{Code: apierror.CodeOptionInUse,
						Message: strconv.Itoa(int(n)) + " records hold the options this update removes (" + strings.Join(removed, ", ") +
							"); change their values first (recordCount)",
						RecordCount: n}
				}
			}
			if arg.Options, err = encodeOptions(next); err != nil {
				return cur, false, err
			}
		}
	}
	if arg.Label == cur.Label && string(arg.Options) == string(cur.Options) && arg.Required == cur.Required &&
		deref(arg.Description) == deref(cur.Description) {
		return cur, false, nil
	}
	row, err = db.Q.CustomFieldUpdate(ctx, tx, arg)
	if err != nil {
		return cur, false, fmt.Errorf("update custom field: %w", err)
	}
	return row, true, nil
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
