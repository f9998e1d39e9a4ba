package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"connectrpc.com/connect"
	"connectrpc.com/otelconnect"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/svat/partnerapi/db"
	"github.com/svat/partnerapi/internal/contract/apierror"
	"github.com/svat/partnerapi/internal/observe"
	"github.com/svat/partnerapi/internal/observe/metrics"
	"github.com/svat/partnerapi/internal/observe/requestid"
)

// firstInterceptors run before any other: the one that names the route
// and the auth failure for the access log, and the RPC span when tracing.
func firstInterceptors(tp trace.TracerProvider) ([]connect.Interceptor, error) {
	out := []connect.Interceptor{observe.Interceptor()}
	if tp == nil {
		return out, nil
	}
	otel, err := otelconnect.NewInterceptor(otelconnect.WithTracerProvider(tp), otelconnect.WithoutMetrics(),
		otelconnect.WithPropagator(propagation.TraceContext{}))
	if err != nil {
		return nil, fmt.Errorf("create tracing interceptor: %w", err)
	}
	return append(out, otel), nil
}

// errorInterceptor is the single exit of every handler error: infrastructure
// errors are classified, everything becomes a Connect error through
// apierror.ToConnect, and failures the caller cannot fix are logged with
// the request id. No request data, and so no credential, is logged. It
// also gives the request its database time budget: a database that does
// not answer in time, like one that cannot be reached, is 503.
func errorInterceptor(log *slog.Logger, budget time.Duration) connect.Interceptor {
	return connect.UnaryInterceptorFunc(func(next connect.UnaryFunc) connect.UnaryFunc {
		return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
			ctx, cancel := db.WithBudget(ctx, budget)
			defer cancel()
			res, err := next(ctx, req)
			if err == nil {
				return res, nil
			}
			err = unavailable(ctx, err)
			ce := apierror.ToConnect(err)
			if req.Peer().Protocol == connect.ProtocolGRPC {
				// HTTP/2 forbids WWW-Authenticate as a trailer, where gRPC
				// puts error metadata; net/http would drop it with a
				// warning. ErrorInfo carries the same reason.
				ce.Meta().Del("Www-Authenticate")
			}
			switch ce.Code() {
			case connect.CodeInternal, connect.CodeUnknown, connect.CodeUnavailable, connect.CodeDataLoss:
				log.ErrorContext(ctx, "request failed", "procedure", req.Spec().Procedure,
					"request_id", requestid.FromContext(ctx), "err", err)
			}
			return nil, ce
		}
	})
}

// unavailable turns a database outage, or the request's own database
// budget running out (not the caller's deadline), into the 503 domain
// error; any other error passes unchanged. The error interceptor and the
// gate's classifier both use it, so a database failure is 503 wherever
// it is met.
func unavailable(ctx context.Context, err error) error {
	if ctx.Err() != nil && (errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled)) {
		if cause := context.Cause(ctx); errors.Is(cause, db.ErrUnavailable) {
			err = fmt.Errorf("%w: %v", cause, err)
		}
	}
	if errors.Is(err, db.ErrBusy) {
		// The workspace's own concurrent requests hold its share of the
		// pool: its load, not an outage.
		metrics.RateLimited.WithLabelValues("database").Inc()
		return &apierror.Error{Code: apierror.CodeRateLimited,
			Message:    "too many concurrent requests of this workspace are using the database; retry later",
			RetryAfter: "1", Cause: err}
	}
	if errors.Is(err, db.ErrUnavailable) || errors.Is(err, db.ErrRetry) {
		return &apierror.Error{Code: apierror.CodeUnavailable, Message: "the database is unavailable; retry later",
			RetryAfter: "1", Cause: err}
	}
	return err
}

func recoverPanic(log *slog.Logger) func(context.Context, connect.Spec, http.Header, any) error {
	return func(ctx context.Context, spec connect.Spec, _ http.Header, p any) error {
		log.ErrorContext(ctx, "handler panicked", "procedure", spec.Procedure, "request_id", requestid.FromContext(ctx), "panic", fmt.Sprint(p))
		return apierror.ToConnect(apierror.Internal(fmt.Errorf("panic: %v", p)))
	}
}

// recoverInterceptor turns a handler's panic into the error handle
// returns, as connect.WithRecover does; being an interceptor of our own, it
// also guards the REST gateway's in-process calls.
func recoverInterceptor(handle func(context.Context, connect.Spec, http.Header, any) error) connect.Interceptor {
	return connect.UnaryInterceptorFunc(func(next connect.UnaryFunc) connect.UnaryFunc {
		return func(ctx context.Context, req connect.AnyRequest) (_ connect.AnyResponse, err error) {
			defer func() {
				if p := recover(); p != nil {
					if p == http.ErrAbortHandler { //nolint:errorlint // net/http compares with ==
						panic(p)
					}
					err = handle(ctx, req.Spec(), req.Header(), p)
				}
			}()
			return next(ctx, req)
		}
	})
}
