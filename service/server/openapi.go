package server

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/svat/partnerapi/db"
	"github.com/svat/partnerapi/gen/openapi"
	"github.com/svat/partnerapi/internal/contract/apierror"
	"github.com/svat/partnerapi/internal/edge/gate"
	"github.com/svat/partnerapi/internal/records/customfield"
	"github.com/svat/partnerapi/internal/records/etag"
	"github.com/svat/partnerapi/internal/records/opaqueid"
	"github.com/svat/partnerapi/internal/security/auth"
)

// This file serves GET /openapi.json (product.md, "Custom fields": typed
// documents). Without an Authorization header it answers the public
// document (gen/openapi), where customFields is an object of JSON values;
// cacheable by anyone. With a bearer token of any scope it answers the
// token's workspace's own document: the same, with customFields of
// Contact, Lead and their inputs typed by the workspace's live
// definitions, so that openapi-typescript gives a partner its fields
// typed. That answer is private: Cache-Control "private, no-cache" with an
// ETag over the definitions, so a client keeps it and revalidates it for
// a 304. Vary: Authorization on both, so that no cache answers one for
// the other.
//
// A token that is sent but refused (invalid, expired, revoked, or a
// second Authorization header) is answered as the API answers it, 401
// with a Bearer challenge, not with the public document: a partner who
// sends a token wants its types, and would otherwise generate untyped
// ones without noticing. The request spends one from the client's read
// bucket, like any read.

// The schemas whose customFields are typed, by the definitions of which
// object, and how: an answer's values are never null and none is required
// (a record written before a field became required lacks it); a create
// requires the required fields and reads null as no value; a merge patch
// requires nothing and reads null as clear.
var typedSchemas = []struct {
	schema string
	object customfield.Object
	mode   schemaMode
}{
	{"partner.contact.v1.Contact", customfield.Contact, answerSchema},
	{"partner.contact.v1.ContactInput", customfield.Contact, createSchema},
	{"partner.contact.v1.ContactPatch", customfield.Contact, patchSchema},
	{"partner.lead.v1.Lead", customfield.Lead, answerSchema},
	{"partner.lead.v1.LeadInput", customfield.Lead, createSchema},
	{"partner.lead.v1.LeadContact", customfield.Contact, createSchema},
	{"partner.lead.v1.LeadPatch", customfield.Lead, patchSchema},
}

// The lists whose customFields.<key> filters are listed per key.
var filteredLists = []struct {
	path   string
	object customfield.Object
}{
	{"/api/v1/contacts", customfield.Contact},
	{"/api/v1/leads", customfield.Lead},
}

type schemaMode int

const (
	answerSchema schemaMode = iota
	createSchema
	patchSchema
)

// publicSum is the digest of the public document, the part of every
// workspace document's ETag that changes with a release.
var publicSum = sha256.Sum256(openapi.JSON)

// maxCachedDocuments bounds the rendered workspace documents kept: most
// workspaces share a few sets of definitions (none, often), and past the
// bound the cache starts again.
const maxCachedDocuments = 256

// openAPIDocs serves GET /openapi.json.
type openAPIDocs struct {
	gate    *gate.Gate
	db      *db.DB
	timeout time.Duration

	mu       sync.Mutex
	rendered map[string][]byte // ETag -> document
}

func (o *openAPIDocs) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Vary", "Authorization")
	if len(r.Header.Values("Authorization")) == 0 {
		h.Set("Content-Type", "application/json")
		h.Set("Cache-Control", "public, max-age=300")
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write(openapi.JSON)
		return
	}
	r, e := o.gate.Bearer(w, r, auth.Requirement{})
	if e != nil {
		gate.WriteError(w, r, e)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), o.timeout)
	defer cancel()
	ws := auth.FromContext(ctx).WorkspaceID
	contacts, leads, err := o.definitions(ctx, ws)
	if err != nil {
		gate.WriteError(w, r, o.gate.Classify(ctx, err))
		return
	}
	tag := documentTag(contacts, leads)
	h.Set("Cache-Control", "private, no-cache")
	h.Set("ETag", tag)
	notModified, err := etag.NotModified(r.Header.Values(etag.IfNoneMatch), tag)
	if err != nil {
		h.Del("ETag")
		var e *apierror.Error
		if !errors.As(err, &e) {
			e = o.gate.Classify(ctx, err)
		}
		gate.WriteError(w, r, e)
		return
	}
	if notModified {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	doc, err := o.document(tag, ws, contacts, leads)
	if err != nil {
		gate.WriteError(w, r, o.gate.Classify(ctx, err))
		return
	}
	h.Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(doc)
}

