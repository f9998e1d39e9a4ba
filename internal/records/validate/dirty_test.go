package validate_test

import (
	"testing"

	"google.golang.org/protobuf/types/known/structpb"

	leadv1 "github.com/svat/partnerapi/gen/partner/lead/v1"
	"github.com/svat/partnerapi/internal/records/validate"
)

// TestDirtyFieldInCustomValues: a NUL or invalid UTF-8 anywhere in a
// custom value (walked without reflection) is named by its path, as the
// reflective walk names the other fields; clean values pass.
func TestDirtyFieldInCustomValues(t *testing.T) {
	list := func(vs ...*structpb.Value) *structpb.Value {
		return structpb.NewListValue(&structpb.ListValue{Values: vs})
	}
	obj := func(k string, v *structpb.Value) *structpb.Value {
		return structpb.NewStructValue(&structpb.Struct{Fields: map[string]*structpb.Value{k: v}})
	}
	clean := structpb.NewStringValue("Wants a demo, prefers mornings é 😀")
	for _, c := range []struct {
		name string
		v    *structpb.Value
		want string
	}{
		{"clean", list(clean, structpb.NewNumberValue(1), obj("k", clean), structpb.NewNullValue()), ""},
		{"NUL", structpb.NewStringValue("a\x00b"), "customFields.notes.stringValue"},
		{"invalid UTF-8", structpb.NewStringValue("\xff"), "customFields.notes.stringValue"},
		{"in a list", list(clean, structpb.NewStringValue("a\x00")), "customFields.notes.listValue.values[1].stringValue"},
		{"in an object", obj("k", structpb.NewStringValue("a\x00")), "customFields.notes.structValue.fields.k.stringValue"},
		{"an object's key", obj("a\x00", clean), "customFields.notes.structValue.fields"},
		{"deep", list(obj("k", list(structpb.NewStringValue("\x00")))), "customFields.notes.listValue.values[0].structValue.fields.k.listValue.values[0].stringValue"},
	} {
		t.Run(c.name, func(t *testing.T) {
			l := &leadv1.Lead{Title: new(string), CustomFields: map[string]*structpb.Value{"notes": c.v, "budget": structpb.NewNumberValue(5)}}
			if got := validate.DirtyField(l.ProtoReflect()); got != c.want {
				t.Fatalf("DirtyField = %q, want %q", got, c.want)
			}
		})
	}
	l := &leadv1.Lead{CustomFields: map[string]*structpb.Value{"a\x00": clean}}
	if got := validate.DirtyField(l.ProtoReflect()); got != "customFields" {
		t.Fatalf("a dirty key: DirtyField = %q, want customFields", got)
	}
}

// TestDirtyFieldInAList: an item of a list is named by its index, down to
// the field, its custom values included.
func TestDirtyFieldInAList(t *testing.T) {
	clean, dirty := "ok", "a\x00"
	for _, c := range []struct {
		req  *leadv1.BatchCreateLeadsRequest
		want string
	}{
		{&leadv1.BatchCreateLeadsRequest{Leads: []*leadv1.Lead{{Title: &clean}, {Title: &clean}}}, ""},
		{&leadv1.BatchCreateLeadsRequest{Leads: []*leadv1.Lead{{Title: &clean}, {Contact: &leadv1.LeadContact{Email: &dirty}}}}, "leads[1].contact.email"},
		{&leadv1.BatchCreateLeadsRequest{Leads: []*leadv1.Lead{{Title: &dirty}}}, "leads[0].title"},
		{&leadv1.BatchCreateLeadsRequest{Leads: []*leadv1.Lead{{}, {}, {CustomFields: map[string]*structpb.Value{"notes": structpb.NewStringValue(dirty)}}}}, "leads[2].customFields.notes.stringValue"},
	} {
		if got := validate.DirtyField(c.req.ProtoReflect()); got != c.want {
			t.Errorf("DirtyField = %q, want %q", got, c.want)
		}
	}
}
