package restgw

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"sync"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"

	"github.com/svat/partnerapi/internal/contract/apierror"
	"github.com/svat/partnerapi/internal/edge/jsoncodec"
	"github.com/svat/partnerapi/internal/records/etag"
)

// This file is the call: the route's request message goes to the RPC's
// implementation behind the interceptors of its Connect handler
// (authentication, scope, error mapping, request budget, clean text,
// panics, the access log's route and tracing), which see the same Spec and
// Peer as over Connect; the answer is written with the JSON codec of the
// Connect handlers, or the error with [WriteError] (a google.rpc.Status on
// a [Google] gateway).

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

// call runs the route's RPC on msg and writes its answer.
func (g *Gateway) call(w http.ResponseWriter, r *http.Request, rt *route, oauth bool, msg proto.Message) {
	ctx := r.Context()
	req := rt.call.wrap(msg)
	h := req.Header()
	for k, v := range r.Header {
		h[k] = v
	}
	res, err := rt.chain(ctx, direct{AnyRequest: req, spec: rt.spec,
		peer: connect.Peer{Addr: r.RemoteAddr, Protocol: connect.ProtocolConnect}})
	if err != nil {
		ce := apierror.ToConnect(err)
		for k, v := range ce.Meta() {
			w.Header()[k] = v
		}
		g.callError(w, ctx, oauth, ce)
		return
	}
	if r.Method == http.MethodGet && len(r.Header.Values(etag.IfNoneMatch)) > 0 {
		// A conditional GET (RFC 9110 §13.1.2): the handler answered, and
		// its ETag decides between the record and a 304 with no body.
		same, err := etag.NotModified(r.Header.Values(etag.IfNoneMatch), res.Header().Get(etag.Header))
		if err != nil {
			g.callError(w, ctx, oauth, apierror.ToConnect(err))
			return
		}
		if same {
			w.Header().Set(etag.Header, res.Header().Get(etag.Header))
			w.WriteHeader(http.StatusNotModified)
			return
		}
	}
	if rt.Success == http.StatusNoContent {
		// A delete: the answer is the status (RFC 9110 §15.3.5).
		for k, v := range res.Header() {
			w.Header()[k] = v
		}
		w.WriteHeader(http.StatusNoContent)
		return
	}
	bp := bytesPool.Get().(*[]byte)
	var body []byte
	if rt.response != nil {
		body, err = jsoncodec.AppendRESTField((*bp)[:0], res.Any().(proto.Message), rt.response)
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
		g.callError(w, ctx, oauth, apierror.ToConnect(apierror.Internal(err)))
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
	w.WriteHeader(rt.Success)
	_, _ = w.Write(payload)
}

// callError answers an error of the call: a google.rpc.Status on a
// Google gateway; otherwise the domain error its details carry, or, for
// an error with none (the RPC framework's own, a cancelled call), the
// code that stands for its RPC code ([apierror.Standing]) with words of
// ours, never its own, which may quote Go internals.
func (g *Gateway) callError(w http.ResponseWriter, ctx context.Context, oauth bool, ce *connect.Error) {
	if g.Dialect == Google {
		writeStatus(w, ce)
		return
	}
	if e, ok := apierror.FromConnect(ce); ok {
		WriteError(w, ctx, oauth, 0, e)
		return
	}
	status := apierror.RPCStatus(ce.Code())
	code := apierror.Standing(ce.Code())
	if oauth && status < 500 {
		code = apierror.CodeInvalidRequest
	}
	var msg string
	switch status {
	case http.StatusBadRequest:
		msg = "the request is malformed"
	case http.StatusNotFound:
		msg = "no such endpoint"
	default:
		if status >= 500 {
			msg = "the server could not process the request"
		} else {
			msg = strings.ToLower(http.StatusText(status))
		}
	}
	WriteError(w, ctx, oauth, status, apierror.New(code, msg))
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

// acceptsGzip reads Accept-Encoding as the Connect handlers do: comma
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
