// Package restgw is the REST face of the API, public and admin: one
// router for every google.api.http route, built from the route table
// (internal/contract/routes), that serves each route by calling its RPC's
// implementation in process, behind the same interceptors as its Connect
// handler. It does what the annotations alone do not say:
//
//   - token and revocation bodies may be form-urlencoded or JSON, with a
//     charset; they are checked for repeated parameters and read straight
//     into the request message;
//   - request bodies are capped at 1 MiB (413), inflated within the cap;
//   - unknown or repeated query parameters are 400, and an access token in
//     the query string is refused;
//   - errors are rendered by [WriteError]: RFC 6749 JSON on /api/oauth,
//     RFC 9457 problem+json elsewhere; on a [Google] gateway (the admin
//     API) the errors of the call itself are the google.rpc.Status a
//     google.api.http transcoder answers;
//   - a success answers the status the route declares in the
//     partner.rest.v1.rest option (201 for creates).
//
// Each route's path template becomes an http.ServeMux pattern
// ("/api/v1/contacts/{id}"); a custom verb ("/admin/v1/clients/{id}:revoke")
// is matched on the last segment by the pattern's handler. The matched
// template is the request's route in logs and metrics
// (requestid.Info.Route), never the raw path.
package restgw

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/descriptorpb"

	"github.com/svat/partnerapi/internal/contract/apierror"
	"github.com/svat/partnerapi/internal/contract/routes"
	"github.com/svat/partnerapi/internal/observe/requestid"
)

// Dialect is how a gateway's routes take requests and answer errors.
type Dialect int

const (
	// Partner is the public API's: every error is problem+json (RFC 6749
	// JSON on /api/oauth) with its problem code's status, a body must say
	// it is JSON, and only a GET takes query parameters.
	Partner Dialect = iota
	// Google is google.api.http's as a transcoder speaks it, kept by the
	// admin API for its operators' scripts: an error of the call itself (a
	// body that does not decode into the request, or what the RPC returns)
	// is a google.rpc.Status under its RPC code's HTTP status, a body sent
	// without a Content-Type is JSON, a body that is the whole request is
	// read as the RPC's JSON codec reads it (unknown fields ignored), and
	// any method takes the request fields that neither the path nor the
	// body binds as query parameters.
	// The gateway's own refusals before the call (no route, method, media
	// type, query string, path bytes, body size) are problem+json in both.
	Google
)

// route is one route and what serving it needs.
type route struct {
	routes.Route
	input protoreflect.MessageDescriptor
	// params are the names the query string may use (routes.Route.Query).
	params map[string]bool
	// vars bind the template's variables: field and ServeMux wildcard.
	vars []pathVar
	// body is the field the body fills (nil: none, or the whole request
	// when whole is set).
	body  protoreflect.FieldDescriptor
	whole bool
	// patch is the message a PATCH body is a JSON merge patch of.
	patch protoreflect.MessageDescriptor
	// response is the field answered as the body (nil: the whole message).
	response protoreflect.FieldDescriptor
	call     Call
	spec     connect.Spec
	// chain is the implementation behind the interceptors.
	chain connect.UnaryFunc
}

type pathVar struct {
	field protoreflect.FieldDescriptor
	name  string
}

// group is the routes of one ServeMux pattern: the methods of one
// template, and the custom verbs of templates that differ only in them.
type group struct {
	routes []*route
	// last is the wildcard of the pattern's last segment, when a route
	// of the group has a verb there; the handler cuts the verb off it.
	last string
}

// Gateway routes REST requests to their RPCs.
type Gateway struct {
	next http.Handler
	mux  *http.ServeMux
	// prefixes are the first path segments of the routes ("/api/"): a
	// request under one that matches no route is the gateway's 404, any
	// other request goes to next.
	prefixes []string
	// Check, when set, runs after a route matched and before the body is
	// read: the cheap checks that can refuse a request (credentials,
	// scope, rate limits) must not wait for a body, let alone inflate one.
	// It returns the request to go on with, or the error to answer. It is
	// called with an empty procedure for a request that matches no route
	// outside /api/oauth.
	Check func(w http.ResponseWriter, r *http.Request, procedure string) (*http.Request, *apierror.Error)
	// CompressMinBytes is the smallest answer that is gzipped for a
	// client that accepts it; 0 never compresses.
	CompressMinBytes int
	// Dialect is Partner unless set.
	Dialect Dialect
	routes  []*route
}

