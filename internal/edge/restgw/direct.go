package restgw

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"sync"

	"connectrpc.com/connect"
	"google.golang.org/genproto/googleapis/api/annotations"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/descriptorpb"

	"github.com/svat/partnerapi/internal/edge/apierror"
	"github.com/svat/partnerapi/internal/edge/jsoncodec"
)

// This file is the gateway's in-process path: a route whose RPC has a
// [Call] is served without the transcoder and without the RPC framework's
// HTTP layer. The gateway builds the request message from the path, the
// query and the body exactly as the transcoder would (same field rules,
// same strict JSON, same error texts), runs the procedure's implementation
// behind the same interceptors its Connect handler has (authentication,
// scope, error mapping, request budget, clean text, panics, the access
// log's route and tracing), and renders the answer with the same JSON
// codec, or the error with [WriteError]. The transcoder still serves any
// route without a Call.

// Call is one procedure the gateway may call in process.
type Call struct {
	newRequest func() proto.Message
	wrap       func(msg proto.Message) connect.AnyRequest
	unary      connect.UnaryFunc
}

// Method makes the Call of a generated handler method (the method of the
// service implementation that its Connect handler calls).
func Method[Req, Res any](f func(context.Context, *connect.Request[Req]) (*connect.Response[Res], error)) Call {
	return Call{
		newRequest: func() proto.Message { return any(new(Req)).(proto.Message) },
		wrap: func(msg proto.Message) connect.AnyRequest {
			return connect.NewRequest(any(msg).(*Req))
		},
		unary: func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
			if d, ok := req.(direct); ok {
				req = d.AnyRequest
			}
			res, err := f(ctx, req.(*connect.Request[Req]))
			if err != nil {
				return nil, err
			}
			if res == nil {
				return nil, errors.New("handler returned a nil response")
			}
			return res, nil
		},
	}
}

// direct is a request of an in-process call: the RPC framework is not
// there to say which procedure runs and who calls, so it says so itself.
// The interceptors see the same Spec and Peer as over Connect.
type direct struct {
	connect.AnyRequest
	spec connect.Spec
	peer connect.Peer
}

func (d direct) Spec() connect.Spec { return d.spec }
func (d direct) Peer() connect.Peer { return d.peer }

// directRoute is what an in-process route needs beyond its route.
type directRoute struct {
	call Call
	spec connect.Spec
	// chain is the implementation behind the interceptors.
	chain connect.UnaryFunc
	// vars are the path template's variables: field and ServeMux name.
	vars []pathVar
	// body is the field the body fills (nil: none, or the whole request
	// when wholeBody).
	body      protoreflect.FieldDescriptor
	wholeBody bool
	// response is the field answered as the body (nil: the whole message).
	response protoreflect.FieldDescriptor
}

type pathVar struct {
	field protoreflect.FieldDescriptor
	name  string
}

// Direct lets the gateway call procedures in process: calls maps a
// procedure ("/pkg.Service/Method") to its implementation, and
// interceptors are those of the Connect handlers, outermost first. A route
// whose shape the in-process path does not cover (path patterns beyond
// "{field}", query parameters of other kinds than scalars and field masks)
// stays on the transcoder.
func (g *Gateway) Direct(calls map[string]Call, interceptors ...connect.Interceptor) {
	for _, rt := range g.routes {
		c, ok := calls[rt.procedure]
		if !ok {
			continue
		}
		d := rt.planDirect(c)
		if d == nil {
			continue
		}
		d.chain = c.unary
		for i := len(interceptors) - 1; i >= 0; i-- {
			d.chain = interceptors[i].WrapUnary(d.chain)
		}
		rt.direct = d
	}
}

