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

// benchAnswer is a batch's answer of 100 leads, each with vals.
func benchAnswer(vals map[string]*structpb.Value) *leadv1.BatchCreateLeadsResponse {
	title, status, src := "Lee", "new", "web_form"
	r := &leadv1.BatchCreateLeadsResponse{}
	for range 100 {
		r.Results = append(r.Results, &leadv1.BatchCreateLeadsResult{Result: &leadv1.BatchCreateLeadsResult_Lead{Lead: &leadv1.Lead{
			Id: "led_06h03v5hwxrxq2y8zvaw85bnsc", ContactId: "con_06h03v5jbnsyf5qa3x05370hcc", Title: &title, Status: &status,
			Source: &src, Value: &leadv1.Money{Amount: 1000, Currency: "USD"}, CreatedAt: timestamppb.Now(), UpdatedAt: timestamppb.Now(),
			CustomFields: vals,
		}}})
	}
	return r
}

var benchValues = map[string]*structpb.Value{
	"budget": structpb.NewNumberValue(25000), "interest": structpb.NewStringValue("crm"),
	"channels":   structpb.NewListValue(&structpb.ListValue{Values: []*structpb.Value{structpb.NewStringValue("email"), structpb.NewStringValue("phone")}}),
	"newsletter": structpb.NewBoolValue(true), "start_date": structpb.NewStringValue("2027-01-15"),
	"call_at": structpb.NewStringValue("2026-12-01T09:30:00Z"), "website": structpb.NewStringValue("https://example.com/pricing"),
	"billing_email": structpb.NewStringValue("billing@example.com"), "notes": structpb.NewStringValue("Wants a demo next week"),
	"team_size": structpb.NewStringValue("11-50"),
}

// BenchmarkEncodeAnswer is a stored batch answer of 100 leads with ten
// values each, as encodeAnswer writes it; ...Marshal is proto.Marshal's,
// and ...NoValues both without values.
func BenchmarkEncodeAnswer(b *testing.B) { benchEncode(b, benchAnswer(benchValues), encodeAnswer) }
func BenchmarkEncodeAnswerMarshal(b *testing.B) {
	benchEncode(b, benchAnswer(benchValues), proto.Marshal)
}
func BenchmarkEncodeAnswerNoValues(b *testing.B) {
	benchEncode(b, benchAnswer(nil), encodeAnswer)
}
func BenchmarkEncodeAnswerNoValuesMarshal(b *testing.B) {
	benchEncode(b, benchAnswer(nil), proto.Marshal)
}

func benchEncode(b *testing.B, r *leadv1.BatchCreateLeadsResponse, enc func(proto.Message) ([]byte, error)) {
	b.ReportAllocs()
	for b.Loop() {
		if _, err := enc(r); err != nil {
			b.Fatal(err)
		}
	}
}