// New builds the gateway of a route table. calls maps each route's
// procedure to its implementation, and interceptors are those of its
// Connect handler, outermost first. next serves every request outside the
// routes' first path segments (the RPC protocols, health, …). It fails on
// a route without a call, or one whose shape it cannot serve (a path
// variable that is not a top-level string field, a query parameter that
// is not a scalar or a field mask): a mistake in a .proto file or in the
// wiring, found at start-up.
func New(next http.Handler, table routes.Table, calls map[string]Call, interceptors ...connect.Interceptor) (*Gateway, error) {
	g := &Gateway{next: next, mux: http.NewServeMux()}
	groups := map[string]*group{}
	var patterns []string
	for _, r := range table {
		c, ok := calls[r.Procedure]
		if !ok {
			return nil, fmt.Errorf("restgw: %s %s: no call for %s", r.Method, r.Template, r.Procedure)
		}
		rt, pattern, last, err := plan(r, c)
		if err != nil {
			return nil, fmt.Errorf("restgw: %s %s: %w", r.Method, r.Template, err)
		}
		rt.chain = c.unary
		for i := len(interceptors) - 1; i >= 0; i-- {
			rt.chain = interceptors[i].WrapUnary(rt.chain)
		}
		grp := groups[pattern]
		if grp == nil {
			grp = &group{}
			groups[pattern] = grp
			patterns = append(patterns, pattern)
		}
		if rt.Verb != "" {
			grp.last = last
		}
		grp.routes = append(grp.routes, rt)
		g.routes = append(g.routes, rt)
		prefix := "/" + strings.SplitN(strings.TrimPrefix(r.Template, "/"), "/", 2)[0] + "/"
		if !contains(g.prefixes, prefix) {
			g.prefixes = append(g.prefixes, prefix)
		}
	}
	for _, p := range patterns {
		g.mux.Handle(p, g.groupHandler(groups[p]))
	}
	for _, p := range g.prefixes {
		g.mux.HandleFunc(p, func(w http.ResponseWriter, r *http.Request) {
			g.notFound(w, r)
		})
	}
	return g, nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// plan returns how to serve r: the route, its ServeMux pattern and the
// wildcard of the pattern's last segment.
func plan(r routes.Route, c Call) (rt *route, pattern, last string, err error) {
	rt = &route{Route: r, input: r.RPC.Input(), params: r.Query(), patch: r.MergePatch(), call: c,
		spec: connect.Spec{StreamType: connect.StreamTypeUnary, Schema: r.RPC, Procedure: r.Procedure,
			IdempotencyLevel: idempotency(r.RPC)}}
	pattern, names, last, err := muxPattern(r.Template)
	if err != nil {
		return nil, "", "", err
	}
	for i, v := range r.Vars {
		f := rt.input.Fields().ByName(protoreflect.Name(v))
		if f == nil || f.Kind() != protoreflect.StringKind || f.IsList() || strings.Contains(v, ".") {
			return nil, "", "", fmt.Errorf("path variable %s is not a string field of %s", v, rt.input.FullName())
		}
		rt.vars = append(rt.vars, pathVar{field: f, name: names[i]})
	}
	for k := range rt.params {
		f := field(rt.input, k)
		if f == nil || !queryField(f) {
			return nil, "", "", fmt.Errorf("query parameter %s of %s is not a scalar or a field mask", k, rt.input.FullName())
		}
	}
	switch r.Body {
	case "":
	case "*":
		rt.whole = true
	default:
		f := r.BodyField()
		if f == nil || f.Message() == nil || f.IsList() || f.IsMap() {
			return nil, "", "", fmt.Errorf("body %s is not a message field of %s", r.Body, rt.input.FullName())
		}
		rt.body = f
	}
	if r.OAuth() {
		if !rt.whole {
			return nil, "", "", fmt.Errorf("an OAuth endpoint's body must be the whole request")
		}
		for i := range rt.input.Fields().Len() {
			if f := rt.input.Fields().Get(i); f.Kind() != protoreflect.StringKind || f.IsList() {
				return nil, "", "", fmt.Errorf("OAuth parameter %s is not a string field", f.Name())
			}
		}
	}
	if rb := r.ResponseBody; rb != "" {
		f := r.RPC.Output().Fields().ByName(protoreflect.Name(rb))
		if f == nil {
			return nil, "", "", fmt.Errorf("response body %s is not a field of %s", rb, r.RPC.Output().FullName())
		}
		rt.response = f
	}
	return rt, pattern, last, nil
}

func idempotency(m protoreflect.MethodDescriptor) connect.IdempotencyLevel {
	opts, _ := m.Options().(*descriptorpb.MethodOptions)
	switch opts.GetIdempotencyLevel() {
	case descriptorpb.MethodOptions_NO_SIDE_EFFECTS:
		return connect.IdempotencyNoSideEffects
	case descriptorpb.MethodOptions_IDEMPOTENT:
		return connect.IdempotencyIdempotent
	}
	return connect.IdempotencyUnknown
}

// muxPattern turns a google.api.http path template into an http.ServeMux
// pattern: literals stay, and every variable segment becomes a wildcard
// named by its position ("{_1}"), so that templates differing only in
// their variables' names or verbs share one pattern: "{field}" and
// "{field=*}" and "*" match one segment, "{field=**}" or a final "**" the
// rest of the path. names are the wildcards of the template's variables,
// in order. A verb after a variable is cut: the pattern's last segment is
// then that variable's wildcard, returned as last, and the handler
// matches the verb; a verb after a literal stays in the literal.
// Multi-segment variable patterns ("{name=shelves/*}") are not supported.
func muxPattern(template string) (pattern string, names []string, last string, err error) {
	path, verb := routes.SplitVerb(template)
	if !strings.HasPrefix(path, "/") {
		return "", nil, "", fmt.Errorf("unsupported path template %q", template)
	}
	segs := strings.Split(path[1:], "/")
	n := 0
	for i, seg := range segs {
		final := i == len(segs)-1
		wildcard := func(rest, bound bool) {
			n++
			name := "_" + strconv.Itoa(n)
			if bound {
				names = append(names, name)
			}
			if final && verb != "" {
				last = name
			}
			if rest {
				segs[i] = "{" + name + "...}"
			} else {
				segs[i] = "{" + name + "}"
			}
		}
		switch {
		case seg == "*":
			wildcard(false, false)
		case seg == "**" && final:
			wildcard(true, false)
		case strings.HasPrefix(seg, "{") && strings.HasSuffix(seg, "}"):
			_, pat, _ := strings.Cut(seg[1:len(seg)-1], "=")
			switch {
			case pat == "" || pat == "*":
				wildcard(false, true)
			case pat == "**" && final:
				wildcard(true, true)
			default:
				return "", nil, "", fmt.Errorf("unsupported path template %q", template)
			}
		case strings.ContainsAny(seg, "{}*:") || seg == "":
			return "", nil, "", fmt.Errorf("unsupported path template %q", template)
		case final && verb != "":
			segs[i] = seg + ":" + verb
		}
	}
	return "/" + strings.Join(segs, "/"), names, last, nil
}

// ServeHTTP serves the routes' requests and hands every other to next.
func (g *Gateway) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	for _, p := range g.prefixes {
		if strings.HasPrefix(r.URL.Path, p) {
			g.mux.ServeHTTP(w, r)
			return
		}
	}
	g.next.ServeHTTP(w, r)
}

