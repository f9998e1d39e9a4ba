package db

import (
	"context"
	"strings"

	"github.com/jackc/pgx/v5"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// tracer makes a client span for each statement and batch, as a child of
// the request's span. It takes the tracer provider from that span, so the
// database calls are traced exactly when the request is, by the same
// provider, with no global state; outside a recording span it costs one
// context lookup.
//
// A span carries the sqlc query name (the "-- name: X" comment every
// generated statement starts with), never the arguments.
type tracer struct{}

var _ interface {
	pgx.QueryTracer
	pgx.BatchTracer
} = tracer{}

const tracerName = "github.com/svat/partnerapi/db"

type spanKey struct{}

func (tracer) start(ctx context.Context, name string) context.Context {
	parent := trace.SpanFromContext(ctx)
	if !parent.IsRecording() {
		return ctx
	}
	ctx, span := parent.TracerProvider().Tracer(tracerName).Start(ctx, name,
		trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(attribute.String("db.system.name", "postgresql"), attribute.String("db.operation.name", name)))
	return context.WithValue(ctx, spanKey{}, span)
}

func (tracer) end(ctx context.Context, err error) {
	span, ok := ctx.Value(spanKey{}).(trace.Span)
	if !ok {
		return
	}
	if err != nil {
		span.SetStatus(codes.Error, "statement failed")
	}
	span.End()
}

// TraceQueryStart implements pgx.QueryTracer.
func (t tracer) TraceQueryStart(ctx context.Context, _ *pgx.Conn, data pgx.TraceQueryStartData) context.Context {
	return t.start(ctx, queryName(data.SQL))
}

// TraceQueryEnd implements pgx.QueryTracer.
func (t tracer) TraceQueryEnd(ctx context.Context, _ *pgx.Conn, data pgx.TraceQueryEndData) {
	t.end(ctx, data.Err)
}

// TraceBatchStart implements pgx.BatchTracer.
func (t tracer) TraceBatchStart(ctx context.Context, _ *pgx.Conn, data pgx.TraceBatchStartData) context.Context {
	return t.start(ctx, "batch")
}

// TraceBatchQuery implements pgx.BatchTracer.
func (tracer) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {}

// TraceBatchEnd implements pgx.BatchTracer.
func (t tracer) TraceBatchEnd(ctx context.Context, _ *pgx.Conn, data pgx.TraceBatchEndData) {
	t.end(ctx, data.Err)
}

// queryName is the sqlc name of a statement ("-- name: ContactCreate :one"),
// or its first word ("BEGIN", "COMMIT").
func queryName(sql string) string {
	sql = strings.TrimSpace(sql)
	if rest, ok := strings.CutPrefix(sql, "-- name: "); ok {
		if i := strings.IndexAny(rest, " \n"); i > 0 {
			return rest[:i]
		}
	}
	if i := strings.IndexAny(sql, " \n;"); i > 0 {
		return strings.ToUpper(sql[:i])
	}
	return strings.ToUpper(sql)
}
