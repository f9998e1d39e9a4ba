package settings

import (
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"connectrpc.com/connect"

	adminv1 "github.com/svat/partnerapi/gen/partner/admin/v1"
	customfieldv1 "github.com/svat/partnerapi/gen/partner/customfield/v1"
	"github.com/svat/partnerapi/internal/contract/apierror"
	"github.com/svat/partnerapi/internal/records/customfield"
)

// The "Custom fields" page (product.md "Custom fields"): both objects'
// definitions, "Add custom field", an edit form for label, options,
// description and required, and "Delete" after a confirmation. Every
// action is the admin service's code, checked and audited with the
// signed-in member as actor, exactly as the API's rules say.

// fieldNotices are the outcomes a redirect after a change names.
var fieldNotices = map[string]string{
	"created": "The custom field is added.",
	"updated": "The custom field is saved.",
	"deleted": "The custom field is deleted: its values are gone from every answer, and are erased within 24 hours; its key is free again after that.",
}

// fieldRow is one definition as the page lists it.
type fieldRow struct {
	ID, Key, Label, Type, Description string
	Required                          bool
	// Options are "Label (value)", in their order.
	Options []string
}

// fieldTable is the definitions of one object.
type fieldTable struct {
	ID, Caption string
	Fields      []fieldRow
}

// fieldForm is the add or edit form, with what was typed and every
// error next to its field.
type fieldForm struct {
	// Edit is the field being edited; empty: a new field.
	Edit                     string
	Object, Key, Label, Type string
	Options, Description     string
	Required                 bool
	Errors                   map[string]string
	General                  string
	Objects                  []choice
	Types                    []choice
}

// choice is one option of a select.
type choice struct {
	Value, Label string
	Selected     bool
}

func toFieldRow(f *customfieldv1.CustomField) fieldRow {
	row := fieldRow{ID: f.GetId(), Key: f.GetKey(), Label: f.GetLabel(), Type: f.GetType(), Description: f.GetDescription(), Required: f.GetRequired()}
	for _, o := range f.GetOptions() {
		row.Options = append(row.Options, o.GetLabel()+" ("+o.GetValue()+")")
	}
	return row
}

// fields is the "Custom fields" page.
func (h *Handler) fields(w http.ResponseWriter, r *http.Request, s *session) {
	res, err := h.cfg.Admin.ListCustomFields(r.Context(), connect.NewRequest(&adminv1.ListCustomFieldsRequest{WorkspaceId: s.workspace}))
	if err != nil {
		h.refused(w, r, s, "list custom fields", err)
		return
	}
	p := h.frame(s, "Custom fields", "fields")
	p.Notice = fieldNotices[r.URL.Query().Get("done")]
	contact := fieldTable{ID: "contact-fields", Caption: "Contact fields"}
	lead := fieldTable{ID: "lead-fields", Caption: "Lead fields"}
	for _, f := range res.Msg.GetCustomFields() {
		if f.GetObject() == string(customfield.Contact) {
			contact.Fields = append(contact.Fields, toFieldRow(f))
		} else {
			lead.Fields = append(lead.Fields, toFieldRow(f))
		}
	}
	p.FieldTables = []fieldTable{contact, lead}
	h.render(w, r, http.StatusOK, "fields", p)
}

// newFieldForm is an empty add form.
func newFieldForm() *fieldForm {
	return &fieldForm{Object: string(customfield.Contact), Type: string(customfield.Text), Errors: map[string]string{}}
}

func (h *Handler) renderFieldForm(w http.ResponseWriter, r *http.Request, s *session, status int, f *fieldForm) {
	title := "Add custom field"
	if f.Edit != "" {
		title = "Edit custom field"
	}
	for _, o := range []customfield.Object{customfield.Contact, customfield.Lead} {
		f.Objects = append(f.Objects, choice{Value: string(o), Label: map[customfield.Object]string{customfield.Contact: "Contact", customfield.Lead: "Lead"}[o], Selected: f.Object == string(o)})
	}
	for _, t := range customfield.Types {
		f.Types = append(f.Types, choice{Value: string(t), Label: string(t), Selected: f.Type == string(t)})
	}
	p := h.frame(s, title, "fields")
	p.Heading, p.FieldForm = title, f
	h.render(w, r, status, "field", p)
}

