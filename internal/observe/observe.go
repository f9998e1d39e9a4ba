// Package observe is the operator's view of every request: one access log
// line, one sample of http_server_request_duration_seconds and one server
// span, all taken in one HTTP middleware so that REST, Connect, gRPC and
// gRPC-Web are recorded alike. What the inner layers learn (the route
// template or RPC procedure, the client, the workspace, why
// authentication failed) reaches it through [requestid.Info]; [Interceptor]
// fills the part the Connect handlers know.
//
// Nothing secret is recorded: no header value, no query string, no body,
// and never the raw path, which may carry ids (the route is a template or
// a procedure name, or "unmatched").
package observe

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"connectrpc.com/connect"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/genproto/googleapis/rpc/errdetails"

	"github.com/svat/partnerapi/internal/observe/metrics"
	"github.com/svat/partnerapi/internal/observe/requestid"
)

// Unmatched is the route of a request no route matched, such as a 404.
const Unmatched = requestid.Unmatched

// TracerName names the instrumentation scope of the spans made here.
const TracerName = "github.com/svat/partnerapi/internal/observe"

// Observer records requests.
type Observer struct {
	// Log receives the access log, one JSON line per request.
	Log *slog.Logger
	// Tracer makes the server spans; nil means no tracing.
	Tracer trace.TracerProvider
	// Listener names the listener in the log ("public", "admin").
	Listener string
}

var propagator = propagation.TraceContext{}

// Middleware records every request served by next. It must run inside
// requestid.Middleware, which puts the Info in the context.
func (o *Observer) Middleware(next http.Handler) http.Handler {
	// With tracing off no span is made at all: no context, no attributes.
	var tracer trace.Tracer
	if o.Tracer != nil {
		tracer = o.Tracer.Tracer(TracerName)
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		ctx := r.Context()
		var span trace.Span
		if tracer != nil {
			// A caller's trace context is linked, not adopted: a partner
			// cannot graft our spans onto a trace of theirs.
			opts := []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindServer),
				trace.WithAttributes(attribute.String("http.request.method", r.Method))}
			if remote := trace.SpanContextFromContext(propagator.Extract(ctx, propagation.HeaderCarrier(r.Header))); remote.IsValid() {
				opts = append(opts, trace.WithNewRoot(), trace.WithLinks(trace.Link{SpanContext: remote}))
			}
			ctx, span = tracer.Start(ctx, r.Method, opts...)
			r = r.WithContext(ctx)
		}
		// Read before the handlers run: they may rewrite the request's
		// headers on their way to the Connect handler.
		method, proto := r.Method, protocol(r)
		sw := &statusWriter{ResponseWriter: w}
		defer func() {
			// A panic that escaped every handler still gets its line; the
			// server then logs the panic itself.
			p := recover()
			if p != nil && sw.status == 0 {
				sw.status = http.StatusInternalServerError
			}
			o.finish(ctx, r, method, proto, sw.status, time.Since(start), span)
			if p != nil {
				panic(p)
			}
		}()
		next.ServeHTTP(sw, r)
	})
}

