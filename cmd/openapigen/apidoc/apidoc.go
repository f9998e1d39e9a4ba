// Package apidoc completes the OpenAPI 3.1 document of the REST surface.
//
// protoc-gen-connect-openapi (run by `make generate`, starting from
// base.yaml) writes the paths, parameters, bodies and schemas of the public
// services from their google.api.http annotations. It cannot know the rest
// of the contract, which lives in our own method options and tables:
//
//   - the success status of each route (partner.rest.v1.rest, 201 for
//     creates), as the REST gateway answers it;
//   - the scope each operation needs (partner.auth.v1.access), as the
//     bearer interceptor enforces it, and every known scope in the oauth2
//     client-credentials scheme (internal/security/scope);
//   - the error answers: RFC 6749 JSON on /api/oauth, problem+json on
//     /api/v1, with the headers that come with them;
//   - form bodies on the token endpoints, the pagination bounds
//     (internal/records/listing), Idempotency-Key, If-Match, Request-Id, ETag and
//     the RateLimit headers;
//   - what each direction carries: the generator types every proto3
//     optional field nullable, but answers never carry null (an unset
//     member is left out), so answer schemas are not nullable and list
//     as required what every answer carries, while requests (which may
//     send null for "not sent") get "…Input" copies; read-only members
//     are marked readOnly;
//   - servers, and no component that nothing uses (the RPC request and
//     response messages a REST route does not exchange whole), so that
//     Redocly's recommended rules pass (make test-openapi).
//
// [Complete] adds them, reading every operation's facts from its method
// descriptor, so an RPC added to a public service is documented after a
// regenerate without a change here.
package apidoc

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	authv1 "github.com/svat/partnerapi/gen/partner/auth/v1"
	leadv1 "github.com/svat/partnerapi/gen/partner/lead/v1"
	"github.com/svat/partnerapi/internal/contract/routes"
	"github.com/svat/partnerapi/internal/records/listing"
	"github.com/svat/partnerapi/internal/records/validate"
	"github.com/svat/partnerapi/internal/security/eventtype"
	"github.com/svat/partnerapi/internal/security/scope"
)

type obj = map[string]any

// Operation is what the document says about one RPC's REST route.
type Operation struct {
	Method      string // HTTP method, e.g. "POST"
	Path        string // route template, e.g. "/api/v1/contacts/{id}"
	Procedure   string // "/partner.contact.v1.ContactService/CreateContact"
	OperationID string // "partner.contact.v1.ContactService.CreateContact"
	// Success is the status of a successful answer.
	Success int
	// Protected is set when a bearer token is needed; Scope is then the
	// scope it must carry ("" for any valid token), and AnyOf the scopes
	// of which it must carry one (none when empty).
	Protected bool
	Scope     string
	AnyOf     []string
	// HasBody is set when the route takes a request body.
	HasBody bool
	// SingleRecord is set when the answer is one record (a route with a
	// path parameter or a response_body), which carries an ETag.
	SingleRecord bool
	// MergePatch is set for an AIP-134 update over PATCH (its request has
	// a google.protobuf.FieldMask update_mask and a message body): the
	// REST gateway takes its body as a JSON merge patch (RFC 7396) and
	// derives the mask from it, so no query parameter is accepted.
	MergePatch bool
}

// OAuth reports whether the operation is one of the /api/oauth endpoints,
// whose errors are RFC 6749 JSON.
func (o Operation) OAuth() bool { return strings.HasPrefix(o.Path, "/api/oauth/") }

// Operations reads the REST operations of services: their routes
// (internal/contract/routes, which reads google.api.http and
// partner.rest.v1.rest) and partner.auth.v1.access.
func Operations(services ...protoreflect.ServiceDescriptor) []Operation {
	var out []Operation
	for _, r := range routes.Of(services...) {
		op := Operation{
			Method: r.Method, Path: r.Template, Procedure: r.Procedure,
			OperationID:  string(r.RPC.FullName()),
			Success:      r.Success,
			HasBody:      r.Body != "",
			SingleRecord: strings.Contains(r.Template, "{") || r.ResponseBody != "",
			MergePatch:   r.MergePatch() != nil,
		}
		if proto.HasExtension(r.RPC.Options(), authv1.E_Access) {
			op.Protected = true
			access := proto.GetExtension(r.RPC.Options(), authv1.E_Access).(*authv1.Access)
			op.Scope, op.AnyOf = access.GetScope(), access.GetAnyOf()
		}
		out = append(out, op)
	}
	return out
}

// ErrorStatuses are the error statuses an operation can answer besides
// the catch-all "default". The rules follow the REST gateway, the bearer
// interceptor and the error table (internal/contract/apierror):
//
//   - every route: 400 (malformed input), 429 (rate limited), 500, 503;
//   - /api/oauth: 401 (client authentication failed), 413 (over 1 MiB),
//     415 (a Content-Encoding other than gzip);
//   - /api/v1: 401 (no or bad token), 403 when a scope is needed;
//   - a route with a path parameter: 404;
//   - a route with a body: 409 (duplicate, Idempotency-Key in flight),
//     413 (over 1 MiB), 415 (not JSON), 422 (validation, Idempotency-Key
//     reused); PATCH and PUT also 412 (If-Match);
//   - DELETE: 409 (contact_has_leads) and 412 (If-Match);
//   - the events feed: 403 (a type the token cannot read) and 410 (a
//     cursor older than the retention, or from before a failover);
//   - the contact and lead lists: 410 (a sync cursor from before a
//     failover).
//
// eventsPath is the feed's route, whose cursors expire.
const eventsPath = "/api/v1/events"

