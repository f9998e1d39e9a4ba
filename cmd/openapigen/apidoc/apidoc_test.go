package apidoc

import (
	"encoding/json"
	"reflect"
	"slices"
	"testing"
)

func decode(t *testing.T, s string) obj {
	t.Helper()
	var v obj
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatal(err)
	}
	return v
}

func same(t *testing.T, what string, got any, want string) {
	t.Helper()
	var w any
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatal(err)
	}
	g, _ := json.Marshal(got)
	var gv any
	_ = json.Unmarshal(g, &gv)
	if !reflect.DeepEqual(gv, w) {
		t.Errorf("%s = %s, want %s", what, g, want)
	}
}

// TestSplitRequestsAndAnswers: a schema that a create and its answer
// share is split; the answer has no null, its required and readOnly
// members, and no create-only member; the request variant may send null
// for anything, requires nothing and marks the create-only member
// writeOnly; a schema only that member reaches stays a request schema
// under its own name.
func TestSplitRequestsAndAnswers(t *testing.T) {
	paths := decode(t, `{"/api/v1/leads": {"post": {
		"requestBody": {"content": {"application/json": {"schema": {"$ref": "#/components/schemas/partner.lead.v1.Lead"}}}},
		"responses": {"201": {"content": {"application/json": {"schema": {"$ref": "#/components/schemas/partner.lead.v1.Lead"}}}}}}}}`)
	schemas := decode(t, `{
		"partner.lead.v1.Lead": {"type": "object", "title": "Lead", "properties": {
			"id": {"type": "string"},
			"contactId": {"type": "string"},
			"title": {"type": ["string", "null"]},
			"status": {"type": ["string", "null"], "enum": ["new", "won", null]},
			"createdAt": {"$ref": "#/components/schemas/google.protobuf.Timestamp"},
			"updatedAt": {"$ref": "#/components/schemas/google.protobuf.Timestamp"},
			"contact": {"$ref": "#/components/schemas/partner.lead.v1.LeadContact"},
			"value": {"$ref": "#/components/schemas/partner.lead.v1.Money"}}},
		"partner.lead.v1.LeadContact": {"type": "object", "properties": {"email": {"type": ["string", "null"]}}},
		"partner.lead.v1.Money": {"type": "object", "title": "Money", "properties": {"amount": {"type": "integer"}, "currency": {"type": "string"}}},
		"google.protobuf.Timestamp": {"type": "string", "format": "date-time"}}`)
	ops := []Operation{{Method: "POST", Path: "/api/v1/leads", Success: 201}}
	splitRequestsAndAnswers(paths, ops, schemas)

	lead := schemas["partner.lead.v1.Lead"].(obj)
	props := lead["properties"].(obj)
	if props["contact"] != nil {
		t.Error("the answer has the create-only contact")
	}
	same(t, "answer title", props["title"], `{"type": "string"}`)
	same(t, "answer status", props["status"], `{"type": "string", "enum": ["new", "won"]}`)
	same(t, "answer id", props["id"], `{"type": "string", "readOnly": true}`)
	same(t, "answer createdAt", props["createdAt"], `{"$ref": "#/components/schemas/google.protobuf.Timestamp", "readOnly": true}`)
	same(t, "answer value", props["value"], `{"$ref": "#/components/schemas/partner.lead.v1.Money"}`)
	same(t, "answer required", lead["required"], `["id", "contactId", "title", "status", "createdAt", "updatedAt"]`)
	same(t, "money required", schemas["partner.lead.v1.Money"].(obj)["required"], `["amount", "currency"]`)

	in, ok := schemas["partner.lead.v1.LeadInput"].(obj)
	if !ok {
		t.Fatal("no request variant of the lead")
	}
	if in["required"] != nil {
		t.Errorf("the request variant requires %v", in["required"])
	}
	inProps := in["properties"].(obj)
	same(t, "request contact", inProps["contact"],
		`{"anyOf": [{"$ref": "#/components/schemas/partner.lead.v1.LeadContact"}, {"type": "null"}], "writeOnly": true}`)
	same(t, "request id", inProps["id"], `{"type": ["string", "null"], "readOnly": true}`)
	same(t, "request contactId", inProps["contactId"], `{"type": ["string", "null"]}`)
	same(t, "request value", inProps["value"],
		`{"anyOf": [{"$ref": "#/components/schemas/partner.lead.v1.MoneyInput"}, {"type": "null"}]}`)
	same(t, "request status", inProps["status"], `{"type": ["string", "null"], "enum": ["new", "won", null]}`)
	if schemas["partner.lead.v1.LeadContactInput"] != nil {
		t.Error("LeadContact, which only requests carry, got a request variant")
	}
	same(t, "LeadContact", schemas["partner.lead.v1.LeadContact"], `{"type": "object", "properties": {"email": {"type": ["string", "null"]}}}`)
	same(t, "request body", paths["/api/v1/leads"].(obj)["post"].(obj)["requestBody"],
		`{"content": {"application/json": {"schema": {"$ref": "#/components/schemas/partner.lead.v1.LeadInput"}}}}`)
}

// TestMergePatchSchemaLeavesOutReadOnly: a patch schema has the
// resource's writable members, each nullable, and none of its read-only
// or create-only ones.
func TestMergePatchSchemaLeavesOutReadOnly(t *testing.T) {
	schemas := decode(t, `{"partner.lead.v1.Lead": {"title": "Lead", "properties": {
		"id": {"type": "string"}, "createdAt": {"type": "string"}, "updatedAt": {"type": "string"},
		"contact": {"type": "object"}, "title": {"type": "string"}}}}`)
	got := mergePatchSchema(schemas, obj{"$ref": "#/components/schemas/partner.lead.v1.Lead"})
	same(t, "ref", got, `{"$ref": "#/components/schemas/partner.lead.v1.LeadPatch"}`)
	same(t, "patch members", schemas["partner.lead.v1.LeadPatch"].(obj)["properties"], `{"title": {"type": ["string", "null"]}}`)
}

// TestPruneComponents: components nothing outside components reaches
// go, with those only they refer to; what a used one refers to stays, and
// security schemes stay.
func TestPruneComponents(t *testing.T) {
	doc := decode(t, `{
		"paths": {"/a": {"get": {"responses": {"200": {"$ref": "#/components/responses/A"}}}}},
		"components": {
			"responses": {"A": {"content": {"application/json": {"schema": {"$ref": "#/components/schemas/x~1A"}}}}, "Unused": {}},
			"schemas": {
				"x/A": {"properties": {"b": {"$ref": "#/components/schemas/B"}}},
				"B": {"type": "string"},
				"C": {"properties": {"d": {"$ref": "#/components/schemas/D"}}},
				"D": {"type": "string"}},
			"securitySchemes": {"oauth2": {"type": "oauth2"}}}}`)
	pruneComponents(doc)
	c := doc["components"].(obj)
	same(t, "schemas", keys(c["schemas"].(obj)), `["B", "x/A"]`)
	same(t, "responses", keys(c["responses"].(obj)), `["A"]`)
	same(t, "security schemes", keys(c["securitySchemes"].(obj)), `["oauth2"]`)
}

// TestNotNull: the inverse of nullable, with the other keywords kept.
func TestNotNull(t *testing.T) {
	for _, p := range []string{
		`{"type": "string", "description": "d"}`,
		`{"type": "string", "enum": ["a", "b"]}`,
		`{"$ref": "#/components/schemas/M", "title": "m"}`,
	} {
		want := decode(t, p)
		same(t, "notNull(nullable("+p+"))", notNull(nullable(want)), p)
	}
}

func keys(m obj) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