// groupHandler serves the routes of one pattern: the route of the
// request's verb and method, 405 naming the allowed methods, or 404 for a
// verb of none.
func (g *Gateway) groupHandler(grp *group) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		candidates := grp.routes
		if grp.last != "" {
			candidates = nil
			value, verb := r.PathValue(grp.last), ""
			for _, rt := range grp.routes {
				if rt.Verb != "" && strings.HasSuffix(value, ":"+rt.Verb) && len(rt.Verb) >= len(verb) {
					if len(rt.Verb) > len(verb) {
						candidates = nil
					}
					verb = rt.Verb
					candidates = append(candidates, rt)
				}
			}
			if verb != "" {
				r.SetPathValue(grp.last, strings.TrimSuffix(value, ":"+verb))
			} else {
				for _, rt := range grp.routes {
					if rt.Verb == "" {
						candidates = append(candidates, rt)
					}
				}
			}
			if len(candidates) == 0 {
				g.notFound(w, r)
				return
			}
		}
		ctx := r.Context()
		requestid.InfoFrom(ctx).Route = candidates[0].Template
		oauth := routes.IsOAuthPath(r.URL.Path)
		allow := make([]string, 0, len(candidates))
		for _, rt := range candidates {
			if rt.Method == r.Method {
				g.serve(w, r, rt, oauth)
				return
			}
			allow = append(allow, rt.Method)
		}
		if !g.unrouted(w, r, oauth) {
			return
		}
		w.Header().Set("Allow", strings.Join(allow, ", "))
		code := apierror.CodeMethodNotAllowed
		if oauth {
			code = apierror.CodeInvalidRequest
		}
		WriteError(w, ctx, oauth, http.StatusMethodNotAllowed, apierror.New(code, r.Method+" is not allowed here; use "+strings.Join(allow, " or ")))
	})
}