func (o Operation) ErrorStatuses() []int {
	s := []int{http.StatusBadRequest, http.StatusTooManyRequests, http.StatusInternalServerError, http.StatusServiceUnavailable}
	if o.OAuth() {
		s = append(s, http.StatusUnauthorized, http.StatusRequestEntityTooLarge, http.StatusUnsupportedMediaType)
	} else {
		if o.Protected {
			s = append(s, http.StatusUnauthorized)
			if o.Scope != "" || len(o.AnyOf) > 0 {
				s = append(s, http.StatusForbidden)
			}
		}
		if strings.Contains(o.Path, "{") {
			s = append(s, http.StatusNotFound)
		}
		if o.HasBody {
			s = append(s, http.StatusConflict, http.StatusRequestEntityTooLarge, http.StatusUnsupportedMediaType, http.StatusUnprocessableEntity)
		}
		switch o.Method {
		case http.MethodPatch, http.MethodPut:
			s = append(s, http.StatusPreconditionFailed)
		case http.MethodDelete:
			// 409 contact_has_leads; 412 If-Match.
			s = append(s, http.StatusConflict, http.StatusPreconditionFailed)
		}
		if o.Path == eventsPath {
			// 403 for a type the token cannot read; 410 cursor_expired.
			s = append(s, http.StatusForbidden, http.StatusGone)
		}
		if strings.HasSuffix(o.Path, "/replay") {
			// 410 cursor_expired: fromCursor older than the retention, or
			// from before a failover.
			s = append(s, http.StatusGone)
		}
		if o.Method == http.MethodGet && (o.Path == "/api/v1/contacts" || o.Path == "/api/v1/leads") {
			// 410 cursor_expired: a sync cursor from before a failover.
			s = append(s, http.StatusGone)
		}
	}
	slices.Sort(s)
	return s
}

// Complete turns the generator's document (raw, JSON) into the contract:
// it checks that raw describes exactly the operations of services, and
// adds what the descriptors and tables say. The output is indented JSON
// with sorted keys, stable across runs.
func Complete(raw []byte, services ...protoreflect.ServiceDescriptor) ([]byte, error) {
	var doc obj
	if err := json.Unmarshal(raw, &doc); err != nil {
		return nil, fmt.Errorf("parse generated document: %w", err)
	}
	ops := Operations(services...)
	paths, _ := doc["paths"].(obj)
	if err := checkCoverage(paths, ops); err != nil {
		return nil, err
	}
	components := child(doc, "components")
	completeSecuritySchemes(components)
	schemas := child(components, "schemas")
	enumerate(schemas)
	usedStatuses := map[string]bool{}
	for _, op := range ops {
		o := paths[op.Path].(obj)[strings.ToLower(op.Method)].(obj)
		completeOperation(o, op, schemas)
		for _, st := range op.ErrorStatuses() {
			usedStatuses[responseName(op, st)] = true
		}
		usedStatuses[responseName(op, 0)] = true
	}
	responses := child(components, "responses")
	for name := range usedStatuses {
		responses[name] = errorResponse(name)
	}
	splitRequestsAndAnswers(paths, ops, schemas)
	tidySchemas(schemas)
	tidyDescriptions(doc)
	pruneComponents(doc)
	doc["servers"] = servers()
	var out bytes.Buffer
	enc := json.NewEncoder(&out)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(doc); err != nil {
		return nil, fmt.Errorf("encode document: %w", err)
	}
	return out.Bytes(), nil
}

// checkCoverage makes sure the generator saw exactly the public
// operations: an admin route in the document, or a public one missing,
// is an error of the generation setup (buf.gen.yaml), not something to
// paper over.
func checkCoverage(paths obj, ops []Operation) error {
	want := map[string]bool{}
	for _, op := range ops {
		key := op.Method + " " + op.Path
		want[key] = true
		o, _ := paths[op.Path].(obj)
		if o == nil || o[strings.ToLower(op.Method)] == nil {
			return fmt.Errorf("the generated document lacks %s (%s)", key, op.OperationID)
		}
	}
	for path, v := range paths {
		for method := range v.(obj) {
			if !isHTTPMethod(method) {
				continue
			}
			if key := strings.ToUpper(method) + " " + path; !want[key] {
				return fmt.Errorf("the generated document has %s, which is not an operation of a public service", key)
			}
		}
	}
	return nil
}

func isHTTPMethod(s string) bool {
	switch s {
	case "get", "put", "post", "delete", "options", "head", "patch", "trace":
		return true
	}
	return false
}

// completeSecuritySchemes lists every known scope in the oauth2 scheme.
func completeSecuritySchemes(components obj) {
	flow := child(child(child(child(components, "securitySchemes"), "oauth2"), "flows"), "clientCredentials")
	scopes := obj{}
	for _, name := range scope.Names() {
		scopes[name] = scopeDescription(name)
	}
	flow["scopes"] = scopes
}

// scopeDescription describes a "resource:action" scope.
func scopeDescription(name string) string {
	resource, action, _ := strings.Cut(name, ":")
	switch action {
	case "read":
		return "Read " + resource + "."
	case "write":
		return "Create and change " + resource + "."
	}
	return name
}

