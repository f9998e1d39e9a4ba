package idempotency

import (
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	leadv1 "github.com/svat/partnerapi/gen/partner/lead/v1"
	problemv1 "github.com/svat/partnerapi/gen/partner/problem/v1"
)

// TestEncodeAnswerReadsBackTheAnswer: a lead batch's stored answer, its
// values written by hand, reads back with proto.Unmarshal as the answer
// itself (so any release replays it), leaves the answer as it was, and
// takes the hand-written way for every value a create answers; a value
// it does not write (an object) goes through proto.Marshal, read back the
// same.
func TestEncodeAnswerReadsBackTheAnswer(t *testing.T) {
	list := func(vs ...*structpb.Value) *structpb.Value {
		return structpb.NewListValue(&structpb.ListValue{Values: vs})
	}
	title, status := "Deal", "new"
	lead := func(id string, vals map[string]*structpb.Value) *leadv1.BatchCreateLeadsResult {
		return &leadv1.BatchCreateLeadsResult{Result: &leadv1.BatchCreateLeadsResult_Lead{Lead: &leadv1.Lead{
			Id: id, Title: &title, Status: &status, CreatedAt: timestamppb.Now(), CustomFields: vals,
		}}}
	}
	values := map[string]*structpb.Value{
		"budget": structpb.NewNumberValue(25000), "neg": structpb.NewNumberValue(-1.5e-7),
		"notes": structpb.NewStringValue("Wants a demo é 😀"), "empty": structpb.NewStringValue(""),
		"yes": structpb.NewBoolValue(true), "no": structpb.NewBoolValue(false),
		"channels": list(structpb.NewStringValue("email"), structpb.NewStringValue("phone")),
		"none":     list(), "null": structpb.NewNullValue(), "unset": {},
	}
	answer := &leadv1.BatchCreateLeadsResponse{Results: []*leadv1.BatchCreateLeadsResult{
		lead("led_1", values),
		{Result: &leadv1.BatchCreateLeadsResult_Error{Error: &problemv1.Problem{Title: "Conflict", Status: 409}}},
		lead("led_2", nil),
		lead("led_3", map[string]*structpb.Value{"one": structpb.NewStringValue("x")}),
		{},
	}}
	before := proto.Clone(answer)
	if _, ok := encodeLeadBatch(answer); !ok {
		t.Fatal("the answer's values were not written by hand")
	}
	b, err := encodeAnswer(answer)
	if err != nil {
		t.Fatal(err)
	}
	if !proto.Equal(answer, before) {
		t.Fatal("encoding changed the answer")
	}
	var got leadv1.BatchCreateLeadsResponse
	if err := proto.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	if !proto.Equal(&got, answer) {
		t.Fatalf("read back\n  %v\nwant\n  %v", &got, answer)
	}
	// An object value: proto.Marshal's way, the same answer.
	obj := &leadv1.BatchCreateLeadsResponse{Results: []*leadv1.BatchCreateLeadsResult{lead("led_4", map[string]*structpb.Value{
		"o": structpb.NewStructValue(&structpb.Struct{Fields: map[string]*structpb.Value{"k": structpb.NewStringValue("v")}}),
	})}}
	if _, ok := encodeLeadBatch(obj); ok {
		t.Fatal("an object value was written by hand")
	}
	b, err = encodeAnswer(obj)
	if err != nil {
		t.Fatal(err)
	}
	got.Reset()
	if err := proto.Unmarshal(b, &got); err != nil || !proto.Equal(&got, obj) {
		t.Fatalf("object answer read back as %v, %v", &got, err)
	}
}