// definitions reads the workspace's live definitions of both objects, as
// the handlers that check and answer values read them.
func (o *openAPIDocs) definitions(ctx context.Context, ws uuid.UUID) (contacts, leads []customfield.Definition, err error) {
	c, err := customfield.Cached(ctx, o.db.Conn(), ws, customfield.Contact)
	if err != nil {
		return nil, nil, err
	}
	l, err := customfield.Cached(ctx, o.db.Conn(), ws, customfield.Lead)
	if err != nil {
		return nil, nil, err
	}
	return c.Defs, l.Defs, nil
}

// document is the workspace document of tag, rendered once per set of
// definitions.
func (o *openAPIDocs) document(tag string, ws uuid.UUID, contacts, leads []customfield.Definition) ([]byte, error) {
	o.mu.Lock()
	doc, ok := o.rendered[tag]
	o.mu.Unlock()
	if ok {
		return doc, nil
	}
	doc, err := WorkspaceDocument(contacts, leads)
	if err != nil {
		return nil, fmt.Errorf("render the OpenAPI document of workspace %s: %w", opaqueid.Format(opaqueid.Workspace, ws), err)
	}
	o.mu.Lock()
	if o.rendered == nil || len(o.rendered) >= maxCachedDocuments {
		o.rendered = map[string][]byte{}
	}
	o.rendered[tag] = doc
	o.mu.Unlock()
	return doc, nil
}

// documentTag is the ETag of the document of these definitions: a digest
// of the public document and of every definition's member that the
// document shows.
func documentTag(contacts, leads []customfield.Definition) string {
	type shown struct {
		Object      customfield.Object   `json:"o"`
		Key         string               `json:"k"`
		Label       string               `json:"l"`
		Type        customfield.Type     `json:"t"`
		Options     []customfield.Option `json:"op"`
		Required    bool                 `json:"r"`
		Description string               `json:"d"`
	}
	all := make([]shown, 0, len(contacts)+len(leads))
	for _, d := range append(append([]customfield.Definition{}, contacts...), leads...) {
		all = append(all, shown{d.Object, d.Key, d.Label, d.Type, d.Options, d.Required, d.Description})
	}
	b, _ := json.Marshal(all) // plain strings and bools: always encodes
	h := sha256.New()
	h.Write(publicSum[:])
	h.Write(b)
	return `"` + hex.EncodeToString(h.Sum(nil)[:16]) + `"`
}

// WorkspaceDocument is the public OpenAPI document with the customFields
// of contacts and leads typed by the given live definitions (oldest
// first, as [customfield.Live] reads them): each key a property with its
// JSON Schema, no other key allowed, the required ones required in the
// create inputs; and the lists' customFields.<key> filters listed per
// key.
func WorkspaceDocument(contacts, leads []customfield.Definition) ([]byte, error) {
	var doc map[string]any
	if err := json.Unmarshal(openapi.JSON, &doc); err != nil {
		return nil, fmt.Errorf("read the public document: %w", err)
	}
	defs := map[customfield.Object][]customfield.Definition{customfield.Contact: contacts, customfield.Lead: leads}
	schemas, _ := dig(doc, "components", "schemas")
	for _, ts := range typedSchemas {
		s, ok := dig(schemas, ts.schema)
		if !ok {
			return nil, fmt.Errorf("the public document has no schema %s", ts.schema)
		}
		if err := typeCustomFields(s, defs[ts.object], ts.mode); err != nil {
			return nil, fmt.Errorf("schema %s: %w", ts.schema, err)
		}
	}
	for _, l := range filteredLists {
		op, ok := dig(doc, "paths", l.path, "get")
		if !ok {
			return nil, fmt.Errorf("the public document has no GET %s", l.path)
		}
		params, _ := op["parameters"].([]any)
		op["parameters"] = append(params, filterParams(defs[l.object])...)
	}
	pruneSchemas(doc)
	// Written as cmd/openapigen writes the public one: indented, with
	// "<" and "&" as themselves.
	var out bytes.Buffer
	enc := json.NewEncoder(&out)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(doc); err != nil {
		return nil, fmt.Errorf("encode the document: %w", err)
	}
	return out.Bytes(), nil
}