func completeOperation(o obj, op Operation, schemas obj) {
	// Tags by service short name read better in viewers than full names.
	if svc, _, ok := strings.Cut(strings.TrimPrefix(op.Procedure, "/"), "/"); ok {
		o["tags"] = []any{svc[strings.LastIndex(svc, ".")+1:]}
	}
	o["x-rpc-procedure"] = op.Procedure

	// Security.
	switch {
	case op.OAuth():
		o["security"] = []any{obj{"clientSecretBasic": []any{}}, obj{}}
	case op.Protected && len(op.AnyOf) > 0:
		// Security requirements in a list are alternatives (OpenAPI 3.1
		// §4.8.10): one per scope of any_of.
		alts := make([]any, 0, len(op.AnyOf))
		for _, name := range op.AnyOf {
			scopes := []any{name}
			if op.Scope != "" {
				scopes = append([]any{op.Scope}, scopes...)
			}
			alts = append(alts, obj{"oauth2": scopes})
		}
		o["security"] = alts
		o["description"] = strings.TrimSpace(str(o["description"]) + "\n\nNeeds one of the scopes `" + strings.Join(op.AnyOf, "`, `") + "`.")
	case op.Protected:
		scopes := []any{}
		if op.Scope != "" {
			scopes = append(scopes, op.Scope)
		}
		o["security"] = []any{obj{"oauth2": scopes}}
		if op.Scope != "" {
			o["description"] = strings.TrimSpace(str(o["description"]) + "\n\nNeeds the scope `" + op.Scope + "`.")
		} else {
			o["description"] = strings.TrimSpace(str(o["description"]) + "\n\nNeeds a valid access token; no particular scope.")
		}
	default:
		o["security"] = []any{}
	}

	// Parameters. The gateway refuses a query string on anything but a
	// GET (a merge patch's update_mask comes from its body), so the
	// generator's query parameters of other methods are not the contract.
	params, _ := o["parameters"].([]any)
	if op.Method != http.MethodGet && op.Method != http.MethodDelete {
		params = slices.DeleteFunc(params, func(p any) bool { return str(p.(obj)["in"]) == "query" })
	}
	params = append(params, ref("parameters", "Request-Id"))
	if op.HasBody && !op.OAuth() && op.Method == http.MethodPost {
		params = append(params, ref("parameters", "Idempotency-Key"))
	}
	switch {
	case op.Method == http.MethodPatch || op.Method == http.MethodPut || op.Method == http.MethodDelete:
		params = append(params, ref("parameters", "If-Match"))
	case op.Method == http.MethodGet && op.SingleRecord && strings.Contains(op.Path, "{"):
		params = append(params, ref("parameters", "If-None-Match"))
	}
	pagination(params)
	params, custom := filters(params)
	if custom {
		o["description"] = strings.TrimSpace(str(o["description"]) + "\n\n" + customFilterDoc)
	}
	o["parameters"] = params

	// Request body: the token endpoints take a form too.
	if body, ok := o["requestBody"].(obj); ok {
		body["required"] = true
		content := child(body, "content")
		if op.OAuth() {
			if js, ok := content["application/json"].(obj); ok {
				ignoreUnknownParams(schemas, js["schema"])
				content["application/x-www-form-urlencoded"] = obj{"schema": js["schema"]}
			}
		}
		if op.MergePatch {
			if js, ok := content["application/json"].(obj); ok {
				patch := obj{"schema": mergePatchSchema(schemas, js["schema"])}
				content["application/json"], content["application/merge-patch+json"] = patch, patch
				body["description"] = "A JSON merge patch (RFC 7396), as application/merge-patch+json or application/json: " +
					"a member that is sent is set, null clears it (an optional field) or restores its default, an absent member is kept. " +
					"Read-only members (the id and the timestamps) are refused with 400."
			}
		}
	}

	// Responses: the success status, then the errors.
	responses := child(o, "responses")
	success, _ := responses["200"].(obj)
	delete(responses, "200")
	if success == nil {
		success = obj{}
	}
	success["description"] = http.StatusText(op.Success)
	// Every success answer may be gzipped (over 8 KiB, to a client that
	// accepts it), so each says Vary: Accept-Encoding.
	headers := obj{"Request-Id": ref("headers", "Request-Id"), "Vary": ref("headers", "Vary")}
	if op.OAuth() {
		headers["Cache-Control"] = ref("headers", "Cache-Control")
		headers["Pragma"] = ref("headers", "Pragma")
	}
	if op.OAuth() || op.Protected {
		headers["RateLimit-Policy"] = ref("headers", "RateLimit-Policy")
		headers["RateLimit"] = ref("headers", "RateLimit")
	}
	if op.SingleRecord && !op.OAuth() && op.Success != http.StatusNoContent {
		headers["ETag"] = ref("headers", "ETag")
	}
	if op.Success == http.StatusNoContent {
		delete(success, "content")
	}
	if op.Method == http.MethodGet && op.SingleRecord && strings.Contains(op.Path, "{") {
		responses["304"] = obj{
			"description": "Not Modified: If-None-Match names the record's current ETag.",
			"headers":     obj{"ETag": ref("headers", "ETag"), "Request-Id": ref("headers", "Request-Id")},
		}
	}
	if op.HasBody && !op.OAuth() && op.Method == http.MethodPost {
		headers["Idempotent-Replayed"] = ref("headers", "Idempotent-Replayed")
	}
	if op.Success == http.StatusCreated {
		headers["Location"] = ref("headers", "Location")
	}
	success["headers"] = headers
	responses[strconv.Itoa(op.Success)] = success
	for _, st := range op.ErrorStatuses() {
		responses[strconv.Itoa(st)] = ref("responses", responseName(op, st))
	}
	responses["default"] = ref("responses", responseName(op, 0))
}

