package customfield

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/google/uuid"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/svat/partnerapi/db"
	"github.com/svat/partnerapi/db/dbsqlc"
	customfieldv1 "github.com/svat/partnerapi/gen/partner/customfield/v1"
	"github.com/svat/partnerapi/internal/contract/apierror"
	"github.com/svat/partnerapi/internal/records/customfield"
	"github.com/svat/partnerapi/internal/records/opaqueid"
	"github.com/svat/partnerapi/internal/records/validate"
)

// The rules of product.md "Custom fields": keys and option values.
var (
	keyPattern    = regexp.MustCompile(`^[a-z][a-z0-9_]{0,39}$`)
	optionPattern = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,63}$`)
)

// Objects are the objects that carry custom fields, in the order lists
// answer them when both are asked for.
var Objects = []customfield.Object{customfield.Contact, customfield.Lead}

// ParseObject reads an object's name.
func ParseObject(s string) (customfield.Object, bool) {
	o := customfield.Object(s)
	return o, slices.Contains(Objects, o)
}

// Input is a checked definition to create.
type Input struct {
	Object      customfield.Object
	Key         string
	Label       string
	Type        customfield.Type
	Options     []customfield.Option
	Required    bool
	Description *string
}

// CheckCreate validates a definition to create, every violation at once,
// each named by its JSON member as sent.
func CheckCreate(in *customfieldv1.CustomField) (Input, error) {
	if in == nil {
		in = &customfieldv1.CustomField{}
	}
	var v validate.Errors
	var out Input
	obj, ok := ParseObject(in.GetObject())
	switch {
	case in.GetObject() == "":
		v.Add("object", validate.Required, `is required: "contact" or "lead"`)
	case !ok:
		v.Add("object", validate.InvalidValue, `must be "contact" or "lead"`)
	}
	out.Object = obj
	out.Key = in.GetKey()
	switch {
	case out.Key == "":
		v.Add("key", validate.Required, "is required: the member of a record's customFields, e.g. budget")
	case !keyPattern.MatchString(out.Key):
		v.Add("key", validate.InvalidFormat, "must match ^[a-z][a-z0-9_]{0,39}$: a lower-case letter, then up to 39 lower-case letters, digits or underscores")
	}
	out.Label = checkLabel(&v, in.GetLabel())
	out.Type = customfield.Type(in.GetType())
	switch {
	case in.GetType() == "":
		v.Add("type", validate.Required, "is required: one of "+typeNames())
	case !slices.Contains(customfield.Types, out.Type):
		v.Add("type", validate.InvalidValue, "must be one of "+typeNames())
	default:
		out.Options = checkOptions(&v, out.Type, in.GetOptions())
	}
	out.Required = in.GetRequired()
	out.Description = v.Text("description", in.Description, customfield.MaxDescription)
	return out, v.Err()
}

func typeNames() string {
	names := make([]string, len(customfield.Types))
	for i, t := range customfield.Types {
		names[i] = string(t)
	}
	return strings.Join(names, ", ")
}

// checkLabel trims a label and checks it under the text rules: 1 to
// MaxLabel characters.
func checkLabel(v *validate.Errors, s string) string {
	t := v.Text("label", &s, customfield.MaxLabel)
	if t == nil {
		v.Add("label", validate.Required, "is required: the field's display name, at most "+strconv.Itoa(customfield.MaxLabel)+" characters")
		return ""
	}
	return *t
}

// checkOptions checks the options of a field of type t: 1 to MaxOptions
// for the select types, none for the others; values by the pattern and
// unique, labels under the text rules.
func checkOptions(v *validate.Errors, t customfield.Type, in []*customfieldv1.CustomFieldOption) []customfield.Option {
	if !t.HasOptions() {
		if len(in) > 0 {
			v.Add("options", validate.InvalidValue, "are for select and multiselect fields only")
		}
		return nil
	}
	switch {
	case len(in) == 0:
		v.Add("options", validate.Required, "a "+string(t)+" field needs 1 to "+strconv.Itoa(customfield.MaxOptions)+" options")
		return nil
	case len(in) > customfield.MaxOptions:
		v.Add("options", validate.TooLong, "must be at most "+strconv.Itoa(customfield.MaxOptions)+" options")
		return nil
	}
	out := make([]customfield.Option, 0, len(in))
	seen := make(map[string]bool, len(in))
	for i, o := range in {
		at := "options[" + strconv.Itoa(i) + "]"
		value := o.GetValue()
		switch {
		case value == "":
			v.Add(at+".value", validate.Required, "is required: what records hold, e.g. high")
		case !optionPattern.MatchString(value):
			v.Add(at+".value", validate.InvalidFormat, "must match ^[a-z0-9][a-z0-9_-]{0,63}$")
		case seen[value]:
			v.Add(at+".value", validate.InvalidValue, strconv.Quote(value)+" is already an option of this field")
		}
		seen[value] = true
		label := o.GetLabel()
		l := v.Text(at+".label", &label, customfield.MaxOptionLabel)
		if l == nil {
			v.Add(at+".label", validate.Required, "is required: the option's display name")
			l = &label
		}
		out = append(out, customfield.Option{Value: value, Label: *l})
	}
	return out
}

// notFound is the answer for an unknown id, another workspace's, a
// deleted field's and a malformed one alike, so existence never leaks.
func notFound() error {
	return apierror.New(apierror.CodeNotFound, "no custom field with this id in this workspace")
}

// ParseID parses a field's opaque id; a malformed one is the same 404 as
// an unknown one.
func ParseID(s string) (uuid.UUID, error) {
	id, ok := opaqueid.Parse(opaqueid.Field, s)
	if !ok {
		return uuid.UUID{}, notFound()
	}
	return id, nil
}

// Get reads one live definition of the workspace, locked for a change
// when lock.
func Get(ctx context.Context, q db.DBTX, ws, id uuid.UUID, lock bool) (dbsqlc.CustomField, error) {
	var row dbsqlc.CustomField
	var err error
	if lock {
		row, err = db.Q.CustomFieldGetForUpdate(ctx, q, dbsqlc.CustomFieldGetForUpdateParams{WorkspaceID: ws, ID: id})
	} else {
		row, err = db.Q.CustomFieldGet(ctx, q, dbsqlc.CustomFieldGetParams{WorkspaceID: ws, ID: id})
	}
	if errors.Is(err, db.ErrNotFound) {
		return row, notFound()
	}
	if err != nil {
		return row, fmt.Errorf("get custom field: %w", err)
	}
	return row, nil
}

// List reads the workspace's live definitions of the objects, oldest
// first.
func List(ctx context.Context, q db.DBTX, ws uuid.UUID, objects []customfield.Object) ([]dbsqlc.CustomField, error) {
	if len(objects) == 1 {
		rows, err := db.Q.CustomFieldsLive(ctx, q, dbsqlc.CustomFieldsLiveParams{WorkspaceID: ws, Object: string(objects[0])})
		if err != nil {
			return nil, fmt.Errorf("list custom fields: %w", err)
		}
		return rows, nil
	}
	rows, err := db.Q.CustomFieldsAll(ctx, q, ws)
	if err != nil {
		return nil, fmt.Errorf("list custom fields: %w", err)
	}
	out := rows[:0]
	for _, r := range rows {
		if slices.Contains(objects, customfield.Object(r.Object)) {
			out = append(out, r)
		}
	}
	return out, nil
}

// keyConstraint is the unique constraint of a key per workspace and
// object (migration 00170).
const keyConstraint = "custom_fields_key"

// Create inserts a checked definition in tx: the object's creates are
// serialized so that the count against MaxPerObject holds (422
// limit_exceeded), and a key in use, also a deleted field's whose values
// are still being erased, is 409 key_in_use. The caller forgets the
// cached definitions once tx has committed (customfield.Forget).
func Create(ctx context.Context, tx db.DBTX, ws uuid.UUID, in Input) (dbsqlc.CustomField, error) {
	var row dbsqlc.CustomField
	if err := db.Q.CustomFieldLockObject(ctx, tx, "custom_fields:"+ws.String()+":"+string(in.Object)); err != nil {
		return row, fmt.Errorf("lock custom fields: %w", err)
	}
	n, err := db.Q.CustomFieldCount(ctx, tx, dbsqlc.CustomFieldCountParams{WorkspaceID: ws, Object: string(in.Object)})
	if err != nil {
		return row, fmt.Errorf("count custom fields: %w", err)
	}
	if n >= customfield.MaxPerObject {
		return row, apierror.New(apierror.CodeLimitExceeded,
			"the workspace has "+strconv.Itoa(customfield.MaxPerObject)+" custom fields on "+string(in.Object)+"s, the most allowed; delete one first")
	}
	options, err := encodeOptions(in.Options)
	if err != nil {
		return row, err
	}
	row, err = db.Q.CustomFieldCreate(ctx, tx, dbsqlc.CustomFieldCreateParams{
		WorkspaceID: ws, ID: opaqueid.New(), Object: string(in.Object), Key: in.Key, Label: in.Label, Type: string(in.Type),
		Options: options, Required: in.Required, Description: in.Description,
	})
	if ce, ok := errors.AsType[*db.ConflictError](err); ok && ce.Constraint == keyConstraint {
		return row, &apierror.Error{Code: apierror.CodeKeyInUse,
			Message: "the key " + strconv.Quote(in.Key) + " is in use by another custom field on " + string(in.Object) +
				"s (a deleted field's key is free again once its values are erased, within 24 hours)",
			Fields: []apierror.FieldViolation{{Field: "key", Code: apierror.CodeKeyInUse, Message: "is in use"}}}
	}
	if err != nil {
		return row, fmt.Errorf("create custom field: %w", err)
	}
	return row, nil
}

func encodeOptions(opts []customfield.Option) ([]byte, error) {
	if opts == nil {
		return nil, nil
	}
	b, err := json.Marshal(opts)
	if err != nil {
		return nil, fmt.Errorf("encode options: %w", err)
	}
	return b, nil
}

// Delete deletes a live definition in tx: its values leave every answer
// at once (customfield.Live skips it), the erasure job removes them from
// storage, and its key is taken until then. The caller forgets the cached
// definitions once tx has committed (customfield.Forget).
func Delete(ctx context.Context, tx db.DBTX, ws, id uuid.UUID) error {
	n, err := db.Q.CustomFieldMarkDeleted(ctx, tx, dbsqlc.CustomFieldMarkDeletedParams{WorkspaceID: ws, ID: id})
	if err != nil {
		return fmt.Errorf("delete custom field: %w", err)
	}
	if n == 0 {
		return notFound()
	}
	return nil
}

// holders counts the workspace's records of the field's object that hold
// one of values.
func holders(ctx context.Context, q db.DBTX, cur dbsqlc.CustomField, values []string) (int32, error) {
	var n int32
	var err error
	if customfield.Object(cur.Object) == customfield.Contact {
		n, err = db.Q.CustomFieldContactsHolding(ctx, q, dbsqlc.CustomFieldContactsHoldingParams{WorkspaceID: cur.WorkspaceID, Key: cur.Key, Values: values})
	} else {
		n, err = db.Q.CustomFieldLeadsHolding(ctx, q, dbsqlc.CustomFieldLeadsHoldingParams{WorkspaceID: cur.WorkspaceID, Key: cur.Key, Values: values})
	}
	if err != nil {
		return 0, fmt.Errorf("count records holding options: %w", err)
	}
	return n, nil
}

// ToProto renders a definition as the API answers it.
func ToProto(r dbsqlc.CustomField) (*customfieldv1.CustomField, error) {
	d, err := customfield.FromRow(r)
	if err != nil {
		return nil, err
	}
	required := d.Required
	out := &customfieldv1.CustomField{
		Id: opaqueid.Format(opaqueid.Field, d.ID), Object: string(d.Object), Key: d.Key, Label: d.Label, Type: string(d.Type),
		Required: &required, Description: r.Description,
		CreatedAt: timestamppb.New(d.CreatedAt.UTC()), UpdatedAt: timestamppb.New(d.UpdatedAt.UTC()),
	}
	for _, o := range d.Options {
		out.Options = append(out.Options, &customfieldv1.CustomFieldOption{Value: o.Value, Label: o.Label})
	}
	return out, nil
}
