package server_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/pb33f/libopenapi/datamodel"
	"github.com/santhosh-tekuri/jsonschema/v6"
	"google.golang.org/genproto/googleapis/api/annotations"
	"google.golang.org/protobuf/proto"

	"github.com/svat/partnerapi/internal/auth"
	"github.com/svat/partnerapi/internal/scope"
	"github.com/svat/partnerapi/internal/server"
	"github.com/svat/partnerapi/internal/servertest"
)

const docURL = "https://partner-api.test/openapi.json"

// contract is the OpenAPI document served by the server, with a JSON
// Schema 2020-12 compiler that resolves references into it.
type contract struct {
	t        *testing.T
	doc      map[string]any
	compiler *jsonschema.Compiler
	schemas  map[string]*jsonschema.Schema
	checked  map[string]bool // "METHOD route status" seen
}

func loadContract(t *testing.T, h *servertest.Harness) *contract {
	t.Helper()
	status, hdr, body := h.Do(http.MethodGet, "/openapi.json", "", "", "")
	if status != 200 || hdr.Get("Content-Type") != "application/json" {
		t.Fatalf("GET /openapi.json without a token: %d %q", status, hdr.Get("Content-Type"))
	}
	var doc map[string]any
	mustUnmarshal(t, body, &doc)
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.AssertFormat()
	if err := c.AddResource(docURL, inst); err != nil {
		t.Fatal(err)
	}
	return &contract{t: t, doc: doc, compiler: c, schemas: map[string]*jsonschema.Schema{}, checked: map[string]bool{}}
}

// TestOpenAPIDocumentIsValid: /openapi.json is a valid OpenAPI 3.1
// document whose schemas are valid JSON Schema 2020-12, and it states the
// contract: the form body and the oauth2 client-credentials scheme with
// every scope, the scope of each operation as the interceptor enforces
// it, only the public services.
func TestOpenAPIDocumentIsValid(t *testing.T) {
	t.Parallel()
	h := servertest.New(t)
	c := loadContract(t, h)

	// The document against the OpenAPI 3.1 schema.
	meta := jsonschema.NewCompiler()
	oas, err := jsonschema.UnmarshalJSON(strings.NewReader(datamodel.OpenAPI31SchemaData))
	if err != nil {
		t.Fatal(err)
	}
	const oasURL = "https://spec.openapis.org/oas/3.1/schema/2022-10-07"
	if err := meta.AddResource(oasURL, oas); err != nil {
		t.Fatal(err)
	}
	sch, err := meta.Compile(oasURL)
	if err != nil {
		t.Fatalf("compile the OpenAPI 3.1 schema: %v", err)
	}
	if err := sch.Validate(toInstance(t, c.doc)); err != nil {
		t.Fatalf("/openapi.json is not a valid OpenAPI 3.1 document: %v", err)
	}
	if c.doc["openapi"] != "3.1.0" {
		t.Errorf("openapi = %v", c.doc["openapi"])
	}
	// Every component schema is a valid JSON Schema 2020-12 schema.
	for name := range obj(t, c.doc, "components", "schemas") {
		if _, err := c.compiler.Compile(docURL + "#/components/schemas/" + escape(name)); err != nil {
			t.Errorf("schema %s: %v", name, err)
		}
	}

	// The oauth2 client-credentials scheme, with every known scope.
	flow := obj(t, c.doc, "components", "securitySchemes", "oauth2", "flows", "clientCredentials")
	if flow["tokenUrl"] != "/api/oauth/token" {
		t.Errorf("tokenUrl = %v", flow["tokenUrl"])
	}
	var scopes []string
	for s := range flow["scopes"].(map[string]any) {
		scopes = append(scopes, s)
	}
	slices.Sort(scopes)
	want := scope.Names()
	slices.Sort(want)
	if !slices.Equal(scopes, want) {
		t.Errorf("scopes = %v, want %v", scopes, want)
	}

	// The token endpoints take form and JSON bodies.
	for _, p := range []string{"/api/oauth/token", "/api/oauth/revoke"} {
		content := obj(t, c.doc, "paths", p, "post", "requestBody", "content")
		if content["application/x-www-form-urlencoded"] == nil || content["application/json"] == nil {
			t.Errorf("%s body types: %v", p, keys(content))
		}
	}

	// Each operation's security is what the bearer interceptor enforces,
	// read independently from the same method options.
	reqs, err := auth.Requirements(server.PublicServices...)
	if err != nil {
		t.Fatal(err)
	}
	ops := 0
	for path, item := range obj(t, c.doc, "paths") {
		if strings.HasPrefix(path, "/admin") {
			t.Errorf("admin path %s in the public document", path)
		}
		for method, o := range item.(map[string]any) {
			op := o.(map[string]any)
			ops++
			proc, _ := op["x-rpc-procedure"].(string)
			if strings.Contains(proc, "AdminService") {
				t.Errorf("%s %s is an admin operation", method, path)
			}
			sec, _ := json.Marshal(op["security"])
			need, protected := reqs[proc]
			switch {
			case strings.HasPrefix(path, "/api/oauth/"):
				if string(sec) != `[{"clientSecretBasic":[]},{}]` {
					t.Errorf("%s %s security = %s", method, path, sec)
				}
			case !protected:
				t.Errorf("%s %s (%s) is not protected by a token", method, path, proc)
			case need.Name == "":
				if string(sec) != `[{"oauth2":[]}]` {
					t.Errorf("%s %s security = %s, want any token", method, path, sec)
				}
			default:
				if string(sec) != `[{"oauth2":["`+need.Name+`"]}]` {
					t.Errorf("%s %s security = %s, want %s", method, path, sec, need.Name)
				}
			}
			if _, ok := op["responses"].(map[string]any)["default"]; !ok {
				t.Errorf("%s %s has no default response", method, path)
			}
		}
	}
	if want := countHTTPRules(); ops != want {
		t.Errorf("the document has %d operations, the public services %d REST routes", ops, want)
	}
	// The creates answer 201, as the gateway does.
	for _, p := range []string{"/api/v1/contacts", "/api/v1/leads"} {
		if obj(t, c.doc, "paths", p, "post", "responses")["201"] == nil {
			t.Errorf("POST %s does not document 201", p)
		}
	}
}