// pagination bounds the limit parameter of list operations (those with
// both limit and cursor) by the listing package's constants.
func pagination(params []any) {
	var limit, cursor obj
	for _, p := range params {
		p, _ := p.(obj)
		if p["in"] != "query" {
			continue
		}
		switch p["name"] {
		case "limit":
			limit = p
		case "cursor":
			cursor = p
		}
	}
	if limit == nil || cursor == nil {
		return
	}
	s := child(limit, "schema")
	s["minimum"] = 1
	s["maximum"] = listing.MaxLimit
	s["default"] = listing.DefaultLimit
	limit["description"] = fmt.Sprintf("Page size from 1 to %d (default %d). Anything else is a 400, never a silent clamp.", listing.MaxLimit, listing.DefaultLimit)
	cursor["description"] = "The pagination.nextCursor of the previous page, or a stored pagination.syncCursor: opaque, and bound to the workspace, the sort and the filters (a changed one is a 400)."
}

// customFilterDoc describes a list's custom field filters, whose names
// depend on the workspace's fields: no fixed parameter can list them.
const customFilterDoc = "Custom field filters: `customFields.<key>=<value>` keeps the records whose field `<key>` " +
	"equals the value parsed as the field's type (a multiselect field: the records holding that option); " +
	"`customFields.<key>.gte=` and `customFields.<key>.lte=` bound number, date and datetime fields. " +
	"An unknown key, or a value that does not parse as the field's type, is a 400 naming the parameter. At most 20."

// filters states the values the list parameters take, as the listing
// package and the services parse them: the sort orders, RFC 3339 times,
// the lead statuses and the length of q. Anything else is a 400. The
// generator spells a map of custom field filters as two parameters,
// customFields.key and customFields.value; they are dropped, and custom
// reports it: the operation's description says what the filters are.
func filters(params []any) (out []any, custom bool) {
	out = slices.DeleteFunc(params, func(x any) bool {
		p, _ := x.(obj)
		if p["in"] == "query" && (p["name"] == "customFields.key" || p["name"] == "customFields.value") {
			custom = true
			return true
		}
		return false
	})
	for _, p := range out {
		p, _ := p.(obj)
		if p["in"] != "query" {
			continue
		}
		s := child(p, "schema")
		switch p["name"] {
		case "q":
			s["minLength"] = 2
			s["maxLength"] = 100
		case "sort":
			s["enum"] = strs(listing.Sorts)
			s["default"] = listing.Sorts[0]
		case "createdSince", "updatedSince":
			s["format"] = "date-time"
		case "status":
			s["enum"] = strs(leadStatuses)
		}
	}
	return out, custom
}

// enumerate gives the fields with a closed set of values their enum:
// the lead status (null, which a request may send for "the default",
// stays allowed where the type allows it).
func enumerate(schemas obj) {
	if e, ok := schemas["partner.event.v1.Event"].(obj); ok {
		props := child(e, "properties")
		child(props, "type")["enum"] = strs(eventtype.Names())
		// data is a google.protobuf.Struct in the proto, so that the
		// object is the record exactly as GET answers it; the document
		// says what it holds.
		desc := str(child(props, "data")["description"])
		props["data"] = obj{
			"type": "object", "additionalProperties": false, "required": []any{"object"},
			"description": desc,
			"properties": obj{
				"object": obj{
					"type": "object", "required": []any{"id"},
					"description": "The contact or lead as GET answers it after the change; only its id once the record is deleted.",
					"properties":  obj{"id": obj{"type": "string"}},
				},
				"changedFields": obj{
					"type": "array", "items": obj{"type": "string"},
					"description": "On updates only: the members the change set, lowerCamelCase.",
				},
			},
		}
	}
	if l, ok := schemas["partner.lead.v1.Lead"].(obj); ok {
		st := child(child(l, "properties"), "status")
		values := strs(leadStatuses)
		if t, ok := st["type"].([]any); ok && slices.Contains(t, any("null")) {
			values = append(values, nil)
		}
		st["enum"] = values
	}
}

// leadStatuses are the values of partner.lead.v1.LeadStatus as the API
// spells them (the handler's list is derived the same way).
var leadStatuses = validate.EnumValues(leadv1.LeadStatus_LEAD_STATUS_UNSPECIFIED.Descriptor())

func strs(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}