// notFound answers a request under the gateway's prefixes that matches
// no route.
func (g *Gateway) notFound(w http.ResponseWriter, r *http.Request) {
	requestid.InfoFrom(r.Context()).Route = requestid.Unmatched
	oauth := routes.IsOAuthPath(r.URL.Path)
	if !g.unrouted(w, r, oauth) {
		return
	}
	WriteError(w, r.Context(), oauth, 0, apierror.New(apierror.CodeNotFound, "no such endpoint: "+r.URL.Path))
}

// unrouted runs Check for a request outside /api/oauth that matches no
// route (or not with its method): an identified client still spends a
// request and learns where its bucket stands. It reports whether to go on
// and answer the 404 or 405; false means the refusal is written.
func (g *Gateway) unrouted(w http.ResponseWriter, r *http.Request, oauth bool) bool {
	if g.Check == nil || oauth {
		return true
	}
	if _, e := g.Check(w, r, ""); e != nil {
		WriteError(w, r.Context(), oauth, 0, e)
		return false
	}
	return true
}

// serve serves a request of a known route: the checks, the request
// message, the call and its answer.
func (g *Gateway) serve(w http.ResponseWriter, r *http.Request, rt *route, oauth bool) {
	ctx := r.Context()
	if r.URL.RawQuery != "" && r.URL.Query().Has("access_token") {
		// Refused whatever else the request carries: the token has
		// already leaked into logs on the way here.
		e := apierror.Malformed("access tokens are accepted only in the Authorization header, never in the query string")
		switch {
		case oauth:
			e.Code = apierror.CodeInvalidRequest
		case g.Dialect == Partner:
			e.Challenge = apierror.BearerChallenge(apierror.CodeInvalidRequest, "", "")
		}
		WriteError(w, ctx, oauth, 0, e)
		return
	}
	if g.Check != nil {
		var e *apierror.Error
		if r, e = g.Check(w, r, rt.Procedure); e != nil {
			WriteError(w, ctx, oauth, 0, e)
			return
		}
	}
	if rt.Method == http.MethodGet {
		// A GET body has no meaning (RFC 9110 §9.3.1): drop it unread.
		r.Body, r.ContentLength = http.NoBody, 0
		r.Header.Del("Content-Length")
		r.Header.Del("Content-Encoding")
	}
	p, e := g.prepare(r, rt, oauth)
	if e != nil {
		WriteError(w, ctx, oauth, 0, e)
		return
	}
	msg := rt.call.newRequest()
	if e := rt.fill(msg.ProtoReflect(), r, p, g.Dialect); e != nil {
		g.callError(w, ctx, oauth, apierror.ToConnect(e))
		return
	}
	g.call(w, r, rt, oauth, msg)
}
