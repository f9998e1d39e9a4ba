package fieldmask

import (
	"encoding/json"
	"errors"
	"reflect"
	"testing"

	"google.golang.org/protobuf/types/known/fieldmaskpb"

	leadv1 "github.com/svat/partnerapi/gen/partner/lead/v1"
	"github.com/svat/partnerapi/internal/contract/apierror"
)

func TestFromJSON(t *testing.T) {
	t.Parallel()
	md := (&leadv1.Lead{}).ProtoReflect().Descriptor()
	for patch, want := range map[string]string{
		`{}`:                                         "",
		`{"status":"new","title":null}`:              "status,title",
		`{"value":{"amount":5}}`:                     "value.amount",
		`{"value":null}`:                             "value",
		`{"value":{}}`:                               "",
		`{"external_id":"x","contactId":"c"}`:        "contactId,externalId",
		`{"createdAt":"2020-01-01T00:00:00Z"}`:       "createdAt",
		`{"contact":{"email":"a@b.co"},"nope":true}`: "contact.email",
	} {
		var obj map[string]any
		if err := json.Unmarshal([]byte(patch), &obj); err != nil {
			t.Fatal(err)
		}
		if got := FromJSON(md, obj); got != want {
			t.Errorf("FromJSON(%s) = %q, want %q", patch, got, want)
		}
	}
}

func TestMergesNothing(t *testing.T) {
	t.Parallel()
	md := (&leadv1.Lead{}).ProtoReflect().Descriptor()
	for patch, want := range map[string]bool{
		`{}`:                          true,
		`{"value":{}}`:                true,
		`{"value":{},"contact":{}}`:   true,
		`{"value":null}`:              false,
		`{"value":{"amount":5}}`:      false,
		`{"nope":{}}`:                 false, // left for the decoder to refuse
		`{"value":{},"status":"new"}`: false,
		`{"createdAt":{}}`:            false, // a well-known type, not merged
		`{"value":{"currency":{}}}`:   false, // not a message: the decoder refuses it
	} {
		var obj map[string]any
		if err := json.Unmarshal([]byte(patch), &obj); err != nil {
			t.Fatal(err)
		}
		if got := MergesNothing(md, obj); got != want {
			t.Errorf("MergesNothing(%s) = %v, want %v", patch, got, want)
		}
	}
}

func TestPaths(t *testing.T) {
	t.Parallel()
	rules := Rules{Writable: []string{"title", "status", "value.amount", "value.currency"}, ReadOnly: map[string]string{"id": "is read-only"}}
	in := &leadv1.Lead{Title: ptr("t"), Value: &leadv1.Money{Amount: 1}}
	for name, tc := range map[string]struct {
		mask *fieldmaskpb.FieldMask
		want []string
		bad  string
	}{
		"no mask: populated fields": {nil, []string{"title", "value"}, ""},
		// An empty mask is read as an omitted one (AIP-134): a client whose
		// library sends {paths: []} must not have its change dropped.
		"empty mask: populated fields": {&fieldmaskpb.FieldMask{}, []string{"title", "value"}, ""},
		"named":                        {&fieldmaskpb.FieldMask{Paths: []string{"status", "value.amount"}}, []string{"status", "value.amount"}, ""},
		"star":                         {&fieldmaskpb.FieldMask{Paths: []string{"*"}}, []string{"status", "title"}, ""},
		"read-only":                    {&fieldmaskpb.FieldMask{Paths: []string{"id"}}, nil, "id is read-only"},
		"unknown":                      {&fieldmaskpb.FieldMask{Paths: []string{"external_id"}}, nil, "externalId is not a field that can be updated"},
		"twice":                        {&fieldmaskpb.FieldMask{Paths: []string{"title", "title"}}, nil, "title is named twice"},
	} {
		got, err := Paths(tc.mask, in, rules)
		if tc.bad != "" {
			var e *apierror.Error
			if !errors.As(err, &e) || e.Code != apierror.CodeMalformedRequest || e.Message != tc.bad {
				t.Errorf("%s: %v, want malformed %q", name, err, tc.bad)
			}
			continue
		}
		want := map[string]bool{}
		for _, p := range tc.want {
			want[p] = true
		}
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("%s: %v %v, want %v", name, got, err, want)
		}
	}
}

func ptr[T any](v T) *T { return &v }
