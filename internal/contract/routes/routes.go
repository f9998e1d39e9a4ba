// Package routes is the one reader of the google.api.http annotations: it
// turns each RPC's HTTP rule (and its partner.rest.v1.rest option) into a
// [Route], and every part of the server that needs the REST shape of the
// API takes it from here: the REST gateway (internal/edge/restgw) routes
// and builds requests with it, the bearer interceptor's requirements
// (internal/security/auth) tell reads from writes by it, the clean-text
// check names body fields by it, and the OpenAPI document
// (cmd/openapigen/apidoc) describes it. Nothing else reads the option, so
// a route is declared once, in the .proto file, and cannot mean two
// things in two places.
package routes

import (
	"net/http"
	"strings"

	"google.golang.org/genproto/googleapis/api/annotations"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	restv1 "github.com/svat/partnerapi/gen/partner/rest/v1"
)

// Route is the REST route of one RPC.
type Route struct {
	// Method is the HTTP method, e.g. "POST".
	Method string
	// Template is the google.api.http path template, verb included, e.g.
	// "/api/v1/contacts/{id}" or "/admin/v1/clients/{client_id}:revoke".
	Template string
	// Verb is the template's custom verb ("revoke"), "" when it has none.
	Verb string
	// Vars are the field paths the template binds, in order ("client_id").
	Vars []string
	// Body is the rule's body: "" (none), "*" (the whole request) or the
	// name of the request field the body fills.
	Body string
	// ResponseBody names the response field answered as the body; "" is
	// the whole response.
	ResponseBody string
	// Success is the status of a successful answer: the
	// partner.rest.v1.rest option's success_status (201 on creates), else
	// 200.
	Success int
	// Procedure is the RPC's Connect procedure, "/pkg.Service/Method".
	Procedure string
	// Service and RPC describe the RPC.
	Service protoreflect.ServiceDescriptor
	RPC     protoreflect.MethodDescriptor
}

// Table is the routes of a set of services, in the order of their
// methods.
type Table []Route

// Of reads the routes of every method of services that has a
// google.api.http rule. Additional bindings and custom methods are not
// read: no RPC of ours has them.
func Of(services ...protoreflect.ServiceDescriptor) Table {
	var out Table
	for _, svc := range services {
		for i := range svc.Methods().Len() {
			if rt, ok := of(svc, svc.Methods().Get(i)); ok {
				out = append(out, rt)
			}
		}
	}
	return out
}

func of(svc protoreflect.ServiceDescriptor, m protoreflect.MethodDescriptor) (Route, bool) {
	rule, _ := proto.GetExtension(m.Options(), annotations.E_Http).(*annotations.HttpRule)
	if rule == nil {
		return Route{}, false
	}
	rt := Route{Body: rule.GetBody(), ResponseBody: rule.GetResponseBody(), Success: http.StatusOK,
		Procedure: "/" + string(svc.FullName()) + "/" + string(m.Name()), Service: svc, RPC: m}
	switch p := rule.GetPattern().(type) {
	case *annotations.HttpRule_Get:
		rt.Method, rt.Template = http.MethodGet, p.Get
	case *annotations.HttpRule_Post:
		rt.Method, rt.Template = http.MethodPost, p.Post
	case *annotations.HttpRule_Put:
		rt.Method, rt.Template = http.MethodPut, p.Put
	case *annotations.HttpRule_Patch:
		rt.Method, rt.Template = http.MethodPatch, p.Patch
	case *annotations.HttpRule_Delete:
		rt.Method, rt.Template = http.MethodDelete, p.Delete
	}
	if rt.Template == "" {
		return Route{}, false
	}
	if r, ok := proto.GetExtension(m.Options(), restv1.E_Rest).(*restv1.Rest); ok && r.GetSuccessStatus() != 0 {
		rt.Success = int(r.GetSuccessStatus())
	}
	_, rt.Verb = SplitVerb(rt.Template)
	for _, seg := range strings.Split(rt.Path(), "/") {
		if strings.HasPrefix(seg, "{") && strings.HasSuffix(seg, "}") {
			name, _, _ := strings.Cut(seg[1:len(seg)-1], "=")
			rt.Vars = append(rt.Vars, name)
		}
	}
	return rt, true
}

// SplitVerb cuts a path template's custom verb: "/v1/x/{id}:cancel" is
// "/v1/x/{id}" and "cancel". The verb is what follows the last colon of
// the last segment, outside any variable.
func SplitVerb(template string) (path, verb string) {
	i := strings.LastIndexByte(template, ':')
	if i < 0 || i < strings.LastIndexByte(template, '/') || i < strings.LastIndexByte(template, '}') {
		return template, ""
	}
	return template[:i], template[i+1:]
}

// Path is the template without its verb.
func (r Route) Path() string {
	p, _ := SplitVerb(r.Template)
	return p
}

// OAuth reports whether the route is one of the /api/oauth endpoints,
// whose bodies are RFC 6749 parameters and whose errors are RFC 6749
// JSON.
func (r Route) OAuth() bool { return IsOAuthPath(r.Template) }

// IsOAuthPath reports whether errors on path use RFC 6749 §5.2 bodies.
func IsOAuthPath(path string) bool { return strings.HasPrefix(path, "/api/oauth/") }

// BodyField is the request field the body fills, nil when the body is
// the whole request or there is none.
func (r Route) BodyField() protoreflect.FieldDescriptor {
	if r.Body == "" || r.Body == "*" {
		return nil
	}
	return r.RPC.Input().Fields().ByName(protoreflect.Name(r.Body))
}

// MergePatch is the message a PATCH body is a JSON merge patch (RFC 7396)
// of, when the RPC is an AIP-134 update: its request has a
// google.protobuf.FieldMask update_mask and a message body field. It is
// nil for every other route.
func (r Route) MergePatch() protoreflect.MessageDescriptor {
	if r.Method != http.MethodPatch {
		return nil
	}
	input := r.RPC.Input()
	mask := input.Fields().ByName("update_mask")
	field := r.BodyField()
	if mask == nil || mask.Message() == nil || mask.Message().FullName() != "google.protobuf.FieldMask" ||
		field == nil || field.Message() == nil {
		return nil
	}
	return field.Message()
}

// Query lists the names, proto and JSON, of the request fields the rule
// leaves to the query string: those bound by neither the path nor the
// body (none when the body is the whole request). The update mask of a
// merge patch comes from the body, never the query.
func (r Route) Query() map[string]bool {
	out := map[string]bool{}
	if r.Body == "*" {
		return out
	}
	bound := map[string]bool{r.Body: true}
	for _, v := range r.Vars {
		bound[v] = true
	}
	if r.MergePatch() != nil {
		bound["update_mask"] = true
	}
	fields := r.RPC.Input().Fields()
	for i := range fields.Len() {
		f := fields.Get(i)
		if !bound[string(f.Name())] {
			out[string(f.Name())], out[f.JSONName()] = true, true
		}
	}
	return out
}

// Find returns the route of a procedure.
func (t Table) Find(procedure string) (Route, bool) {
	for _, r := range t {
		if r.Procedure == procedure {
			return r, true
		}
	}
	return Route{}, false
}
