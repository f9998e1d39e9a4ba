package customfield

import (
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/svat/partnerapi/internal/records/validate"
)

// TestAnswerCheckedIsTheStoredAnswer: the answer of a create made from
// its checked values is the answer of the same values stored and read
// back, for values the check keeps as sent and values it normalises.
func TestAnswerCheckedIsTheStoredAnswer(t *testing.T) {
	opts := []Option{{Value: "email", Label: "Email"}, {Value: "phone", Label: "Phone"}, {Value: "sms", Label: "SMS"}}
	defs := []Definition{
		{Key: "t", Type: Text}, {Key: "t2", Type: Text}, {Key: "e", Type: Email}, {Key: "u", Type: URL},
		{Key: "d", Type: Date}, {Key: "dt", Type: DateTime}, {Key: "dt2", Type: DateTime},
		{Key: "n", Type: Number}, {Key: "n0", Type: Number}, {Key: "n1", Type: Number}, {Key: "n2", Type: Number},
		{Key: "b", Type: Boolean}, {Key: "s", Type: Select, Options: opts},
		{Key: "m", Type: MultiSelect, Options: opts}, {Key: "m2", Type: MultiSelect, Options: opts},
		{Key: "gone", Type: Text},
	}
	list := func(s ...string) *structpb.Value {
		l := make([]*structpb.Value, len(s))
		for i, x := range s {
			l[i] = structpb.NewStringValue(x)
		}
		return structpb.NewListValue(&structpb.ListValue{Values: l})
	}
	sent := map[string]*structpb.Value{
		"t":    structpb.NewStringValue("as sent"),
		"t2":   structpb.NewStringValue("  trimmed  "),
		"e":    structpb.NewStringValue("Billing@Example.COM"),
		"u":    structpb.NewStringValue("https://example.com/x?y=1"),
		"d":    structpb.NewStringValue("2027-01-15"),
		"dt":   structpb.NewStringValue("2026-12-01T09:30:00Z"),
		"dt2":  structpb.NewStringValue("2026-12-01T10:30:00.500+01:00"),
		"n":    structpb.NewNumberValue(25000),
		"n1":   structpb.NewNumberValue(0.1),
		"n2":   structpb.NewNumberValue(-1.5e21),
		"b":    structpb.NewBoolValue(false),
		"s":    structpb.NewStringValue("sms"),
		"m":    list("email", "sms"),
		"m2":   list("sms", "email"),
		"gone": structpb.NewNullValue(),
	}
	negZero := 0.0
	negZero = -negZero
	sent["n0"] = structpb.NewNumberValue(negZero)
	var v validate.Errors
	c := NewChecker(defs)
	vals := c.Create(&v, "", sent)
	if err := v.Err(); err != nil || c.Err() != nil {
		t.Fatalf("check: %v, %v", err, c.Err())
	}
	got := AnswerChecked(vals, sent)
	want := Answer(ByKey(defs), vals.Encode())
	if len(got) != len(want) || len(got) != len(sent)-1 {
		t.Fatalf("answered %d values, stored answer %d, sent %d (one null)", len(got), len(want), len(sent))
	}
	for k, w := range want {
		if !proto.Equal(got[k], w) {
			t.Errorf("%s: answered %v, stored answer %v", k, got[k], w)
		}
	}
	// Kept values are the very Values sent; normalised ones are not.
	for k, same := range map[string]bool{"t": true, "n": true, "b": true, "m": true, "dt": true, "t2": false, "e": false, "dt2": false, "m2": false, "n0": false} {
		if (got[k] == sent[k]) != same {
			t.Errorf("%s: answered the sent Value %v, want %v", k, got[k] == sent[k], same)
		}
	}
	if n := got["n0"].GetNumberValue(); n != 0 || 1/n < 0 {
		t.Errorf("-0 answered as %v, want 0 (numeric has no negative zero)", n)
	}
}