// answerRequired lists the members every answer carries, per schema:
// the server always sends them (a lead's title and status have defaults,
// a money amount of 0 is sent), so a client may rely on them. Optional
// fields that are not set are left out of answers. TestOpenAPIResponsesConform
// holds each answer to these lists.
var answerRequired = map[string][]string{
	"partner.contact.v1.Contact":                     {"id", "createdAt", "updatedAt"},
	"partner.lead.v1.Lead":                           {"id", "contactId", "title", "status", "createdAt", "updatedAt"},
	"partner.lead.v1.Money":                          {"amount", "currency"},
	"partner.contact.v1.ListContactsResponse":        {"contacts", "pagination"},
	"partner.lead.v1.ListLeadsResponse":              {"leads", "pagination"},
	"partner.contact.v1.BatchCreateContactsResponse": {"results"},
	"partner.lead.v1.BatchCreateLeadsResponse":       {"results"},
	"partner.problem.v1.Problem":                     {"type", "title", "status", "detail", "code", "requestId", "errors"},
	"partner.problem.v1.FieldViolation":              {"field", "code", "message"},
	"partner.identity.v1.GetMeResponse":              {"workspace", "app", "scopes", "tokenExpiresAt"},
	"partner.identity.v1.Workspace":                  {"id", "name"},
	"partner.identity.v1.App":                        {"clientId", "name"},
	"partner.token.v1.CreateTokenResponse":           {"access_token", "token_type", "expires_in", "scope"},
	// The events feed and the webhook endpoints, as their handlers build
	// every answer (a list is [] when empty, pagination always sent).
	"partner.event.v1.Event":                           {"id", "type", "createdAt", "cursor", "data"},
	"partner.event.v1.ListEventsResponse":              {"events", "pagination"},
	"partner.webhook.v1.WebhookEndpoint":               {"id", "url", "eventTypes", "status", "createdAt", "updatedAt"},
	"partner.webhook.v1.ListWebhookEndpointsResponse":  {"webhookEndpoints"},
	"partner.webhook.v1.WebhookDelivery":               {"eventId", "eventType", "attempt", "status", "durationMs", "at"},
	"partner.webhook.v1.ListWebhookDeliveriesResponse": {"deliveries", "pagination"},
}

// readOnly lists the members of a resource the server sets (product.md
// "Resources"): answers carry them, a create ignores them and a merge
// patch that names one is a 400 (the services' update rules), so they
// are marked readOnly and left out of the patch schema.
// TestOpenAPIReadOnlyMembers and TestOpenAPIWebhookEndpointReadOnlyMembers
// hold the server to this list.
var readOnly = map[string][]string{
	"partner.contact.v1.Contact":         {"id", "createdAt", "updatedAt"},
	"partner.lead.v1.Lead":               {"id", "createdAt", "updatedAt"},
	"partner.webhook.v1.WebhookEndpoint": {"id", "createdAt", "updatedAt", "secret", "disabledReason"},
	"partner.customfield.v1.CustomField": {"id", "createdAt", "updatedAt"},
}

// immutable lists the members a create sets and every answer carries but
// that never change: a merge patch naming one is refused (400), so the
// patch schema leaves them out. A custom field's object, key and type.
var immutable = map[string][]string{
	"partner.customfield.v1.CustomField": {"object", "key", "type"},
}

// createOnly lists the members a create takes that no answer carries and
// a merge patch refuses (400): a lead's inline contact, answered as its
// contactId. They are marked writeOnly in the request schema and left out
// of the answer and patch schemas.
var createOnly = map[string][]string{
	"partner.lead.v1.Lead": {"contact"},
}

// inputSuffix names the request variant of a schema that answers and
// requests share.
const inputSuffix = "Input"

// splitRequestsAndAnswers makes each schema say what one direction
// carries, as the JSON codec writes and reads it:
//
//   - Answers never carry null (protojson leaves an unset optional field
//     out), so no member of a schema an answer reaches is nullable: a
//     member the server may omit is optional, and the members of
//     answerRequired are required. Members of createOnly are dropped.
//   - Requests may send null for any member (protojson reads it as "not
//     sent"), and require no member (the field rules say which are
//     needed). A schema both share keeps its name for answers; requests
//     get a copy, "<name>Input", with their references rewritten likewise.
//
// The members of readOnly are marked so on both sides; those of
// createOnly are writeOnly in requests.
func splitRequestsAndAnswers(paths obj, ops []Operation, schemas obj) {
	var reqRoots, ansRoots []any
	for _, op := range ops {
		o := paths[op.Path].(obj)[strings.ToLower(op.Method)].(obj)
		if body, ok := o["requestBody"].(obj); ok {
			reqRoots = append(reqRoots, body)
		}
		for _, r := range o["responses"].(obj) {
			ansRoots = append(ansRoots, r)
		}
	}
	// What answers reach once the create-only members are gone (a lead's
	// LeadContact is a request schema only).
	answerView := deepCopy(schemas).(obj)
	for name, members := range createOnly {
		dropMembers(answerView[name], members)
	}
	inReq, inAns := reachable(schemas, reqRoots), reachable(answerView, ansRoots)

	// A shared schema needs a request variant when it has members (their
	// nullability differs) or refers to a schema that needs one.
	needs := map[string]bool{}
	for changed := true; changed; {
		changed = false
		for name := range inReq {
			if needs[name] || !inAns[name] {
				continue
			}
			s, _ := schemas[name].(obj)
			if _, ok := s["properties"]; ok || refersTo(s, needs) || nullBranch(s) >= 0 {
				needs[name], changed = true, true
			}
		}
	}
	for name := range needs {
		in := deepCopy(schemas[name]).(obj)
		delete(in, "required")
		if props, ok := in["properties"].(obj); ok {
			for k, p := range props {
				props[k] = nullable(p.(obj))
			}
		}
		mark(in, readOnly[name], "readOnly")
		mark(in, createOnly[name], "writeOnly")
		if t := str(in["title"]); t != "" {
			in["title"] = t + inputSuffix
		}
		desc := str(in["description"]) + "\n\nAs sent in a request: the schema requires no member (the field rules say which are needed), and null means \"not sent\"."
		if _, ok := in["properties"]; !ok {
			// A value that may be null (google.protobuf.Value, a custom
			// field's value): null in a request, never in an answer.
			desc = str(in["description"]) + "\n\nAs sent in a request: null means \"no value\" in a create and \"clear\" in a merge patch."
		}
		if ro := readOnly[name]; ro != nil {
			desc += " The read-only members (" + strings.Join(ro, ", ") + ") are ignored."
		}
		in["description"] = strings.TrimSpace(desc)
		retarget(in, needs)
		schemas[name+inputSuffix] = in
	}
	for name := range inReq {
		if !inAns[name] {
			retarget(schemas[name], needs)
		}
	}
	for _, r := range reqRoots {
		retarget(r, needs)
	}

	for name := range inAns {
		s, ok := schemas[name].(obj)
		if !ok {
			continue
		}
		dropMembers(s, createOnly[name])
		if i := nullBranch(s); i >= 0 {
			s["oneOf"] = slices.Delete(slices.Clone(s["oneOf"].([]any)), i, i+1)
			s["description"] = str(s["description"]) + "\n\nIn an answer never null: a value that is not set is left out."
		}
		if props, ok := s["properties"].(obj); ok {
			for k, p := range props {
				props[k] = notNull(p.(obj))
			}
		}
		mark(s, readOnly[name], "readOnly")
		if members := answerRequired[name]; members != nil {
			s["required"] = strs(members)
		}
	}
}