// finish writes the log line, the metric sample and ends the span.
func (o *Observer) finish(ctx context.Context, r *http.Request, method, proto string, status int, d time.Duration, span trace.Span) {
	if status == 0 {
		status = http.StatusOK // the handler wrote nothing
	}
	info := requestid.InfoFrom(ctx)
	route := Route(info, r)
	// The RPC code belongs to the RPC protocols: a REST call runs its RPC
	// in process, and its HTTP status is the whole answer.
	rpcCode := ""
	if proto != "http" {
		rpcCode = info.RPCCode
	}
	metrics.ObserveRequest(method, route, status, rpcCode, d)

	var traceID string
	if span != nil {
		if span.IsRecording() {
			span.SetName(method + " " + route)
			span.SetAttributes(attribute.String("http.route", route), attribute.Int("http.response.status_code", status))
			if status >= 500 {
				span.SetStatus(codes.Error, http.StatusText(status))
			}
		}
		span.End()
		if sc := span.SpanContext(); sc.IsValid() {
			traceID = sc.TraceID().String()
		}
	}

	level := slog.LevelInfo
	if status >= 500 {
		level = slog.LevelWarn
	}
	if o.Log == nil || !o.Log.Enabled(ctx, level) {
		return
	}
	attrs := make([]slog.Attr, 0, 12)
	attrs = append(attrs,
		slog.String("request_id", info.ID),
		slog.String("method", method),
		slog.String("route", route),
		slog.Int("status", status),
		slog.Float64("duration_ms", float64(d.Microseconds())/1000),
		slog.String("protocol", proto),
	)
	if o.Listener != "" {
		attrs = append(attrs, slog.String("listener", o.Listener))
	}
	if info.ClientID != "" {
		attrs = append(attrs, slog.String("client_id", info.ClientID))
	}
	if info.WorkspaceID != "" {
		attrs = append(attrs, slog.String("workspace_id", info.WorkspaceID))
	}
	if info.AuthFailure != "" {
		attrs = append(attrs, slog.String("auth_failure", info.AuthFailure))
	}
	if rpcCode != "" {
		attrs = append(attrs, slog.String("rpc_code", rpcCode))
	}
	if traceID != "" {
		attrs = append(attrs, slog.String("trace_id", traceID))
	}
	o.Log.LogAttrs(ctx, level, "request", attrs...)
}

// Route is the request's route for logs and metrics: what the layers put
// in Info, else the pattern of the ServeMux route that served it (as
// "/healthz", without the method), else [Unmatched]. It is never the raw
// path: a catch-all pattern ("/") counts as unmatched.
func Route(info *requestid.Info, r *http.Request) string {
	if info.Route != "" {
		return info.Route
	}
	p := r.Pattern
	if i := strings.IndexByte(p, ' '); i >= 0 {
		p = p[i+1:]
	}
	if p == "" || p == "/" {
		return Unmatched
	}
	return p
}

// protocol names the wire protocol of a request.
func protocol(r *http.Request) string {
	ct := r.Header.Get("Content-Type")
	switch {
	case strings.HasPrefix(ct, "application/grpc-web"):
		return "grpc-web"
	case strings.HasPrefix(ct, "application/grpc"):
		return "grpc"
	case r.Header.Get("Connect-Protocol-Version") != "" || strings.HasPrefix(ct, "application/connect+"):
		return "connect"
	}
	return "http"
}

// statusWriter remembers the status of the response.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 && code >= 200 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

// Flush passes flushes on: gRPC streams its frames.
func (w *statusWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		if w.status == 0 {
			w.status = http.StatusOK
		}
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the connection.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// Interceptor fills the request's Info for RPCs: the route is the
// procedure unless the REST gateway already named the route template,
// and a refused authentication records its reason (the ErrorInfo reason
// of an Unauthenticated or PermissionDenied error) unless a layer below
// named a finer one. Put it first in the chain, so it sees every error as
// the caller will.
func Interceptor() connect.Interceptor {
	return connect.UnaryInterceptorFunc(func(next connect.UnaryFunc) connect.UnaryFunc {
		return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
			info := requestid.InfoFrom(ctx)
			if info.Route == "" {
				info.Route = req.Spec().Procedure
			}
			res, err := next(ctx, req)
			if err != nil && info.AuthFailure == "" {
				info.AuthFailure = authFailure(err)
			}
			info.RPCCode = "ok"
			if err != nil {
				info.RPCCode = connect.CodeOf(err).String()
			}
			return res, err
		}
	})
}

// authFailure is the reason of an authentication or authorization error,
// or "".
func authFailure(err error) string {
	var ce *connect.Error
	if !errors.As(err, &ce) {
		return ""
	}
	if ce.Code() != connect.CodeUnauthenticated && ce.Code() != connect.CodePermissionDenied {
		return ""
	}
	for _, d := range ce.Details() {
		if v, derr := d.Value(); derr == nil {
			if ei, ok := v.(*errdetails.ErrorInfo); ok && ei.GetReason() != "" {
				return ei.GetReason()
			}
		}
	}
	return strings.ToLower(ce.Code().String())
}