// addFieldForm shows the add form.
func (h *Handler) addFieldForm(w http.ResponseWriter, r *http.Request, s *session) {
	h.renderFieldForm(w, r, s, http.StatusOK, newFieldForm())
}

// parseOptions reads the options box: one option a line, "value: Label"
// (the label is the value when the line has no colon).
func parseOptions(text string) []*customfieldv1.CustomFieldOption {
	var out []*customfieldv1.CustomFieldOption
	for line := range strings.SplitSeq(text, "\n") {
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		value, label, ok := strings.Cut(line, ":")
		value, label = strings.TrimSpace(value), strings.TrimSpace(label)
		if !ok || label == "" {
			label = value
		}
		out = append(out, &customfieldv1.CustomFieldOption{Value: value, Label: label})
	}
	return out
}

// fieldLabels name the form's fields in its messages.
var fieldLabels = map[string]string{
	"object": "The object", "key": "The key", "label": "The label", "type": "The type",
	"options": "The options", "description": "The description",
}

// fieldErrors puts an API error's violations next to the form's fields
// (an option's, "options[2].value", next to the options, naming its
// line), and the refusals that name no field (key_in_use,
// option_in_use, limit_exceeded) where they belong. It reports whether
// the error was one the form shows.
func fieldErrors(f *fieldForm, err error) bool {
	var e *apierror.Error
	if !errors.As(err, &e) {
		return false
	}
	switch e.Code {
	case apierror.CodeValidationFailed, apierror.CodeMalformedRequest:
		for _, v := range e.Fields {
			field, line := v.Field, ""
			if rest, ok := strings.CutPrefix(field, "options["); ok {
				if i, _, ok := strings.Cut(rest, "]"); ok {
					if n, err := strconv.Atoi(i); err == nil {
						line = fmt.Sprintf(" (line %d: %s)", n+1, strings.TrimPrefix(rest[len(i)+1:], "."))
					}
				}
				field = "options"
			}
			if _, seen := f.Errors[field]; seen {
				continue
			}
			label := fieldLabels[field]
			if label == "" {
				f.General = e.Message
				continue
			}
			f.Errors[field] = label + line + " " + v.Message + "."
		}
		if len(e.Fields) == 0 {
			f.General = e.Message
		}
	case apierror.CodeKeyInUse:
		f.Errors["key"] = "The key is in use by another field of this object (a deleted field's key is free again once its values are erased, within 24 hours)."
	case apierror.CodeOptionInUse:
		f.Errors["options"] = fmt.Sprintf("%d records hold an option you removed: change their values first, or keep the option.", e.RecordCount)
	case apierror.CodeLimitExceeded:
		f.General = e.Message + "."
	default:
		return false
	}
	return true
}

// addField adds a custom field.
func (h *Handler) addField(w http.ResponseWriter, r *http.Request, s *session) {
	form := r.PostForm
	f := newFieldForm()
	f.Object, f.Key, f.Label, f.Type = form.Get("object"), strings.TrimSpace(form.Get("key")), form.Get("label"), form.Get("type")
	f.Options, f.Description, f.Required = form.Get("options"), form.Get("description"), form.Get("required") == "on"
	in := &customfieldv1.CustomField{Object: f.Object, Key: f.Key, Label: f.Label, Type: f.Type, Required: &f.Required}
	if customfield.Type(f.Type).HasOptions() {
		in.Options = parseOptions(f.Options)
	}
	if d := strings.TrimSpace(f.Description); d != "" {
		in.Description = &d
	}
	_, err := h.cfg.Admin.CreateCustomField(r.Context(), connect.NewRequest(&adminv1.CreateCustomFieldRequest{
		WorkspaceId: s.workspace, MemberId: s.member, CustomField: in}))
	if err != nil {
		if fieldErrors(f, err) {
			h.renderFieldForm(w, r, s, http.StatusUnprocessableEntity, f)
			return
		}
		h.refused(w, r, s, "add custom field", err)
		return
	}
	http.Redirect(w, r, h.base+"/fields?done=created", http.StatusSeeOther)
}

