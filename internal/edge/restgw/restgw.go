// Package restgw is the REST face of the API, in front of the
// google.api.http transcoder (connectrpc.com/vanguard). It does what the
// transcoder does not:
//
//   - token and revocation bodies may be form-urlencoded or JSON, with a
//     charset; they are checked for repeated parameters and handed on as
//     canonical JSON;
//   - request bodies are capped at 1 MiB (413);
//   - unknown or repeated query parameters are 400, and an access token in
//     the query string is refused;
//   - every error is re-rendered by [WriteError]: RFC 6749 JSON on
//     /api/oauth, RFC 9457 problem+json on /api/v1;
//   - a success answers the status the route declares in the
//     partner.rest.v1.rest option (201 for creates).
//
// Routes are read from the same google.api.http annotations the transcoder
// uses, so nothing here repeats the API's shape by hand: each rule's path
// template becomes an http.ServeMux pattern ("/api/v1/contacts/{id}"), and
// the matched template is the request's route in logs and metrics
// (requestid.Info.Route), never the raw path.
package restgw

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"google.golang.org/genproto/googleapis/api/annotations"
	"google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	restv1 "github.com/svat/partnerapi/gen/partner/rest/v1"
	"github.com/svat/partnerapi/internal/edge/apierror"
	"github.com/svat/partnerapi/internal/edge/reqbody"
	"github.com/svat/partnerapi/internal/edge/requestid"
	"github.com/svat/partnerapi/internal/records/fieldmask"
	"github.com/svat/partnerapi/internal/records/validate"
)

// MaxBodyBytes caps every request body, compressed or inflated.
const MaxBodyBytes = reqbody.MaxBytes

type route struct {
	method string
	// template is the google.api.http path template, e.g.
	// "/api/v1/contacts/{id}".
	template string
	input    protoreflect.MessageDescriptor
	// params are the names a GET query string or an OAuth body may use.
	params map[string]bool
	// status is the success status from the partner.rest.v1.rest option;
	// 0 means 200.
	status int
	// procedure is the RPC the route calls, "/pkg.Service/Method".
	procedure string
	// vars are the template's variables, e.g. "id".
	vars []string
	// patch is the message a PATCH body is a JSON merge patch of, when the
	// RPC is an AIP-134 update (its request has an update_mask).
	patch protoreflect.MessageDescriptor
	// whole is set when the body is the whole request (body: "*"): the
	// transcoder then hands it to the handler unparsed, past the strict
	// REST codec, so the gateway checks it.
	whole protoreflect.MessageType
	// desc is the RPC.
	desc protoreflect.MethodDescriptor
	// direct, when set, serves the route in process (see Direct).
	direct *directRoute
}

// Gateway wraps the transcoder.
type Gateway struct {
	next http.Handler
	// mux holds one pattern per path template; its handler picks the
	// route of the request's method.
	mux *http.ServeMux
	// Check, when set, runs after a route matched and before the body is
	// read: the cheap checks that can refuse a request (credentials,
	// scope, rate limits) must not wait for a body, let alone inflate one.
	// It returns the request to go on with, or the error to answer. It is
	// called with an empty procedure for an /api/v1 request that matches
	// no route.
	Check func(w http.ResponseWriter, r *http.Request, procedure string) (*http.Request, *apierror.Error)
	// CompressMinBytes is the smallest answer of an in-process route that
	// is gzipped for a client that accepts it; 0 never compresses.
	CompressMinBytes int
	// routes are every route, for Direct.
	routes []*route
}

