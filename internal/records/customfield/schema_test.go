package customfield_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/svat/partnerapi/internal/records/customfield"
	"github.com/svat/partnerapi/internal/records/validate"
)

// TestSchemaAgreesWithTheChecks: each type's JSON Schema (the workspace
// OpenAPI document's) accepts the values the checks accept, and refuses
// the ones they refuse for their JSON type or their bounds; with
// nullable it accepts null too.
func TestSchemaAgreesWithTheChecks(t *testing.T) {
	t.Parallel()
	opts := []customfield.Option{{Value: "crm", Label: "CRM"}, {Value: "erp", Label: "ERP"}}
	cases := []struct {
		typ    customfield.Type
		values map[string]bool // JSON value -> accepted
	}{
		{customfield.Text, map[string]bool{`"hello"`: true, `1`: false, `"` + strings.Repeat("x", 1001) + `"`: false}},
		{customfield.Number, map[string]bool{`25000`: true, `-1.5`: true, `"25000"`: false, `true`: false}},
		{customfield.Boolean, map[string]bool{`true`: true, `false`: true, `"true"`: false, `0`: false}},
		{customfield.Date, map[string]bool{`"2026-05-01"`: true, `"2026-13-01"`: false, `"01/05/2026"`: false, `20260501`: false}},
		{customfield.DateTime, map[string]bool{`"2026-05-01T09:30:00+02:00"`: true, `"2026-05-01"`: false, `1`: false}},
		{customfield.Select, map[string]bool{`"crm"`: true, `"other"`: false, `["crm"]`: false}},
		{customfield.MultiSelect, map[string]bool{`["crm","erp"]`: true, `["crm"]`: true, `[]`: false, `["crm","crm"]`: false, `["other"]`: false, `"crm"`: false}},
		{customfield.URL, map[string]bool{`"https://example.com/a"`: true, `7`: false}},
		{customfield.Email, map[string]bool{`"ada@example.com"`: true, `"not-an-email"`: false, `false`: false}},
	}
	for _, c := range cases {
		d := customfield.Definition{Key: "f", Label: "F", Type: c.typ}
		if c.typ.HasOptions() {
			d.Options = opts
		}
		for _, nullable := range []bool{false, true} {
			sch := compile(t, d.Schema(nullable))
			for raw, ok := range c.values {
				var v any
				if err := json.Unmarshal([]byte(raw), &v); err != nil {
					t.Fatal(err)
				}
				if got := sch.Validate(v) == nil; got != ok {
					t.Errorf("%s (nullable %t): schema accepts %s: %t, want %t", c.typ, nullable, raw, got, ok)
				}
				if checked := accepts(t, d, raw); checked != ok {
					t.Errorf("%s: the checks accept %s: %t, want %t", c.typ, raw, checked, ok)
				}
			}
			if got := sch.Validate(nil) == nil; got != nullable {
				t.Errorf("%s (nullable %t): schema accepts null: %t", c.typ, nullable, got)
			}
		}
	}
}

func compile(t *testing.T, schema map[string]any) *jsonschema.Schema {
	t.Helper()
	b, _ := json.Marshal(schema)
	doc, err := jsonschema.UnmarshalJSON(strings.NewReader(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.AssertFormat()
	if err := c.AddResource("schema.json", doc); err != nil {
		t.Fatal(err)
	}
	s, err := c.Compile("schema.json")
	if err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	return s
}

// accepts reports whether a create with {"f": raw} passes the checks.
func accepts(t *testing.T, d customfield.Definition, raw string) bool {
	t.Helper()
	var v structpb.Value
	if err := v.UnmarshalJSON([]byte(raw)); err != nil {
		t.Fatal(err)
	}
	var errs validate.Errors
	c := customfield.NewChecker([]customfield.Definition{d})
	out := c.Create(&errs, "", map[string]*structpb.Value{"f": &v})
	return c.Err() == nil && errs.Err() == nil && out["f"] != nil
}