// TestOpenAPIResponsesConform runs conformance-style flows and validates
// every response (status, content type, body and headers) against the
// document's schema for that status and content type.
func TestOpenAPIResponsesConform(t *testing.T) {
	t.Parallel()
	h := servertest.New(t)
	c := loadContract(t, h)
	ws, m := h.Workspace("Contract Co")
	id, sec := h.Client(ws, m, "contacts:read", "contacts:write", "leads:read", "leads:write")
	readOnlyID, readOnlySec := h.Client(ws, m, "contacts:read")

	do := func(method, route, target, token, contentType, body string, basic []string, headers ...string) (int, []byte) {
		t.Helper()
		req, err := http.NewRequest(method, h.Public.URL+target, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		if basic != nil {
			req.SetBasicAuth(url.QueryEscape(basic[0]), url.QueryEscape(basic[1]))
		}
		if contentType != "" {
			req.Header.Set("Content-Type", contentType)
		}
		for i := 0; i+1 < len(headers); i += 2 {
			req.Header.Set(headers[i], headers[i+1])
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		c.check(method, route, res.StatusCode, res.Header, b)
		return res.StatusCode, b
	}
	form := "application/x-www-form-urlencoded"
	token := func(scope string, basic []string) string {
		t.Helper()
		v := url.Values{"grant_type": {"client_credentials"}}
		if scope != "" {
			v.Set("scope", scope)
		}
		status, b := do("POST", "/api/oauth/token", "/api/oauth/token", "", form, v.Encode(), basic)
		if status != 200 {
			t.Fatalf("token: %d %s", status, b)
		}
		var tok struct {
			AccessToken string `json:"access_token"`
		}
		mustUnmarshal(t, b, &tok)
		return tok.AccessToken
	}

	// Token success: form with Basic, JSON with the credentials in the body.
	tok := token("", []string{id, sec})
	readOnly := token("contacts:read", []string{readOnlyID, readOnlySec})
	jsonBody, _ := json.Marshal(map[string]string{"grant_type": "client_credentials", "client_id": id, "client_secret": sec})
	expect(t, 200)(do("POST", "/api/oauth/token", "/api/oauth/token", "", "application/json", string(jsonBody), nil))
	// Token failures: wrong secret (401), bad grant (400), bad scope (400).
	expect(t, 401)(do("POST", "/api/oauth/token", "/api/oauth/token", "", form, "grant_type=client_credentials", []string{id, "wrong"}))
	expect(t, 400)(do("POST", "/api/oauth/token", "/api/oauth/token", "", form, "grant_type=password", []string{id, sec}))
	expect(t, 400)(do("POST", "/api/oauth/token", "/api/oauth/token", "", form, "grant_type=client_credentials&scope=admin", []string{id, sec}))
	// Revocation of an unknown token.
	expect(t, 200)(do("POST", "/api/oauth/revoke", "/api/oauth/revoke", "", form, "token=svat_unknown", []string{id, sec}))

	// /me, with a token, without one, with a bad one.
	expect(t, 200)(do("GET", "/api/v1/me", "/api/v1/me", tok, "", "", nil))
	expect(t, 401)(do("GET", "/api/v1/me", "/api/v1/me", "", "", "", nil))
	expect(t, 401)(do("GET", "/api/v1/me", "/api/v1/me", "svat_not-a-token", "", "", nil))

	// Creates (201), validation (422), duplicate (409), insufficient scope
	// (403), malformed (400), wrong media type (415), with Idempotency-Key.
	expect(t, 201)(do("POST", "/api/v1/contacts", "/api/v1/contacts", tok, "application/json",
		`{"email":"ada@example.com","firstName":"Ada","externalId":"crm-1"}`, nil, "Idempotency-Key", "k1"))
	expect(t, 201)(do("POST", "/api/v1/contacts", "/api/v1/contacts", tok, "application/json",
		`{"email":"ada@example.com","firstName":"Ada","externalId":"crm-1"}`, nil, "Idempotency-Key", "k1"))
	expect(t, 409)(do("POST", "/api/v1/contacts", "/api/v1/contacts", tok, "application/json", `{"email":"ADA@example.com"}`, nil))
	expect(t, 422)(do("POST", "/api/v1/contacts", "/api/v1/contacts", tok, "application/json", `{"email":"not-an-email","phone":"12"}`, nil))
	expect(t, 403)(do("POST", "/api/v1/contacts", "/api/v1/contacts", readOnly, "application/json", `{"email":"b@example.com"}`, nil))
	expect(t, 400)(do("POST", "/api/v1/contacts", "/api/v1/contacts", tok, "application/json", `{"email":`, nil))
	expect(t, 415)(do("POST", "/api/v1/contacts", "/api/v1/contacts", tok, "text/plain", `{}`, nil))
	expect(t, 201)(do("POST", "/api/v1/leads", "/api/v1/leads", tok, "application/json",
		`{"contact":{"email":"grace@example.com","firstName":"Grace"},"source":"web_form","value":{"amount":1000,"currency":"USD"}}`, nil))
	expect(t, 422)(do("POST", "/api/v1/leads", "/api/v1/leads", tok, "application/json", `{"status":"bogus"}`, nil))

	// Lists, a page and the last page, and a bad limit.
	_, b := do("GET", "/api/v1/contacts", "/api/v1/contacts?limit=1", tok, "", "", nil)
	var page struct {
		Pagination struct {
			NextCursor string `json:"nextCursor"`
		} `json:"pagination"`
	}
	mustUnmarshal(t, b, &page)
	expect(t, 200)(do("GET", "/api/v1/contacts", "/api/v1/contacts?limit=1&cursor="+url.QueryEscape(page.Pagination.NextCursor), tok, "", "", nil))
	expect(t, 200)(do("GET", "/api/v1/leads", "/api/v1/leads?sort=-updatedAt&source=web_form", tok, "", "", nil))
	expect(t, 400)(do("GET", "/api/v1/leads", "/api/v1/leads?limit=101", tok, "", "", nil))
	expect(t, 403)(do("GET", "/api/v1/leads", "/api/v1/leads", readOnly, "", "", nil))

	// 429: a burst past the read bucket, and failed authentications past
	// the client id's budget, answered by the real rate limiter.
	got429 := false
	for range 400 {
		if status, _ := do("GET", "/api/v1/me", "/api/v1/me", tok, "", "", nil); status == 429 {
			got429 = true
			break
		}
	}
	if !got429 {
		t.Error("400 reads in a burst were never answered 429")
	}
	for range 15 {
		if status, _ := do("POST", "/api/oauth/token", "/api/oauth/token", "", form, "grant_type=client_credentials", []string{readOnlyID, "wrong"}); status == 429 {
			break
		}
	}

	for _, want := range []string{"POST /api/oauth/token 200", "POST /api/oauth/token 401", "POST /api/oauth/token 400",
		"GET /api/v1/me 200", "GET /api/v1/me 401", "GET /api/v1/contacts 200", "POST /api/v1/contacts 201",
		"POST /api/v1/contacts 422", "POST /api/v1/contacts 403", "GET /api/v1/me 429", "POST /api/oauth/token 429"} {
		if !c.checked[want] {
			t.Errorf("no response %s was checked", want)
		}
	}
}

func expect(t *testing.T, want int) func(int, []byte) {
	return func(got int, body []byte) {
		t.Helper()
		if got != want {
			t.Errorf("status %d, want %d: %s", got, want, body)
		}
	}
}

// check validates one response against the document: the status (or
// default) must be documented, the content type must be one of its
// media types, the body must match that media type's schema, required
// headers must be present and every documented header must match its
// schema.
func (c *contract) check(method, route string, status int, hdr http.Header, body []byte) {
	t := c.t
	t.Helper()
	c.checked[fmt.Sprintf("%s %s %d", method, route, status)] = true
	opPtr := "/paths/" + escape(route) + "/" + strings.ToLower(method)
	responses := c.at(opPtr + "/responses")
	if responses == nil {
		t.Errorf("%s %s is not in the document", method, route)
		return
	}
	resPtr := opPtr + "/responses/" + strconv.Itoa(status)
	if responses[strconv.Itoa(status)] == nil {
		resPtr = opPtr + "/responses/default"
	}
	resPtr = c.deref(resPtr)
	res := c.at(resPtr)
	where := fmt.Sprintf("%s %s %d", method, route, status)
	mt, _, err := mime.ParseMediaType(hdr.Get("Content-Type"))
	if err != nil {
		t.Errorf("%s: bad Content-Type %q", where, hdr.Get("Content-Type"))
		return
	}
	content, _ := res["content"].(map[string]any)
	if content[mt] == nil {
		t.Errorf("%s: Content-Type %s is not documented (%v)", where, mt, keys(content))
		return
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(body))
	if err != nil {
		t.Errorf("%s: body is not JSON: %s", where, body)
		return
	}
	if err := c.schema(resPtr + "/content/" + escape(mt) + "/schema").Validate(inst); err != nil {
		t.Errorf("%s: body does not match the document: %v\n%s", where, err, body)
	}
	headers, _ := res["headers"].(map[string]any)
	for name := range headers {
		hPtr := c.deref(resPtr + "/headers/" + escape(name))
		h := c.at(hPtr)
		v := hdr.Get(name)
		if v == "" {
			if h["required"] == true {
				t.Errorf("%s: required header %s is missing", where, name)
			}
			continue
		}
		var hv any = v
		if typ, _ := c.at(hPtr + "/schema")["type"].(string); typ == "integer" {
			n, err := strconv.Atoi(v)
			if err != nil {
				t.Errorf("%s: header %s = %q, want an integer", where, name, v)
				continue
			}
			hv = n
		}
		if err := c.schema(hPtr + "/schema").Validate(hv); err != nil {
			t.Errorf("%s: header %s = %q: %v", where, name, v, err)
		}
	}
}

// deref follows a $ref at ptr (one level, as the document uses them).
func (c *contract) deref(ptr string) string {
	if r, ok := c.at(ptr)["$ref"].(string); ok {
		return strings.TrimPrefix(r, "#")
	}
	return ptr
}

// at returns the object at a JSON pointer of the document, or nil.
func (c *contract) at(ptr string) map[string]any {
	var cur any = c.doc
	for _, tok := range strings.Split(strings.TrimPrefix(ptr, "/"), "/") {
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		m, ok := cur.(map[string]any)
		if !ok {
			return nil
		}
		cur = m[tok]
	}
	m, _ := cur.(map[string]any)
	return m
}

func (c *contract) schema(ptr string) *jsonschema.Schema {
	c.t.Helper()
	if s, ok := c.schemas[ptr]; ok {
		return s
	}
	s, err := c.compiler.Compile(docURL + "#" + ptr)
	if err != nil {
		c.t.Fatalf("compile %s: %v", ptr, err)
	}
	c.schemas[ptr] = s
	return s
}

func escape(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}

func obj(t *testing.T, m map[string]any, path ...string) map[string]any {
	t.Helper()
	cur := m
	for _, p := range path {
		next, ok := cur[p].(map[string]any)
		if !ok {
			t.Fatalf("document has no %v", path)
		}
		cur = next
	}
	return cur
}

func keys(m map[string]any) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

func toInstance(t *testing.T, v any) any {
	t.Helper()
	b, _ := json.Marshal(v)
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	return inst
}

// countHTTPRules counts the REST routes of the public services.
func countHTTPRules() int {
	n := 0
	for _, svc := range server.PublicServices {
		for i := range svc.Methods().Len() {
			if proto.HasExtension(svc.Methods().Get(i).Options(), annotations.E_Http) {
				n++
			}
		}
	}
	return n
}