// field finds one of the workspace's fields; nil when there is none.
func (h *Handler) field(w http.ResponseWriter, r *http.Request, s *session) *customfieldv1.CustomField {
	res, err := h.cfg.Admin.ListCustomFields(r.Context(), connect.NewRequest(&adminv1.ListCustomFieldsRequest{WorkspaceId: s.workspace}))
	if err != nil {
		h.refused(w, r, s, "read custom field", err)
		return nil
	}
	id := r.PathValue("field")
	i := slices.IndexFunc(res.Msg.GetCustomFields(), func(f *customfieldv1.CustomField) bool { return f.GetId() == id })
	if i < 0 {
		h.message(w, r, s, http.StatusNotFound, "Not found", "There is no such custom field in this workspace.")
		return nil
	}
	return res.Msg.GetCustomFields()[i]
}

// editFieldForm shows a field's edit form.
func (h *Handler) editFieldForm(w http.ResponseWriter, r *http.Request, s *session) {
	cur := h.field(w, r, s)
	if cur == nil {
		return
	}
	f := newFieldForm()
	f.Edit, f.Object, f.Key, f.Label, f.Type = cur.GetId(), cur.GetObject(), cur.GetKey(), cur.GetLabel(), cur.GetType()
	f.Description, f.Required = cur.GetDescription(), cur.GetRequired()
	var lines []string
	for _, o := range cur.GetOptions() {
		lines = append(lines, o.GetValue()+": "+o.GetLabel())
	}
	f.Options = strings.Join(lines, "\n")
	h.renderFieldForm(w, r, s, http.StatusOK, f)
}

// editField saves a field's label, options, description and required.
func (h *Handler) editField(w http.ResponseWriter, r *http.Request, s *session) {
	cur := h.field(w, r, s)
	if cur == nil {
		return
	}
	form := r.PostForm
	f := newFieldForm()
	f.Edit, f.Object, f.Key, f.Type = cur.GetId(), cur.GetObject(), cur.GetKey(), cur.GetType()
	f.Label, f.Options, f.Description, f.Required = form.Get("label"), form.Get("options"), form.Get("description"), form.Get("required") == "on"
	in := &customfieldv1.CustomField{Label: f.Label, Required: &f.Required}
	if d := strings.TrimSpace(f.Description); d != "" {
		in.Description = &d
	}
	paths := []string{"label", "description", "required"}
	if customfield.Type(cur.GetType()).HasOptions() {
		in.Options = parseOptions(f.Options)
		paths = append(paths, "options")
	}
	_, err := h.cfg.Admin.UpdateWorkspaceCustomField(r.Context(), s.workspace, s.member, cur.GetId(), in, paths)
	if err != nil {
		if fieldErrors(f, err) {
			h.renderFieldForm(w, r, s, http.StatusUnprocessableEntity, f)
			return
		}
		h.refused(w, r, s, "edit custom field", err)
		return
	}
	http.Redirect(w, r, h.base+"/fields?done=updated", http.StatusSeeOther)
}

// confirmDeleteField asks before a delete.
func (h *Handler) confirmDeleteField(w http.ResponseWriter, r *http.Request, s *session) {
	cur := h.field(w, r, s)
	if cur == nil {
		return
	}
	row := toFieldRow(cur)
	p := h.frame(s, "Delete "+row.Label+"?", "fields")
	p.Heading = "Delete " + row.Label + "?"
	p.Explain = "Its values leave every contact or lead at once, and are erased within 24 hours; this cannot be undone. The key " +
		row.Key + " is free again once they are erased."
	p.Action, p.Button, p.ButtonClass = h.base+"/fields/"+row.ID+"/delete", "Delete", "danger"
	h.render(w, r, http.StatusOK, "fieldconfirm", p)
}

// deleteField deletes a field.
func (h *Handler) deleteField(w http.ResponseWriter, r *http.Request, s *session) {
	_, err := h.cfg.Admin.DeleteCustomField(r.Context(), connect.NewRequest(&adminv1.DeleteCustomFieldRequest{
		FieldId: r.PathValue("field"), MemberId: s.member}))
	var e *apierror.Error
	if errors.As(err, &e) && e.Code == apierror.CodeNotFound {
		h.message(w, r, s, http.StatusNotFound, "Not found", "There is no such custom field in this workspace.")
		return
	}
	if err != nil {
		h.refused(w, r, s, "delete custom field", err)
		return
	}
	http.Redirect(w, r, h.base+"/fields?done=deleted", http.StatusSeeOther)
}
