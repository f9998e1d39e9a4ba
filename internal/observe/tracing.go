package observe

import (
	"context"
	"fmt"
	"os"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// TracingEnabled reports whether the environment asks for trace export:
// OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is set
// and OTEL_SDK_DISABLED and OTEL_TRACES_EXPORTER=none do not turn it off.
func TracingEnabled(getenv func(string) string) bool {
	if strings.EqualFold(getenv("OTEL_SDK_DISABLED"), "true") || getenv("OTEL_TRACES_EXPORTER") == "none" {
		return false
	}
	return getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != ""
}

// TracerProviderFromEnv returns a tracer provider that exports spans over
// OTLP/HTTP (protobuf) as the standard OTEL_EXPORTER_OTLP_* variables say
// (endpoint, headers, timeout, certificates, compression), with the
// sampler of OTEL_TRACES_SAMPLER and the resource of OTEL_SERVICE_NAME and
// OTEL_RESOURCE_ATTRIBUTES. When tracing is not asked for it returns nil:
// no span is made at all. shutdown flushes what is buffered.
func TracerProviderFromEnv(ctx context.Context, version string) (tp trace.TracerProvider, shutdown func(context.Context) error, err error) {
	if !TracingEnabled(os.Getenv) {
		return nil, func(context.Context) error { return nil }, nil
	}
	if p := os.Getenv("OTEL_EXPORTER_OTLP_PROTOCOL"); p != "" && p != "http/protobuf" {
		return nil, nil, fmt.Errorf("OTEL_EXPORTER_OTLP_PROTOCOL=%s is not supported; use http/protobuf (the default)", p)
	}
	exp, err := otlptracehttp.New(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("create OTLP trace exporter: %w", err)
	}
	res, err := resource.Merge(
		resource.NewSchemaless(attribute.String("service.name", "partnerapi"), attribute.String("service.version", version)),
		resource.Environment(),
	)
	if err != nil {
		return nil, nil, fmt.Errorf("build trace resource: %w", err)
	}
	sdk := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	return sdk, sdk.Shutdown, nil
}