// typeCustomFields replaces the customFields member of the object schema
// s by one that lists defs.
func typeCustomFields(s map[string]any, defs []customfield.Definition, mode schemaMode) error {
	cf, ok := dig(s, "properties", "customFields")
	if !ok {
		return fmt.Errorf("no member customFields")
	}
	props := make(map[string]any, len(defs))
	var required []any
	for _, d := range defs {
		nullable := mode == patchSchema || (mode == createSchema && !d.Required)
		props[d.Key] = d.Schema(nullable)
		if mode == createSchema && d.Required {
			required = append(required, d.Key)
		}
	}
	delete(cf, "additionalProperties")
	cf["properties"] = props
	cf["additionalProperties"] = false
	if len(required) > 0 {
		cf["required"] = required
		// A create without the object lacks the required fields too: the
		// object is then required, and null is not "no value" any more.
		cf["type"] = "object"
		req, _ := s["required"].([]any)
		s["required"] = append(req, "customFields")
	}
	return nil
}

// filterParams are the query parameters of defs' filters: the equality
// filter of every field, and .gte and .lte of the ordered ones.
func filterParams(defs []customfield.Definition) []any {
	var out []any
	for _, d := range defs {
		name := customfield.FilterParam + "." + d.Key
		eq := "Only the records whose " + d.Key + " (" + d.Label + ") equals this value."
		if d.Type == customfield.MultiSelect {
			eq = "Only the records whose " + d.Key + " (" + d.Label + ") holds this option."
		}
		out = append(out, map[string]any{"name": name, "in": "query", "description": eq, "schema": d.ParamSchema()})
		if d.Type.Ordered() {
			out = append(out,
				map[string]any{"name": name + ".gte", "in": "query", "description": "Only the records whose " + d.Key + " is at least this value.", "schema": d.ParamSchema()},
				map[string]any{"name": name + ".lte", "in": "query", "description": "Only the records whose " + d.Key + " is at most this value.", "schema": d.ParamSchema()})
		}
	}
	return out
}

// pruneSchemas drops the component schemas nothing refers to any more
// (google.protobuf.Value, once every customFields is typed), as
// cmd/openapigen does for the public document: Redocly's
// no-unused-components.
func pruneSchemas(doc map[string]any) {
	schemas, _ := dig(doc, "components", "schemas")
	for {
		used := map[string]bool{}
		var walk func(v any)
		walk = func(v any) {
			switch v := v.(type) {
			case map[string]any:
				if r, ok := v["$ref"].(string); ok {
					used[r] = true
				}
				for _, x := range v {
					walk(x)
				}
			case []any:
				for _, x := range v {
					walk(x)
				}
			}
		}
		walk(doc)
		dropped := false
		for name := range schemas {
			if !used["#/components/schemas/"+name] {
				delete(schemas, name)
				dropped = true
			}
		}
		if !dropped {
			return
		}
	}
}

// dig follows the object members path from m.
func dig(m map[string]any, path ...string) (map[string]any, bool) {
	for _, p := range path {
		next, ok := m[p].(map[string]any)
		if !ok {
			return nil, false
		}
		m = next
	}
	return m, true
}