// New builds the gateway for the REST routes of services. It panics on a
// path template it cannot turn into a ServeMux pattern, which is a mistake
// in a .proto file, found at start-up.
func New(transcoder http.Handler, services ...protoreflect.ServiceDescriptor) *Gateway {
	g := &Gateway{next: transcoder, mux: http.NewServeMux()}
	byTemplate := map[string][]route{}
	var templates []string
	for _, svc := range services {
		for i := range svc.Methods().Len() {
			m := svc.Methods().Get(i)
			rule, _ := proto.GetExtension(m.Options(), annotations.E_Http).(*annotations.HttpRule)
			if rule == nil {
				continue
			}
			method, path := ruleTarget(rule)
			if path == "" {
				continue
			}
			params := fieldNames(m.Input())
			vars := templateVars(path)
			for _, v := range vars {
				delete(params, v)
			}
			rt := route{method: method, template: path, input: m.Input(), params: params, status: successStatus(m),
				procedure: "/" + string(svc.FullName()) + "/" + string(m.Name()), vars: vars, desc: m}
			if method == http.MethodPatch {
				rt.patch = mergePatchTarget(m.Input(), rule.GetBody())
			}
			if rule.GetBody() == "*" && !IsOAuthPath(path) {
				rt.whole, _ = protoregistry.GlobalTypes.FindMessageByName(m.Input().FullName())
			}
			if byTemplate[path] == nil {
				templates = append(templates, path)
			}
			byTemplate[path] = append(byTemplate[path], rt)
		}
	}
	for _, t := range templates {
		routes := byTemplate[t]
		for i := range routes {
			g.routes = append(g.routes, &routes[i])
		}
		g.mux.Handle(muxPattern(t), g.routesHandler(routes))
	}
	g.mux.HandleFunc("/api/", func(w http.ResponseWriter, r *http.Request) {
		requestid.InfoFrom(r.Context()).Route = requestid.Unmatched
		oauth := IsOAuthPath(r.URL.Path)
		if !g.unrouted(w, r, oauth) {
			return
		}
		WriteError(w, r.Context(), oauth, 0, apierror.New(apierror.CodeNotFound, "no such endpoint: "+r.URL.Path))
	})
	return g
}

// mergePatchTarget returns the message type of the body field of an
// AIP-134 update request (one with a google.protobuf.FieldMask
// update_mask), or nil.
func mergePatchTarget(input protoreflect.MessageDescriptor, body string) protoreflect.MessageDescriptor {
	mask := input.Fields().ByName("update_mask")
	field := input.Fields().ByName(protoreflect.Name(body))
	if mask == nil || mask.Message() == nil || mask.Message().FullName() != "google.protobuf.FieldMask" ||
		field == nil || field.Message() == nil {
		return nil
	}
	return field.Message()
}

// muxPattern turns a google.api.http path template into an http.ServeMux
// pattern: literals stay, "{field}" and "{field=*}" match one segment, and
// "{field=**}" or a final "**" the rest of the path. Verbs (":verb") and
// multi-segment variable patterns are not supported.
func muxPattern(template string) string {
	if !strings.HasPrefix(template, "/") || strings.Contains(template, ":") {
		panic("restgw: unsupported path template " + strconv.Quote(template))
	}
	segs := strings.Split(template[1:], "/")
	anon := 0
	for i, seg := range segs {
		last := i == len(segs)-1
		switch {
		case seg == "*":
			anon++
			segs[i] = "{_" + strconv.Itoa(anon) + "}"
		case seg == "**" && last:
			segs[i] = "{_rest...}"
		case strings.HasPrefix(seg, "{") && strings.HasSuffix(seg, "}"):
			name, pat, _ := strings.Cut(seg[1:len(seg)-1], "=")
			name = strings.ReplaceAll(name, ".", "_")
			switch {
			case pat == "" || pat == "*":
				segs[i] = "{" + name + "}"
			case pat == "**" && last:
				segs[i] = "{" + name + "...}"
			default:
				panic("restgw: unsupported path template " + strconv.Quote(template))
			}
		case strings.ContainsAny(seg, "{}*"):
			panic("restgw: unsupported path template " + strconv.Quote(template))
		}
	}
	return "/" + strings.Join(segs, "/")
}

// templateVars lists the field paths a path template binds, e.g. "id".
func templateVars(template string) []string {
	var out []string
	for _, seg := range strings.Split(template, "/") {
		if strings.HasPrefix(seg, "{") && strings.HasSuffix(seg, "}") {
			name, _, _ := strings.Cut(seg[1:len(seg)-1], "=")
			out = append(out, name)
		}
	}
	return out
}