// planDirect returns how to serve rt in process, or nil.
func (rt *route) planDirect(c Call) *directRoute {
	m := rt.desc
	rule, _ := proto.GetExtension(m.Options(), annotations.E_Http).(*annotations.HttpRule)
	if rule == nil || rt.patch != nil && rt.input.Fields().ByName("update_mask") == nil {
		return nil
	}
	d := &directRoute{call: c, spec: connect.Spec{
		StreamType: connect.StreamTypeUnary, Schema: m, Procedure: rt.procedure,
		IdempotencyLevel: idempotency(m),
	}}
	for _, v := range templateVars(rt.template) {
		f := rt.input.Fields().ByName(protoreflect.Name(v))
		if f == nil || f.Kind() != protoreflect.StringKind || f.IsList() || strings.Contains(v, ".") {
			return nil
		}
		d.vars = append(d.vars, pathVar{field: f, name: v})
	}
	for i := range rt.input.Fields().Len() {
		// Every field may come from the query string (a GET) or, for an
		// update, the mask the gateway derives from the merge patch.
		f := rt.input.Fields().Get(i)
		if rt.method == http.MethodGet && !directParam(f) {
			return nil
		}
	}
	switch b := rule.GetBody(); b {
	case "":
	case "*":
		d.wholeBody = true
	default:
		f := rt.input.Fields().ByName(protoreflect.Name(b))
		if f == nil || f.Message() == nil || f.IsList() || f.IsMap() {
			return nil
		}
		d.body = f
	}
	if rb := rule.GetResponseBody(); rb != "" {
		f := m.Output().Fields().ByName(protoreflect.Name(rb))
		if f == nil || f.Message() == nil || f.IsList() || f.IsMap() {
			return nil
		}
		d.response = f
	}
	if rt.patch != nil && !directParam(rt.input.Fields().ByName("update_mask")) {
		return nil
	}
	return d
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

// directParam reports whether a query parameter of field f can be set
// in process as the transcoder sets it.
func directParam(f protoreflect.FieldDescriptor) bool {
	if f.IsList() || f.IsMap() {
		return false
	}
	switch f.Kind() {
	case protoreflect.StringKind, protoreflect.BoolKind,
		protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind,
		protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind,
		protoreflect.Uint32Kind, protoreflect.Fixed32Kind, protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		return true
	case protoreflect.MessageKind:
		return f.Message().FullName() == "google.protobuf.FieldMask"
	}
	// A GET request's message fields that are not parameters (the body of
	// another method) never reach here: GET routes have no body.
	return false
}

// serveDirect serves a prepared request of a route with an in-process
// call. whole is the strictly parsed request of a whole-body route, body
// the prepared body of the others.
func (g *Gateway) serveDirect(w http.ResponseWriter, r *http.Request, rt *route, oauth bool, p prepared) {
	ctx := r.Context()
	d := rt.direct
	msg := p.whole
	if msg == nil {
		msg = d.call.newRequest()
		if e := d.fill(msg.ProtoReflect(), r, p.body); e != nil {
			status := 0
			if e == errFramework {
				// What the transcoder refuses with no detail of ours.
				status = http.StatusBadRequest
				e = frameworkError(oauth, &status)
			}
			WriteError(w, ctx, oauth, status, e)
			return
		}
	}
	req := d.call.wrap(msg)
	h := req.Header()
	for k, v := range r.Header {
		h[k] = v
	}
	res, err := d.chain(ctx, direct{AnyRequest: req, spec: d.spec,
		peer: connect.Peer{Addr: r.RemoteAddr, Protocol: connect.ProtocolConnect}})
	if err != nil {
		ce := apierror.ToConnect(err)
		for k, v := range ce.Meta() {
			w.Header()[k] = v
		}
		e, ok := apierror.FromConnect(ce)
		status := 0
		if !ok {
			status = statusOf(ce.Code())
			e = frameworkError(oauth, &status)
		}
		WriteError(w, ctx, oauth, status, e)
		return
	}
	bp := bytesPool.Get().(*[]byte)
	var body []byte
	if d.response != nil {
		body, err = jsoncodec.AppendRESTField((*bp)[:0], res.Any().(proto.Message), d.response)
	} else {
		body, err = jsoncodec.AppendREST((*bp)[:0], res.Any().(proto.Message))
	}
	// The encoded JSON goes back to its pool, never the gzip buffer that
	// may replace it as the payload: both pools would own that one.
	defer func() {
		if cap(body) <= 256<<10 {
			*bp = body[:0]
			bytesPool.Put(bp)
		}
	}()
	if err != nil {
		// The handler's headers (ETag, Location) describe the answer
		// that could not be sent: not this one.
		WriteError(w, ctx, oauth, 0, apierror.Internal(err))
		return
	}
	out := w.Header()
	for k, v := range res.Header() {
		out[k] = v
	}
	out["Content-Type"] = jsonContentType
	if g.CompressMinBytes > 0 {
		// Whether it is gzipped depends on Accept-Encoding: a cache must
		// not give a stored gzip answer to a client that cannot read it.
		out.Add("Vary", "Accept-Encoding")
	}
	payload := body
	if len(body) >= g.CompressMinBytes && g.CompressMinBytes > 0 && acceptsGzip(r.Header) {
		if z, ok := gzipBody(body); ok {
			defer putBuf(z)
			payload = z.Bytes()
			out["Content-Encoding"] = gzipEncoding
		}
	}
	out["Content-Length"] = []string{strconv.Itoa(len(payload))}
	status := http.StatusOK
	if rt.status != 0 {
		status = rt.status
	}
	w.WriteHeader(status)
	_, _ = w.Write(payload)
}

var (
	jsonContentType = []string{"application/json"}
	gzipEncoding    = []string{"gzip"}
	bufPool         = sync.Pool{New: func() any { return new(bytes.Buffer) }}
	bytesPool       = sync.Pool{New: func() any { b := make([]byte, 0, 1024); return &b }}
	gzipPool        = sync.Pool{New: func() any {
		z, _ := gzip.NewWriterLevel(nil, gzip.BestSpeed)
		return z
	}}
)

func putBuf(b *bytes.Buffer) {
	if b.Cap() > 256<<10 {
		return
	}
	b.Reset()
	bufPool.Put(b)
}

// gzipBody compresses body at BestSpeed, as the RPC handlers do.
func gzipBody(body []byte) (*bytes.Buffer, bool) {
	out := bufPool.Get().(*bytes.Buffer)
	z := gzipPool.Get().(*gzip.Writer)
	defer gzipPool.Put(z)
	z.Reset(out)
	if _, err := z.Write(body); err != nil {
		putBuf(out)
		return nil, false
	}
	if err := z.Close(); err != nil {
		putBuf(out)
		return nil, false
	}
	return out, true
}

// acceptsGzip reads Accept-Encoding as the transcoder does: comma
// separated names, no weights.
func acceptsGzip(h http.Header) bool {
	for _, v := range h.Values("Accept-Encoding") {
		for part := range strings.SplitSeq(v, ",") {
			if strings.TrimSpace(part) == "gzip" {
				return true
			}
		}
	}
	return false
}

// statusOf is the transcoder's HTTP status of an RPC code, for an error
// that carries no domain detail.
func statusOf(c connect.Code) int {
	switch c {
	case connect.CodeCanceled:
		return 499
	case connect.CodeInvalidArgument, connect.CodeFailedPrecondition, connect.CodeOutOfRange:
		return http.StatusBadRequest
	case connect.CodeDeadlineExceeded:
		return http.StatusGatewayTimeout
	case connect.CodeNotFound:
		return http.StatusNotFound
	case connect.CodeAlreadyExists, connect.CodeAborted:
		return http.StatusConflict
	case connect.CodePermissionDenied:
		return http.StatusForbidden
	case connect.CodeResourceExhausted:
		return http.StatusTooManyRequests
	case connect.CodeUnimplemented:
		return http.StatusNotImplemented
	case connect.CodeUnavailable:
		return http.StatusServiceUnavailable
	case connect.CodeUnauthenticated:
		return http.StatusUnauthorized
	}
	return http.StatusInternalServerError
}

// fill sets the request's fields from the body, the path and the query
// string, in the transcoder's order. The query string has passed prepare:
// known, single, well-formed parameters only.
func (d *directRoute) fill(msg protoreflect.Message, r *http.Request, body []byte) *apierror.Error {
	if d.body != nil && len(body) > 0 {
		if err := jsoncodec.UnmarshalStrict(body, msg.Mutable(d.body).Message().Interface()); err != nil {
			return err
		}
	}
	if d.wholeBody && len(body) > 0 {
		// An OAuth body, as canonical JSON of string parameters: read as
		// the handler's own codec would.
		if err := (jsoncodec.Codec{}).Unmarshal(body, msg.Interface()); err != nil {
			return errFramework
		}
	}
	for _, v := range d.vars {
		msg.Set(v.field, protoreflect.ValueOfString(r.PathValue(v.name)))
	}
	if r.URL.RawQuery == "" {
		return nil
	}
	fields := msg.Descriptor().Fields()
	for k, vs := range r.URL.Query() {
		f := fields.ByJSONName(k)
		if f == nil {
			f = fields.ByName(protoreflect.Name(k))
		}
		if f == nil {
			continue
		}
		for _, v := range vs {
			if e := setParam(msg, f, v); e != nil {
				return e
			}
		}
	}
	return nil
}

// setParam sets one query parameter as the transcoder does (its JSON
// reading of scalars; a field mask in its JSON form).
func setParam(msg protoreflect.Message, f protoreflect.FieldDescriptor, v string) *apierror.Error {
	var val protoreflect.Value
	var err error
	switch f.Kind() {
	case protoreflect.StringKind:
		val = protoreflect.ValueOfString(v)
	case protoreflect.BoolKind:
		var b bool
		err = json.Unmarshal([]byte(v), &b)
		val = protoreflect.ValueOfBool(b)
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind:
		var x int64
		x, err = strconv.ParseInt(v, 10, 32)
		val = protoreflect.ValueOfInt32(int32(x))
	case protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind:
		var x int64
		x, err = strconv.ParseInt(v, 10, 64)
		val = protoreflect.ValueOfInt64(x)
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind:
		var x uint64
		x, err = strconv.ParseUint(v, 10, 32)
		val = protoreflect.ValueOfUint32(uint32(x))
	case protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		var x uint64
		x, err = strconv.ParseUint(v, 10, 64)
		val = protoreflect.ValueOfUint64(x)
	case protoreflect.MessageKind:
		val = msg.NewField(f)
		q, _ := json.Marshal(v)
		err = protojson.Unmarshal(q, val.Message().Interface())
	}
	if err != nil {
		return errFramework
	}
	msg.Set(f, val)
	return nil
}

// errFramework stands for a request the transcoder would refuse without
// a domain error (an unparsable parameter): the caller answers it as
// frameworkError does.
var errFramework = apierror.Malformed("the request is malformed")

// Transcoded lists the routes ("GET /api/v1/…") that the transcoder
// serves because they have no in-process Call.
func (g *Gateway) Transcoded() []string {
	var out []string
	for _, rt := range g.routes {
		if rt.direct == nil {
			out = append(out, rt.method+" "+rt.template)
		}
	}
	return out
}