// nullBranch is the index of the {"type": "null"} alternative of the
// schema s's oneOf (google.protobuf.Value's), or -1.
func nullBranch(s obj) int {
	alts, _ := s["oneOf"].([]any)
	return slices.IndexFunc(alts, func(x any) bool {
		m, _ := x.(obj)
		return len(m) == 1 && m["type"] == "null"
	})
}

// dropMembers removes members from the properties of the schema s.
func dropMembers(s any, members []string) {
	props, _ := s.(obj)["properties"].(obj)
	for _, m := range members {
		delete(props, m)
	}
}

// mark sets keyword (readOnly, writeOnly) on the members of the schema s.
func mark(s obj, members []string, keyword string) {
	props, _ := s["properties"].(obj)
	for _, m := range members {
		if p, ok := props[m].(obj); ok {
			p[keyword] = true
		}
	}
}

// notNull returns a property schema that no longer accepts null: the
// inverse of [nullable], for answers.
func notNull(p obj) obj {
	out := obj{}
	for k, v := range p {
		out[k] = v
	}
	if t, ok := p["type"].([]any); ok {
		t = slices.DeleteFunc(slices.Clone(t), func(x any) bool { return x == "null" })
		if len(t) == 1 {
			out["type"] = t[0]
		} else {
			out["type"] = t
		}
	}
	if e, ok := p["enum"].([]any); ok {
		out["enum"] = slices.DeleteFunc(slices.Clone(e), func(x any) bool { return x == nil })
	}
	if a, ok := p["anyOf"].([]any); ok {
		a = slices.DeleteFunc(slices.Clone(a), func(x any) bool {
			m, _ := x.(obj)
			return len(m) == 1 && m["type"] == "null"
		})
		if r, ok := a[0].(obj)["$ref"]; ok && len(a) == 1 {
			delete(out, "anyOf")
			out["$ref"] = r
		} else {
			out["anyOf"] = a
		}
	}
	return out
}

