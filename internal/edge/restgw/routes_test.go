package restgw

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/dynamicpb"

	"github.com/svat/partnerapi/gen/partner/admin/v1/adminv1connect"
	"github.com/svat/partnerapi/gen/partner/contact/v1/contactv1connect"
	"github.com/svat/partnerapi/gen/partner/lead/v1/leadv1connect"
	"github.com/svat/partnerapi/internal/contract/apierror"
	"github.com/svat/partnerapi/internal/contract/routes"
	"github.com/svat/partnerapi/internal/observe/requestid"
)

func service(t *testing.T, name string) protoreflect.ServiceDescriptor {
	t.Helper()
	d, err := protoregistry.GlobalFiles.FindDescriptorByName(protoreflect.FullName(name))
	if err != nil {
		t.Fatal(err)
	}
	return d.(protoreflect.ServiceDescriptor)
}

// build is New over the routes of services that calls serve.
func build(t *testing.T, calls map[string]Call, interceptors []connect.Interceptor, services ...protoreflect.ServiceDescriptor) *Gateway {
	t.Helper()
	var table routes.Table
	for _, r := range routes.Of(services...) {
		if _, ok := calls[r.Procedure]; ok {
			table = append(table, r)
		}
	}
	g, err := New(http.NotFoundHandler(), table, calls, interceptors...)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// recorder answers every route of services with an empty response and
// keeps the last request message, as JSON, and its procedure.
type recorder struct {
	got, procedure string
	// err, when set, is what every call returns.
	err error
}

func (rec *recorder) calls(services ...protoreflect.ServiceDescriptor) map[string]Call {
	out := map[string]Call{}
	for _, r := range routes.Of(services...) {
		m := r.RPC
		out[r.Procedure] = Call{
			newRequest: func() proto.Message { return dynamicpb.NewMessage(m.Input()) },
			wrap:       func(msg proto.Message) connect.AnyRequest { return connect.NewRequest(msg.(*dynamicpb.Message)) },
			unary: func(_ context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
				b, _ := protojson.Marshal(req.Any().(proto.Message))
				rec.got, rec.procedure = string(b), req.Spec().Procedure
				if rec.err != nil {
					return nil, rec.err
				}
				return connect.NewResponse(dynamicpb.NewMessage(m.Output())), nil
			},
		}
	}
	return out
}

func (rec *recorder) gateway(t *testing.T, services ...protoreflect.ServiceDescriptor) *Gateway {
	t.Helper()
	g, err := New(http.NotFoundHandler(), routes.Of(services...), rec.calls(services...))
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func TestMuxPattern(t *testing.T) {
	t.Parallel()
	for template, want := range map[string]struct {
		pattern, last string
		names         []string
	}{
		"/api/v1/contacts":                     {"/api/v1/contacts", "", nil},
		"/api/v1/contacts/{id}":                {"/api/v1/contacts/{_1}", "", []string{"_1"}},
		"/api/v1/contacts/{id=*}":              {"/api/v1/contacts/{_1}", "", []string{"_1"}},
		"/v1/files/{name=**}":                  {"/v1/files/{_1...}", "", []string{"_1"}},
		"/v1/*/things/*":                       {"/v1/{_1}/things/{_2}", "", nil},
		"/v1/shelves/{shelf}/books/*":          {"/v1/shelves/{_1}/books/{_2}", "", []string{"_1"}},
		"/admin/v1/clients/{client_id}:revoke": {"/admin/v1/clients/{_1}", "_1", []string{"_1"}},
		"/v1/things:batchGet":                  {"/v1/things:batchGet", "", nil},
		"/v1/{a}/things/{b}:run":               {"/v1/{_1}/things/{_2}", "_2", []string{"_1", "_2"}},
	} {
		pattern, names, last, err := muxPattern(template)
		if err != nil || pattern != want.pattern || last != want.last || !slices.Equal(names, want.names) {
			t.Errorf("muxPattern(%q) = %q %q %q %v, want %+v", template, pattern, names, last, err, want)
		}
	}
	for _, bad := range []string{"/v1/{name=shelves/*}", "v1/x", "/v1/a{b}", "/v1/**/x", "/v1/a:b/c", "/v1//x"} {
		if _, _, _, err := muxPattern(bad); err == nil {
			t.Errorf("muxPattern(%q) did not fail", bad)
		}
	}
}

// TestNewRefusesWhatItCannotServe: a route without a call is a start-up
// error, not a route that answers nothing.
func TestNewRefusesWhatItCannotServe(t *testing.T) {
	t.Parallel()
	table := routes.Of(service(t, contactv1connect.ContactServiceName))
	calls := (&recorder{}).calls(service(t, contactv1connect.ContactServiceName))
	delete(calls, contactv1connect.ContactServiceGetContactProcedure)
	if _, err := New(http.NotFoundHandler(), table, calls); err == nil || !strings.Contains(err.Error(), "GetContact") {
		t.Fatalf("New without a call for GetContact: %v", err)
	}
}

// TestRoutesFromAnnotations: requests reach their RPC by their
// google.api.http templates, {id} included; the route template, never the
// raw path, is recorded for logs and metrics; unknown paths are 404 and
// other methods 405 with Allow; a merge patch's members are the update
// mask.
func TestRoutesFromAnnotations(t *testing.T) {
	t.Parallel()
	rec := &recorder{}
	g := rec.gateway(t, service(t, contactv1connect.ContactServiceName), service(t, leadv1connect.LeadServiceName))
	for _, tc := range []struct {
		method, target, ctype, body string
		status                      int
		route, allow, want          string
	}{
		{"GET", "/api/v1/contacts/con_abc", "", "", 200, "/api/v1/contacts/{id}", "", `{"id":"con_abc"}`},
		{"GET", "/api/v1/leads/lea_abc", "", "", 200, "/api/v1/leads/{id}", "", `{"id":"lea_abc"}`},
		{"GET", "/api/v1/contacts?limit=5", "", "", 200, "/api/v1/contacts", "", `{"limit":5}`},
		{"POST", "/api/v1/contacts", "application/json", `{"email":"a@b.co"}`, 201, "/api/v1/contacts", "", `{"contact":{"email":"a@b.co"}}`},
		{"POST", "/api/v1/leads/batch", "application/json", `{"leads":[]}`, 200, "/api/v1/leads/batch", "", `{}`},
		{"PATCH", "/api/v1/contacts/con_abc", "application/merge-patch+json", `{"firstName":"A","phone":null}`, 200, "/api/v1/contacts/{id}", "",
			`{"id":"con_abc","contact":{"firstName":"A"},"updateMask":"firstName,phone"}`},
		{"PATCH", "/api/v1/leads/lea_abc", "application/json", `{"status":"new","value":{"amount":1}}`, 200, "/api/v1/leads/{id}", "", ""},
		{"PATCH", "/api/v1/leads/lea_abc", "application/json", `{}`, 200, "/api/v1/leads/{id}", "", `{"id":"lea_abc","lead":{}}`},
		{"PATCH", "/api/v1/leads/lea_abc", "application/json", `[1]`, 400, "/api/v1/leads/{id}", "", ""},
		{"PATCH", "/api/v1/leads/lea_abc", "text/plain", `{}`, 415, "/api/v1/leads/{id}", "", ""},
		{"POST", "/api/v1/leads/batch", "application/merge-patch+json", `{}`, 415, "/api/v1/leads/batch", "", ""},
		{"POST", "/api/v1/leads/batch", "application/json", ``, 200, "/api/v1/leads/batch", "", `{}`}, // no body: the empty request (the RPC refuses an empty batch)
		{"PATCH", "/api/v1/leads/lea_abc?updateMask=title", "application/json", `{}`, 400, "/api/v1/leads/{id}", "", ""},
		{"GET", "/api/v1/contacts/con_abc?id=x", "", "", 400, "/api/v1/contacts/{id}", "", ""},
		{"GET", "/api/v1/contacts?%zz", "", "", 400, "/api/v1/contacts", "", ""},
		{"PUT", "/api/v1/leads/lea_abc", "", "", 405, "/api/v1/leads/{id}", "GET, PATCH, DELETE", ""},
		{"GET", "/api/v1/contacts/batch", "", "", 405, "/api/v1/contacts/batch", "POST", ""},
		{"PUT", "/api/v1/contacts", "", "", 405, "/api/v1/contacts", "GET, POST", ""},
		{"GET", "/api/v1/contacts/con_abc/notes", "", "", 404, "unmatched", "", ""},
		{"GET", "/api/v1/nope", "", "", 404, "unmatched", "", ""},
	} {
		rec.got = ""
		ctx := requestid.WithID(context.Background(), "req_test")
		r := httptest.NewRequest(tc.method, tc.target, strings.NewReader(tc.body)).WithContext(ctx)
		if tc.ctype != "" {
			r.Header.Set("Content-Type", tc.ctype)
		}
		w := httptest.NewRecorder()
		g.ServeHTTP(w, r)
		name := tc.method + " " + tc.target
		if w.Code != tc.status {
			t.Errorf("%s: status %d, want %d: %s", name, w.Code, tc.status, w.Body)
		}
		if route := requestid.InfoFrom(ctx).Route; route != tc.route {
			t.Errorf("%s: route %q, want %q", name, route, tc.route)
		}
		if allow := w.Header().Get("Allow"); allow != tc.allow {
			t.Errorf("%s: Allow %q, want %q", name, allow, tc.allow)
		}
		if reached := tc.status < 300; reached != (rec.got != "") {
			t.Errorf("%s: reached the RPC: %v, want %v", name, rec.got != "", reached)
		}
		if tc.want != "" && !sameJSON(rec.got, tc.want) {
			t.Errorf("%s: request %s, want %s", name, rec.got, tc.want)
		}
		if w.Code >= 400 && w.Header().Get("Content-Type") != "application/problem+json" {
			t.Errorf("%s: error Content-Type %q", name, w.Header().Get("Content-Type"))
		}
	}
	// A merge patch of a nested message masks its members.
	r := httptest.NewRequest("PATCH", "/api/v1/leads/lea_abc", strings.NewReader(`{"status":"new","value":{"amount":1}}`))
	r.Header.Set("Content-Type", "application/json")
	g.ServeHTTP(httptest.NewRecorder(), r)
	var got struct{ UpdateMask string }
	if err := json.Unmarshal([]byte(rec.got), &got); err != nil || got.UpdateMask != "status,value.amount" {
		t.Errorf("lead merge patch: request %s", rec.got)
	}
}

// TestVerbRoutes: templates with a custom verb (the admin API's
// "/admin/v1/clients/{client_id}:revoke") share one pattern and are told
// apart by the verb; the variable is the segment without it; a verb of no
// route, or none, is 404; another method is 405 naming the verb's
// methods.
func TestVerbRoutes(t *testing.T) {
	t.Parallel()
	rec := &recorder{}
	g := rec.gateway(t, service(t, adminv1connect.AdminServiceName))
	g.Dialect = Google
	for _, tc := range []struct {
		method, target string
		status         int
		route, want    string
	}{
		{"POST", "/admin/v1/clients/cli_1:revoke", 200, "/admin/v1/clients/{client_id}:revoke", `{"clientId":"cli_1"}`},
		{"POST", "/admin/v1/clients/cli_1:rotateSecret", 200, "/admin/v1/clients/{client_id}:rotateSecret", `{"clientId":"cli_1"}`},
		{"POST", "/admin/v1/clients/a:b:activate", 200, "/admin/v1/clients/{client_id}:activate", `{"clientId":"a:b"}`},
		{"POST", "/admin/v1/clients/a%3Adeactivate", 200, "/admin/v1/clients/{client_id}:deactivate", `{"clientId":"a"}`},
		{"POST", "/admin/v1/clients/:revoke", 200, "/admin/v1/clients/{client_id}:revoke", `{}`},
		{"POST", "/admin/v1/clients/cli_1:bogus", 404, "unmatched", ""},
		{"POST", "/admin/v1/clients/cli_1", 404, "unmatched", ""},
		{"GET", "/admin/v1/clients/cli_1:revoke", 405, "/admin/v1/clients/{client_id}:revoke", ""},
		{"GET", "/admin/v1/workspaces/wks_1/clients?memberId=mem_1", 200, "/admin/v1/workspaces/{workspace_id}/clients", `{"workspaceId":"wks_1","memberId":"mem_1"}`},
		{"POST", "/admin/v1/workspaces/wks_1/clients", 200, "/admin/v1/workspaces/{workspace_id}/clients", `{"workspaceId":"wks_1","name":"x"}`},
	} {
		rec.got = ""
		ctx := requestid.WithID(context.Background(), "req_test")
		r := httptest.NewRequest(tc.method, tc.target, strings.NewReader(`{"name":"x"}`)).WithContext(ctx)
		if strings.HasPrefix(tc.target, "/admin/v1/clients/") {
			r = httptest.NewRequest(tc.method, tc.target, strings.NewReader(`{}`)).WithContext(ctx)
		}
		w := httptest.NewRecorder()
		g.ServeHTTP(w, r)
		name := tc.method + " " + tc.target
		if w.Code != tc.status {
			t.Errorf("%s: status %d, want %d: %s", name, w.Code, tc.status, w.Body)
		}
		if route := requestid.InfoFrom(ctx).Route; route != tc.route {
			t.Errorf("%s: route %q, want %q", name, route, tc.route)
		}
		if tc.want != "" && !sameJSON(rec.got, tc.want) {
			t.Errorf("%s: request %s, want %s", name, rec.got, tc.want)
		}
		if tc.status == 405 && w.Header().Get("Allow") != "POST" {
			t.Errorf("%s: Allow %q", name, w.Header().Get("Allow"))
		}
	}
}

// TestGoogleDialect: on a Google gateway (the admin API), an error of the
// call is the google.rpc.Status a google.api.http transcoder answers,
// under its RPC code's status (a validation error is 400, not the problem
// 422), a body that does not decode too; the gateway's own refusals are
// problem+json; a body without Content-Type is JSON, an empty one an
// empty request, an unknown field ignored (as the admin API's Connect
// codec ignores it); a POST takes the fields neither its path nor its body
// binds as query parameters, and none when the body is the whole request.
func TestGoogleDialect(t *testing.T) {
	t.Parallel()
	rec := &recorder{}
	g := rec.gateway(t, service(t, adminv1connect.AdminServiceName))
	g.Dialect = Google
	send := func(method, target, ctype, body string) *httptest.ResponseRecorder {
		t.Helper()
		r := httptest.NewRequest(method, target, strings.NewReader(body))
		if ctype != "" {
			r.Header.Set("Content-Type", ctype)
		}
		w := httptest.NewRecorder()
		g.ServeHTTP(w, r)
		return w
	}
	rec.err = apierror.ToConnect(apierror.Validation(apierror.FieldViolation{Field: "name", Code: "invalid_value", Message: "must be 1 to 200 characters"}))
	w := send("POST", "/admin/v1/workspaces", "application/json", `{"name":""}`)
	const status = `{"code":3,"message":"validation_failed: name: must be 1 to 200 characters","details":[` +
		`{"@type":"type.googleapis.com/google.rpc.ErrorInfo","reason":"validation_failed","domain":"partner-api","metadata":{}},` +
		`{"@type":"type.googleapis.com/google.rpc.BadRequest","fieldViolations":[{"field":"name","description":"must be 1 to 200 characters","reason":"invalid_value"}]}]}`
	if w.Code != 400 || w.Header().Get("Content-Type") != "application/json" || w.Body.String() != status {
		t.Errorf("validation error: %d %q %s", w.Code, w.Header().Get("Content-Type"), w.Body)
	}
	rec.err = apierror.ToConnect(apierror.New(apierror.CodeFailedPrecondition, "the client is revoked"))
	if w := send("POST", "/admin/v1/clients/cli_1:activate", "application/json", `{}`); w.Code != 400 || !strings.HasPrefix(w.Body.String(), `{"code":9,`) {
		t.Errorf("failed precondition: %d %s", w.Code, w.Body)
	}
	rec.err, rec.got = nil, ""
	w = send("POST", "/admin/v1/workspaces", "application/json", `{"name":`)
	const malformed = `{"code":3,"message":"malformed_request: malformed JSON: the JSON ends early","details":[` +
		`{"@type":"type.googleapis.com/google.rpc.ErrorInfo","reason":"malformed_request","domain":"partner-api","metadata":{}}]}`
	if w.Code != 400 || w.Body.String() != malformed || rec.got != "" {
		t.Errorf("truncated body: %d %s (reached: %s)", w.Code, w.Body, rec.got)
	}
	for _, tc := range []struct {
		method, target, ctype, body string
		status                      int
		problem                     string
	}{
		{"POST", "/admin/v1/workspaces", "text/plain", `{}`, 415, "unsupported_media_type"},
		{"POST", "/admin/v1/workspaces?x=1", "application/json", `{}`, 400, "malformed_request"},
		{"POST", "/admin/v1/clients/cli_1:revoke?memberId=m", "application/json", `{}`, 400, "malformed_request"},
		{"GET", "/admin/v1/workspaces/w/audit-events?limit=x", "", "", 400, "malformed_request"},
		{"GET", "/admin/v1/workspaces/w/audit-events?limit=1&limit=2", "", "", 400, "malformed_request"},
		{"GET", "/admin/v1/workspaces/%FF/clients", "", "", 400, "malformed_request"},
		{"DELETE", "/admin/v1/workspaces", "", "", 405, "method_not_allowed"},
		{"GET", "/admin/v1/nope", "", "", 404, "not_found"},
	} {
		rec.got = ""
		w := send(tc.method, tc.target, tc.ctype, tc.body)
		var p struct{ Code string }
		if w.Code != tc.status || w.Header().Get("Content-Type") != "application/problem+json" ||
			json.Unmarshal(w.Body.Bytes(), &p) != nil || p.Code != tc.problem || rec.got != "" {
			t.Errorf("%s %s: %d %s; want a %d %s problem", tc.method, tc.target, w.Code, w.Body, tc.status, tc.problem)
		}
	}
	// A member the request has not is refused, as the RPC's codec does.
	if w := send("POST", "/admin/v1/workspaces", "application/json", `{"name":"x","bogus":1}`); w.Code != 400 || !strings.Contains(w.Body.String(), `"field":"bogus"`) || rec.got != "" {
		t.Errorf("unknown member: %d %s", w.Code, w.Body)
	}
	for _, tc := range []struct{ ctype, body, want string }{
		{"", `{"name":"x"}`, `{"name":"x"}`},
		{"application/json; charset=utf-8", `{"name":"x"}`, `{"name":"x"}`},
		{"application/json", ``, `{}`},
	} {
		if w := send("POST", "/admin/v1/workspaces", tc.ctype, tc.body); w.Code != 200 || !sameJSON(rec.got, tc.want) {
			t.Errorf("POST %q %q: %d %s, request %s", tc.ctype, tc.body, w.Code, w.Body, rec.got)
		}
	}
}
