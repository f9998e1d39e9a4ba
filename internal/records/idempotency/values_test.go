package idempotency

import (
	"bytes"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	contactv1 "github.com/svat/partnerapi/gen/partner/contact/v1"
	leadv1 "github.com/svat/partnerapi/gen/partner/lead/v1"
)

// TestHashedCustomValues: a create without custom values hashes its
// deterministic protobuf encoding, as the previous release does; with
// values, requests that mean the same hash the same and any difference in
// a value, its kind or its place hashes apart; hashing leaves the request
// as it was.
func TestHashedCustomValues(t *testing.T) {
	title := "T"
	plain := &leadv1.CreateLeadRequest{Lead: &leadv1.Lead{Title: &title, Contact: &leadv1.LeadContact{}}}
	got, err := hashed(plain)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := proto.MarshalOptions{Deterministic: true}.Marshal(plain)
	if !bytes.Equal(got, want) {
		t.Fatal("a create without values does not hash as its deterministic protobuf encoding")
	}

	vals := func(kv ...any) map[string]*structpb.Value {
		m := map[string]*structpb.Value{}
		for i := 0; i < len(kv); i += 2 {
			v, err := structpb.NewValue(kv[i+1])
			if err != nil {
				t.Fatal(err)
			}
			m[kv[i].(string)] = v
		}
		return m
	}
	lead := func(lv, cv map[string]*structpb.Value) *leadv1.CreateLeadRequest {
		return &leadv1.CreateLeadRequest{Lead: &leadv1.Lead{Title: &title, CustomFields: lv, Contact: &leadv1.LeadContact{CustomFields: cv}}}
	}
	hash := func(m proto.Message) string {
		before := proto.Clone(m)
		b, err := hashed(m)
		if err != nil {
			t.Fatal(err)
		}
		if !proto.Equal(before, m) {
			t.Fatal("hashing changed the request")
		}
		return string(b)
	}
	base := hash(lead(vals("a", 1.0, "b", "x", "c", []any{"p", "q"}, "d", map[string]any{"k": true, "j": nil}), nil))
	if again := hash(lead(vals("d", map[string]any{"j": nil, "k": true}, "c", []any{"p", "q"}, "b", "x", "a", 1.0), nil)); again != base {
		t.Fatal("the same values hash apart")
	}
	for name, other := range map[string]proto.Message{
		"a number as a string":      lead(vals("a", "1", "b", "x", "c", []any{"p", "q"}, "d", map[string]any{"k": true, "j": nil}), nil),
		"another number":            lead(vals("a", 2.0, "b", "x", "c", []any{"p", "q"}, "d", map[string]any{"k": true, "j": nil}), nil),
		"a list in another order":   lead(vals("a", 1.0, "b", "x", "c", []any{"q", "p"}, "d", map[string]any{"k": true, "j": nil}), nil),
		"a null for a false":        lead(vals("a", 1.0, "b", "x", "c", []any{"p", "q"}, "d", map[string]any{"k": true, "j": false}), nil),
		"one value less":            lead(vals("a", 1.0, "b", "x", "c", []any{"p", "q"}), nil),
		"on the contact instead":    lead(nil, vals("a", 1.0, "b", "x", "c", []any{"p", "q"}, "d", map[string]any{"k": true, "j": nil})),
		"keys run together":         lead(vals("a", 1.0, "bx", "", "c", []any{"p", "q"}, "d", map[string]any{"k": true, "j": nil}), nil),
		"no values (another title)": &leadv1.CreateLeadRequest{Lead: &leadv1.Lead{Title: &title}},
	} {
		if hash(other) == base {
			t.Errorf("%s: hashes as the first request", name)
		}
	}
	batch := func(first, second map[string]*structpb.Value) string {
		return hash(&leadv1.BatchCreateLeadsRequest{Leads: []*leadv1.Lead{{CustomFields: first}, {CustomFields: second}}})
	}
	if batch(vals("a", 1.0), nil) == batch(nil, vals("a", 1.0)) {
		t.Error("a batch's values on another lead hash the same")
	}
	contacts := func(first, second map[string]*structpb.Value) string {
		return hash(&contactv1.BatchCreateContactsRequest{Contacts: []*contactv1.Contact{{CustomFields: first}, {CustomFields: second}}})
	}
	if contacts(vals("a", 1.0), nil) == contacts(nil, vals("a", 1.0)) {
		t.Error("a contact batch's values on another contact hash the same")
	}
	if hash(&contactv1.CreateContactRequest{Contact: &contactv1.Contact{CustomFields: vals("a", 1.0)}}) ==
		hash(&contactv1.CreateContactRequest{Contact: &contactv1.Contact{CustomFields: vals("a", 2.0)}}) {
		t.Error("a contact's values do not count")
	}
}