// reachable returns the component schemas that roots refer to, directly
// or through other components.
func reachable(schemas obj, roots []any) map[string]bool {
	seen := map[string]bool{}
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case obj:
			if name, ok := strings.CutPrefix(str(v["$ref"]), "#/components/schemas/"); ok && !seen[name] {
				seen[name] = true
				walk(schemas[name])
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
	for _, r := range roots {
		walk(r)
	}
	return seen
}

// refersTo reports whether v refers to one of the schemas in names.
func refersTo(v any, names map[string]bool) bool {
	switch v := v.(type) {
	case obj:
		if name, ok := strings.CutPrefix(str(v["$ref"]), "#/components/schemas/"); ok && names[name] {
			return true
		}
		for _, x := range v {
			if refersTo(x, names) {
				return true
			}
		}
	case []any:
		for _, x := range v {
			if refersTo(x, names) {
				return true
			}
		}
	}
	return false
}

// retarget points the references in v to the schemas in names at their
// request variants.
func retarget(v any, names map[string]bool) {
	switch v := v.(type) {
	case obj:
		if name, ok := strings.CutPrefix(str(v["$ref"]), "#/components/schemas/"); ok && names[name] {
			v["$ref"] = "#/components/schemas/" + name + inputSuffix
		}
		for _, x := range v {
			retarget(x, names)
		}
	case []any:
		for _, x := range v {
			retarget(x, names)
		}
	}
}

func deepCopy(v any) any {
	switch v := v.(type) {
	case obj:
		out := obj{}
		for k, x := range v {
			out[k] = deepCopy(x)
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, x := range v {
			out[i] = deepCopy(x)
		}
		return out
	}
	return v
}

// responseName names the shared error response of a status (0: default)
// for the error body of op's kind.
func responseName(op Operation, status int) string {
	kind := "Problem"
	if op.OAuth() {
		kind = "OAuthError"
	}
	if status == 0 {
		return kind + "Default"
	}
	return kind + strconv.Itoa(status)
}

// errorResponse builds a shared error response from its name.
func errorResponse(name string) obj {
	oauth := strings.HasPrefix(name, "OAuthError")
	kind, num := "Problem", strings.TrimPrefix(name, "Problem")
	if oauth {
		kind, num = "OAuthError", strings.TrimPrefix(name, "OAuthError")
	}
	status, _ := strconv.Atoi(num)
	headers := obj{"Request-Id": ref("headers", "Request-Id")}
	if oauth {
		headers["Cache-Control"] = ref("headers", "Cache-Control")
		headers["Pragma"] = ref("headers", "Pragma")
	}
	headers["RateLimit-Policy"] = ref("headers", "RateLimit-Policy")
	headers["RateLimit"] = ref("headers", "RateLimit")
	desc := "Any other error."
	switch status {
	case 0:
	case http.StatusUnauthorized, http.StatusForbidden:
		headers["WWW-Authenticate"] = ref("headers", "WWW-Authenticate")
		desc = http.StatusText(status) + "."
	case http.StatusBadRequest:
		// A token sent in the query string, or two Authorization
		// headers, get a Bearer challenge with error="invalid_request".
		if !oauth {
			headers["WWW-Authenticate"] = ref("headers", "WWW-Authenticate")
		}
		desc = http.StatusText(status) + "."
	case http.StatusTooManyRequests, http.StatusServiceUnavailable:
		headers["Retry-After"] = ref("headers", "Retry-After")
		desc = http.StatusText(status) + "."
	default:
		desc = http.StatusText(status) + "."
	}
	if d := statusDetail(oauth, status); d != "" {
		desc = d
	}
	mediaType := "application/problem+json"
	if oauth {
		mediaType = "application/json"
	}
	return obj{
		"description": desc,
		"headers":     headers,
		"content":     obj{mediaType: obj{"schema": ref("schemas", kind)}},
	}
}

// statusDetail says when a status is answered, in the words of docs/api.md.
func statusDetail(oauth bool, status int) string {
	if oauth {
		switch status {
		case 400:
			return "invalid_request (malformed, repeated or conflicting parameters), unsupported_grant_type or invalid_scope."
		case 401:
			return "invalid_client: credentials missing or wrong, or the client is unknown, inactive or revoked; always with WWW-Authenticate: Basic."
		case 413:
			return "invalid_request: the body exceeds 1 MiB, on the wire or once decompressed."
		case 415:
			return "invalid_request: a Content-Encoding other than gzip."
		case 429:
			return "rate_limited: too many failed authentications for this client id or source, or the client's write rate is spent."
		case 500:
			return "server_error."
		case 503:
			return "temporarily_unavailable: the database is unreachable; retry later."
		}
		return ""
	}
	switch status {
	case 400:
		return "malformed_request: unparsable JSON, an unknown or repeated query parameter, a bad limit, sort, time or cursor; " +
			"a token in the query string or two Authorization headers (with a WWW-Authenticate: Bearer error=\"invalid_request\" challenge)."
	case 401:
		return "unauthenticated (no token) or invalid_token (unknown, expired or revoked). WWW-Authenticate: Bearer."
	case 403:
		return "insufficient_scope: the token lacks the operation's scope (WWW-Authenticate names it)."
	case 404:
		return "not_found: no such record in this workspace."
	case 409:
		return "duplicate (with existingId), idempotency_key_in_use, or failed_precondition (a PATCH that lost to concurrent writers three times; retry)."
	case 412:
		return "precondition_failed: If-Match names another version."
	case 413:
		return "payload_too_large: the body exceeds 1 MiB."
	case 415:
		return "unsupported_media_type: send Content-Type: application/json (or application/merge-patch+json on PATCH), and no Content-Encoding but gzip."
	case 422:
		return "validation_failed (errors lists the fields) or idempotency_key_reused."
	case 429:
		return "rate_limited: the client's bucket is empty; retry after Retry-After seconds."
	case 500:
		return "internal_error."
	case 503:
		return "unavailable: the database is unreachable; retry later."
	}
	return ""
}

// tidySchemas shortens the well-known types' long proto comments, and
// makes the schemas of messages with a oneof accept what they describe.
func tidySchemas(schemas obj) {
	if ts, ok := schemas["google.protobuf.Timestamp"].(obj); ok {
		ts["description"] = "An RFC 3339 timestamp in UTC, e.g. 2026-01-15T01:30:15.010Z."
	}
	if fm, ok := schemas["google.protobuf.FieldMask"].(obj); ok {
		fm["description"] = "A field mask: field paths separated by commas, e.g. \"email,firstName\"."
	}
	for _, v := range schemas {
		closeOneOf(v)
	}
}

// closeOneOf fixes the generator's schema of a message with a oneof: it
// lists the oneof's members inside "oneOf" and forbids
// "additionalProperties" beside it, which in JSON Schema 2020-12 cannot
// see into "oneOf" and so refuses every member of the oneof (every batch
// result). "unevaluatedProperties" sees them.
func closeOneOf(v any) {
	switch v := v.(type) {
	case obj:
		if _, ok := v["oneOf"]; ok && v["additionalProperties"] == false {
			delete(v, "additionalProperties")
			v["unevaluatedProperties"] = false
		}
		for _, x := range v {
			closeOneOf(x)
		}
	case []any:
		for _, x := range v {
			closeOneOf(x)
		}
	}
}

// mergePatchSchema returns the schema of a merge patch of the resource
// schema s (a $ref to a component): a component "<name>Patch" with the
// resource's members but the read-only and create-only ones, each of
// which may also be null.
func mergePatchSchema(schemas obj, s any) any {
	r, _ := s.(obj)["$ref"].(string)
	name, ok := strings.CutPrefix(r, "#/components/schemas/")
	res, _ := schemas[name].(obj)
	if !ok || res == nil {
		return s
	}
	props := obj{}
	for k, p := range res["properties"].(obj) {
		if !slices.Contains(readOnly[name], k) && !slices.Contains(createOnly[name], k) && !slices.Contains(immutable[name], k) {
			// A copy: the patch's members must not share nested schemas
			// with the record's, whose references the split into answers
			// and requests rewrites apart.
			props[k] = nullable(deepCopy(p).(obj))
		}
	}
	desc := "A JSON merge patch (RFC 7396) of a " + str(res["title"]) + ": the members to set, or null to clear."
	if ro := slices.Concat(readOnly[name], createOnly[name], immutable[name]); len(ro) > 0 {
		desc += " " + strings.Join(ro, ", ") + " are not members of a patch: naming one is a 400."
	}
	schemas[name+"Patch"] = obj{
		"type":                 "object",
		"title":                str(res["title"]) + "Patch",
		"description":          desc,
		"properties":           props,
		"additionalProperties": false,
	}
	return ref("schemas", name+"Patch")
}

// ignoreUnknownParams lets the schema of an OAuth request (a $ref to a
// component) have members it does not name: the token and revocation
// endpoints ignore unrecognised parameters, as RFC 6749 §3.2 and RFC 7009
// §2.1 require, where the generator forbids them.
func ignoreUnknownParams(schemas obj, s any) {
	r, _ := s.(obj)["$ref"].(string)
	name, ok := strings.CutPrefix(r, "#/components/schemas/")
	if res, _ := schemas[name].(obj); ok && res != nil {
		delete(res, "additionalProperties")
		res["description"] = strings.TrimSpace(str(res["description"]) + " Unknown parameters are ignored.")
	}
}

// nullable returns a property schema that also accepts null.
func nullable(p obj) obj {
	out := obj{}
	for k, v := range p {
		out[k] = v
	}
	switch t := p["type"].(type) {
	case string:
		out["type"] = []any{t, "null"}
		return out
	case []any:
		if !slices.Contains(t, any("null")) {
			out["type"] = append(slices.Clone(t), "null")
		}
		return out
	}
	if r, ok := p["$ref"]; ok {
		delete(out, "$ref")
		out["anyOf"] = []any{obj{"$ref": r}, obj{"type": "null"}}
	}
	return out
}

// tidyDescriptions drops the space the generator keeps after each newline
// of a proto comment ("//  text").
func tidyDescriptions(v any) {
	switch v := v.(type) {
	case obj:
		for k, x := range v {
			if s, ok := x.(string); ok && (k == "description" || k == "summary") {
				v[k] = strings.ReplaceAll(s, "\n ", "\n")
				continue
			}
			tidyDescriptions(x)
		}
	case []any:
		for _, x := range v {
			tidyDescriptions(x)
		}
	}
}

// pruneComponents removes the components nothing refers to, such as the
// schemas of the RPC request and response messages whose REST routes
// take or answer one of their fields (a create's body is the Contact, not
// the CreateContactRequest): they describe no REST exchange, and linters
// report them. References are followed from everything outside
// components, so a component only other unused ones refer to goes too.
// Security schemes are named, not referred to, and stay.
func pruneComponents(doc obj) {
	components, _ := doc["components"].(obj)
	used := map[string]bool{}
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case obj:
			if r, ok := v["$ref"].(string); ok && !used[r] {
				used[r] = true
				kind, name, _ := strings.Cut(strings.TrimPrefix(r, "#/components/"), "/")
				if c, ok := components[kind].(obj); ok {
					walk(c[unescapePointer(name)])
				}
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
	for k, v := range doc {
		if k != "components" {
			walk(v)
		}
	}
	for kind, c := range components {
		if kind == "securitySchemes" {
			continue
		}
		if c, ok := c.(obj); ok {
			for name := range c {
				if !used["#/components/"+kind+"/"+escapePointer(name)] {
					delete(c, name)
				}
			}
		}
	}
}

func escapePointer(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}

func unescapePointer(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~1", "/"), "~0", "~")
}

// servers names where the API is served: "/", the origin that served
// this document. GET /openapi.json is public, so a viewer or generator
// that loaded it from a server resolves every path there; a client built
// from the file sets its own base URL (openapi-fetch's baseUrl), so no
// host is baked into one. A "http://localhost:8080" entry for `make run`
// would be Redocly's no-server-example.com warning.
func servers() []any {
	return []any{obj{"url": "/", "description": "The server that served this document (GET /openapi.json)."}}
}

func ref(kind, name string) obj {
	return obj{"$ref": "#/components/" + kind + "/" + name}
}

// child returns m[key] as an object, creating it when absent.
func child(m obj, key string) obj {
	if c, ok := m[key].(obj); ok {
		return c
	}
	c := obj{}
	m[key] = c
	return c
}

func str(v any) string {
	s, _ := v.(string)
	return s
}