// routesHandler serves the routes of one path template: the route of the
// request's method, or 405 naming the allowed methods.
func (g *Gateway) routesHandler(routes []route) http.Handler {
	allow := make([]string, 0, len(routes))
	for _, rt := range routes {
		allow = append(allow, rt.method)
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx := r.Context()
		requestid.InfoFrom(ctx).Route = routes[0].template
		oauth := IsOAuthPath(r.URL.Path)
		for i := range routes {
			if routes[i].method == r.Method {
				g.serveRoute(w, r, &routes[i], oauth)
				return
			}
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

// unrouted runs Check for an /api/v1 request that matches no route (or
// not with its method): an identified client still spends a request and
// learns where its bucket stands. It reports whether to go on and answer
// the 404 or 405; false means the refusal is written.
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

// successStatus reads the partner.rest.v1.rest option of m.
func successStatus(m protoreflect.MethodDescriptor) int {
	r, _ := proto.GetExtension(m.Options(), restv1.E_Rest).(*restv1.Rest)
	return int(r.GetSuccessStatus())
}

func ruleTarget(r *annotations.HttpRule) (method, path string) {
	switch p := r.GetPattern().(type) {
	case *annotations.HttpRule_Get:
		return http.MethodGet, p.Get
	case *annotations.HttpRule_Post:
		return http.MethodPost, p.Post
	case *annotations.HttpRule_Put:
		return http.MethodPut, p.Put
	case *annotations.HttpRule_Patch:
		return http.MethodPatch, p.Patch
	case *annotations.HttpRule_Delete:
		return http.MethodDelete, p.Delete
	}
	return "", ""
}

func fieldNames(md protoreflect.MessageDescriptor) map[string]bool {
	out := map[string]bool{}
	for i := range md.Fields().Len() {
		f := md.Fields().Get(i)
		out[string(f.Name())] = true
		out[f.JSONName()] = true
	}
	return out
}

func (g *Gateway) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !strings.HasPrefix(r.URL.Path, "/api/") {
		g.next.ServeHTTP(w, r)
		return
	}
	g.mux.ServeHTTP(w, r)
}

// serveRoute hands a request of a known route to the transcoder.
func (g *Gateway) serveRoute(w http.ResponseWriter, r *http.Request, rt *route, oauth bool) {
	ctx := r.Context()
	if r.URL.RawQuery != "" && r.URL.Query().Has("access_token") {
		// Refused whatever else the request carries: the token has
		// already leaked into logs on the way here.
		e := apierror.Malformed("access tokens are accepted only in the Authorization header, never in the query string")
		if !oauth {
			e.Challenge = apierror.BearerChallenge(apierror.CodeInvalidRequest, "", "")
		} else {
			e.Code = apierror.CodeInvalidRequest
		}
		WriteError(w, ctx, oauth, 0, e)
		return
	}
	if g.Check != nil {
		var e *apierror.Error
		if r, e = g.Check(w, r, rt.procedure); e != nil {
			WriteError(w, ctx, oauth, 0, e)
			return
		}
	}
	if rt.method == http.MethodGet {
		// A GET body has no meaning (RFC 9110 §9.3.1): drop it unread, as
		// the transcoder would otherwise refuse it as an internal error.
		r.Body, r.ContentLength = http.NoBody, 0
		r.Header.Del("Content-Length")
		r.Header.Del("Content-Encoding")
	}
	p, err := g.prepare(r, rt)
	if err != nil {
		var e *apierror.Error
		if errors.As(err, &e) {
			WriteError(w, ctx, oauth, 0, e)
		} else {
			WriteError(w, ctx, oauth, 0, apierror.Malformed(err.Error()))
		}
		return
	}
	if rt.direct != nil {
		g.serveDirect(w, r, rt, oauth, p)
		return
	}
	cw := &captureWriter{ResponseWriter: w, success: rt.status}
	g.next.ServeHTTP(cw, r)
	if cw.failed {
		WriteError(w, ctx, oauth, cw.status, cw.decode(oauth))
	}
}

// prepared is what prepare read: the body (bounded, inflated, a token
// request's parameters as JSON) and the request of a whole-body route,
// parsed strictly.
type prepared struct {
	body  []byte
	whole proto.Message
}

// prepare validates and rewrites the request for the transcoder.
func (g *Gateway) prepare(r *http.Request, rt *route) (prepared, error) {
	oauth := IsOAuthPath(r.URL.Path)
	invalid := func(msg string) error {
		if oauth {
			return apierror.New(apierror.CodeInvalidRequest, msg)
		}
		return apierror.Malformed(msg)
	}
	for _, v := range rt.vars {
		// The transcoder cannot put such bytes in a string field: a 500.
		if !validate.CleanText(r.PathValue(strings.ReplaceAll(v, ".", "_"))) {
			e := apierror.Malformed(v + ": " + validate.CleanTextMessage)
			e.Fields = []apierror.FieldViolation{{Field: v, Code: validate.InvalidFormat, Message: validate.CleanTextMessage}}
			return prepared{}, e
		}
	}
	if r.URL.RawQuery == "" {
		return prepareBody(r, rt, oauth, invalid)
	}
	query := r.URL.Query()
	if rt.method != http.MethodGet {
		return prepared{}, invalid("query parameters are not accepted here; send them in the body")
	}
	for k, v := range query {
		if !rt.params[k] {
			return prepared{}, invalid("unknown query parameter " + strconv.Quote(k))
		}
		// A field named both ways (externalId and external_id) is repeated
		// too: which value won would depend on map order.
		f := rt.input.Fields().ByJSONName(k)
		if f == nil {
			f = rt.input.Fields().ByName(protoreflect.Name(k))
		}
		other := ""
		if f != nil && string(f.Name()) != f.JSONName() {
			other = f.JSONName()
			if other == k {
				other = string(f.Name())
			}
		}
		if len(v) > 1 {
			return prepared{}, invalid("query parameter " + strconv.Quote(k) + " is repeated")
		}
		if other != "" && query.Has(other) {
			return prepared{}, invalid("query parameter " + strconv.Quote(k) + " is repeated (also sent as " + strconv.Quote(other) + ")")
		}
		if msg := badQueryValue(rt.input, k, v[0]); msg != "" {
			e := apierror.Malformed(k + ": " + msg)
			e.Fields = []apierror.FieldViolation{{Field: k, Code: validate.InvalidFormat, Message: msg}}
			if oauth {
				e.Code = apierror.CodeInvalidRequest
			}
			return prepared{}, e
		}
	}
	return prepared{}, nil
}

// badQueryValue says what is wrong with the value of query parameter name,
// or "" when the transcoder can take it: text must be valid UTF-8 without
// NUL (PostgreSQL text holds neither), numbers must parse. The transcoder's
// own message would quote Go's parser.
func badQueryValue(input protoreflect.MessageDescriptor, name, v string) string {
	if !validate.CleanText(v) {
		return validate.CleanTextMessage
	}
	f := input.Fields().ByJSONName(name)
	if f == nil {
		f = input.Fields().ByName(protoreflect.Name(name))
	}
	if f == nil {
		return ""
	}
	var err error
	switch f.Kind() {
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind:
		_, err = strconv.ParseInt(v, 10, 32)
	case protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind:
		_, err = strconv.ParseInt(v, 10, 64)
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind:
		_, err = strconv.ParseUint(v, 10, 32)
	case protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		_, err = strconv.ParseUint(v, 10, 64)
	case protoreflect.BoolKind:
		_, err = strconv.ParseBool(v)
	default:
		return ""
	}
	if err != nil {
		if f.Kind() == protoreflect.BoolKind {
			return "must be true or false"
		}
		return "must be an integer"
	}
	return ""
}

// prepareBody caps, parses and normalises the body of a POST or PATCH.
func prepareBody(r *http.Request, rt *route, oauth bool, invalid func(string) error) (prepared, error) {
	var p prepared
	if r.Body == nil || r.Method == http.MethodGet {
		return p, nil
	}
	// Bounded on the wire and once inflated; Content-Encoding is gone
	// afterwards, so the transcoder never inflates anything itself.
	body, e := reqbody.Read(r)
	if e != nil {
		return p, e
	}
	if oauth {
		params, err := ParseOAuthBody(r.Header.Get("Content-Type"), body, rt.params)
		if err != nil {
			return p, invalid(err.Error())
		}
		body, _ = json.Marshal(params)
	} else {
		mt, err := mediaType(r.Header.Get("Content-Type"))
		if err != nil {
			return p, apierror.New(apierror.CodeUnsupportedMedia, err.Error())
		}
		// A PATCH body is a JSON merge patch (RFC 7396), under its own
		// media type or as plain JSON.
		if mt != "application/json" && !(mt == "application/merge-patch+json" && r.Method == http.MethodPatch) {
			if r.Method == http.MethodPatch {
				return p, apierror.New(apierror.CodeUnsupportedMedia, "send Content-Type: application/merge-patch+json or application/json")
			}
			return p, apierror.New(apierror.CodeUnsupportedMedia, "send Content-Type: application/json")
		}
	}
	p.body = body
	if rt.whole != nil {
		// Unknown fields are a 400 on every REST body; the handler's codec
		// would drop them.
		msg := rt.whole.New().Interface()
		if err := (protojson.UnmarshalOptions{}).Unmarshal(body, msg); err != nil {
			msg := strings.TrimPrefix(strings.TrimPrefix(err.Error(), "proto:"), "\u00a0")
			return p, invalid("malformed JSON: " + strings.TrimSpace(msg))
		}
		p.whole = msg
	}
	if rt.patch != nil {
		// RFC 7396 over AIP-134: the members the patch sends, null
		// included, are the update mask, so that null clears and an absent
		// member keeps (protojson alone cannot tell null from absent). The
		// client may not send a query string here, so this is the only one.
		var patch map[string]any
		if err := json.Unmarshal(body, &patch); err != nil || patch == nil {
			return p, invalid("the body must be a JSON merge patch: a JSON object of the fields to change")
		}
		if mask := fieldmask.FromJSON(rt.patch, patch); mask != "" {
			r.URL.RawQuery = "updateMask=" + url.QueryEscape(mask)
		} else if fieldmask.MergesNothing(rt.patch, patch) {
			// Nothing to change ({} or only empty objects such as
			// {"value":{}}, which merge nothing): without a mask the
			// handler would update the populated fields, replacing a
			// value with an empty one.
			body = []byte("{}")
			p.body = body
			if rt.whole != nil {
				p.whole = rt.whole.New().Interface()
			}
		}
	}
	if rt.direct != nil {
		return p, nil
	}
	// The transcoder compares Content-Type exactly, so normalise it.
	r.Header.Set("Content-Type", "application/json")
	r.Body = io.NopCloser(bytes.NewReader(body))
	r.ContentLength = int64(len(body))
	r.Header.Set("Content-Length", strconv.Itoa(len(body)))
	return p, nil
}

// captureWriter holds back error responses so WriteError can render them,
// and turns the transcoder's 200 into the route's declared success status.
type captureWriter struct {
	http.ResponseWriter
	success     int
	wroteHeader bool
	failed      bool
	status      int
	buf         bytes.Buffer
}

func (c *captureWriter) WriteHeader(code int) {
	if c.wroteHeader {
		return
	}
	c.wroteHeader = true
	c.status = code
	// A Connect protocol header the transcoder leaves behind; meaningless
	// on a REST response.
	c.Header().Del("Accept-Encoding")
	if code >= 400 {
		c.failed = true
		return
	}
	if code == http.StatusOK && c.success != 0 {
		code = c.success
	}
	c.ResponseWriter.WriteHeader(code)
}

func (c *captureWriter) Write(b []byte) (int, error) {
	if !c.wroteHeader {
		c.WriteHeader(http.StatusOK)
	}
	if c.failed {
		if c.buf.Len() < 64<<10 {
			c.buf.Write(b)
		}
		return len(b), nil
	}
	return c.ResponseWriter.Write(b)
}

// Flush does nothing: every REST route is unary, and letting net/http
// send the response when the handler returns gives it a Content-Length and
// one write instead of a chunked body and two.
func (c *captureWriter) Flush() {}

// decode recovers the domain error from the transcoder's google.rpc.Status
// body. Errors the transcoder made itself (404, 415, bad JSON) carry no
// detail of ours and are named by their status.
func (c *captureWriter) decode(oauth bool) *apierror.Error {
	var st status.Status
	if err := protojson.Unmarshal(c.buf.Bytes(), &st); err == nil {
		if e, ok := apierror.FromStatus(&st); ok {
			c.status = 0
			return e
		}
		return frameworkError(oauth, &c.status)
	}
	return frameworkError(oauth, &c.status)
}

// frameworkError stands in for an error the transcoder or the RPC
// framework made itself, with no detail of ours. Its text may quote Go
// internals ("get decompressor: unexpected EOF"), so the caller gets a
// message of ours for the status instead. The transcoder's
// ResourceExhausted can only be a size limit (a rate limit of ours always
// carries its ErrorInfo), so it is a 413, not a 429.
func frameworkError(oauth bool, status *int) *apierror.Error {
	if *status == http.StatusTooManyRequests {
		*status = http.StatusRequestEntityTooLarge
	}
	code := apierror.CodeForStatus(*status)
	if oauth && *status < 500 {
		code = apierror.CodeInvalidRequest
	}
	var msg string
	switch *status {
	case http.StatusBadRequest:
		msg = "the request is malformed"
	case http.StatusNotFound:
		msg = "no such endpoint"
	case http.StatusRequestEntityTooLarge:
		msg = "the request body exceeds 1 MiB"
	case http.StatusUnsupportedMediaType:
		msg = "unsupported media type; send Content-Type: application/json"
	default:
		if *status >= 500 {
			msg = "the server could not process the request"
		} else {
			msg = strings.ToLower(http.StatusText(*status))
		}
	}
	return apierror.New(code, msg)
}
